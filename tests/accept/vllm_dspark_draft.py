"""vLLM 0.33.0's own DSpark drafting of one block a request, executed on the CPU (run as a subprocess by
test_accept_block_engines.py): the GPU model runner's DSpark speculator, from its buffers to its drafted tokens,
on the backbone's hidden states given by the test.

From the wheel, unchanged (compiled out of its files with ``ast``, tests/wheels.py ``WheelSource``, with the
files' own line numbers; imported by their real names where the file's imports allow it):

* the speculator, built by its own constructors: ``DSparkSpeculator.__init__`` (``v1/worker/gpu/spec_decode/dspark/
  speculator.py:43-82``: ``sample_from_anchor`` read from the draft's config, default true, so N query rows a request
  or 1 + N; ``_anchor_idx``) over ``DFlashSpeculator.__init__`` (``dflash/speculator.py:41-131``: the sampling
  buffers) over ``DraftModelSpeculator.__init__`` (``spec_decode/speculator.py:107-212``: ``draft_tokens``, no draft
  logits for ``draft_sample_method`` "greedy", the default; ``InputBuffers``, ``input_batch.py:23-39``), with the
  wheel's ``get_parallel_drafting_token_id`` (``spec_decode/utils.py:92-114``), ``get_eagle3_aux_layers_from_config``
  (``eagle/eagle3_utils.py:113-150``), ``dflash_has_any_non_causal`` / ``_dflash_layer_causal``
  (``model_executor/models/qwen3_dflash.py:62-81``), ``_target_feeds_hc_residual`` (``spec_decode/speculator.py:
  48-58``) and ``CUDAGraphMode`` (``config/compilation.py:53-110``);
* the block's inputs: ``prepare_dflash_inputs`` and its ``_prepare_dflash_inputs_kernel`` (``dflash/speculator.py:
  637-927``; what ``propose`` launches, ``:513-544``), under Triton's interpreter, with ``cp_local_slot``
  (``v1/worker/gpu/cp_utils.py``, imported): each request's query rows ``[bonus, mask...]``, their positions, the
  context positions, and the rows sampled (``sample_indices``, ``sample_pos``: with ``sample_from_anchor`` every
  row, row k predicting position + 1; without, rows 1..N, ``:778-789``);
* the drafting loop: ``DSparkSpeculator._sample_sequential`` and ``_sample_logits`` (``dspark/speculator.py:
  116-209``, the part of ``_generate_draft``, ``:260-278``, after the backbone's forward): the sampled rows' base
  logits, the anchor (``input_ids`` at query offset 0) as the first previous token, then left to right the Markov
  bias of the previous token added and the argmax taken, each pick the next step's previous token; with
  ``DraftModelSpeculator._maybe_predict_acceptance`` (``spec_decode/speculator.py:483-493``, no estimator);
* the draft model's methods the loop calls: ``Qwen3DSparkForCausalLM.compute_draft_logits``,
  ``map_draft_to_target``, ``markov_embed``, ``markov_bias`` (``model_executor/models/qwen3_dspark.py:273-288``)
  and ``DSparkMarkovHead.embed`` / ``bias`` (``:83-93``: the bias is ``LogitsProcessor(markov_w2, embed)``), through
  vLLM's ``LogitsProcessor`` (``model_executor/layers/logits_processor.py:69-199``: ``__init__``, ``forward``,
  ``_get_logits``, ``_apply_head``, ``_gather_logits``), built as ``Qwen3DSparkForCausalLM.__init__`` builds it
  (``qwen3_dspark.py:249-257``: ``LogitsProcessor(draft_vocab_size, scale=logit_scale)``), and the lm_head's
  ``UnquantizedEmbeddingMethod.apply`` (``vocab_parallel_embedding.py:73-83``) -> ``dispatch_unquantized_gemm`` ->
  ``default_unquantized_gemm`` (``model_executor/layers/utils.py:682-694, 83-89``).

Stand-ins (what cannot be built on the CPU without the rest of vLLM), no more:

* the configuration: ``SimpleNamespace`` objects holding exactly the fields the constructors read (a draft config
  of the test draft's values; ``max_num_seqs`` = the requests; greedy drafts; no adaptive verification, no
  watermark, data parallel 1; ``cudagraph_mode`` NONE, an eager draft step: a FULL graph replays the same
  ``_generate_draft``), and ``ParallelConfig`` a dataclass (``vllm.config.replace`` is ``dataclasses.replace`` for
  it); ``get_current_vllm_config().model_config.head_dtype`` float32, the model's dtype (``config/model.py:
  2521-2545``, a generation model);
* the platform: ``current_platform`` a CUDA one (``is_cuda`` true, the rest false; ``use_all_gather`` true, the
  interface's default), so the GEMM is ``default_unquantized_gemm`` (``F.linear``) as on a GPU without a FlashInfer
  backend; ``envs.VLLM_BATCH_INVARIANT`` false (its default); no tensor-parallel group (``tp_size`` 1: the gathers
  are never called); ``vllm.triton_utils`` the real Triton (as tests/accept/vllm_block_accept.py);
* the weight holders: ``lm_head`` and ``markov_w2`` are modules holding ``weight``, ``quant_method``
  (``UnquantizedEmbeddingMethod``) and ``tp_size`` 1 in place of ``ParallelLMHead`` (whose padded vocab is the
  same here: the test's vocab, 64, is a multiple of ``DEFAULT_VOCAB_PADDING_SIZE`` 64); ``lm_head`` is the target's
  head (``dspark/utils.py:136-147`` shares it when the draft has none); ``markov_w1`` the ``nn.Embedding`` of
  ``qwen3_dspark.py:71``, the draft's weights loaded by their checkpoint names; no ``d2t`` (full vocab,
  ``:262-268``);
* the target batch: one request a block, as after a prefill of the request's first L tokens (positions 0..L-1, its
  sampled token x_L the bonus: ``num_sampled`` 1, ``num_rejected`` 0), block tables of non-null blocks;
* the backbone: the draft's forward is not vLLM's; its final-normed hidden states of every query row
  (``head_hidden``, what ``_run_model`` returns) are the test's, computed on the block vLLM builds (the test checks
  the ids, positions and context the kernel wrote are the ones it ran).

stdin: JSON ``{"vllm_wheel", "triton_dir", "work", "inputs", "output"}``; ``inputs`` a ``torch.save`` file of
``{"head_hidden": [R, Q, H] (every query row of each request), "anchors": [R] (L), "bonus": [R] (x_L),
"target_head": [V, H], "markov": {"markov_w1.weight", "markov_w2.weight"}, "config": {"num_speculative_tokens",
"hf_config"}}`` (``hf_config``: the draft config's keys, ``sample_from_anchor`` absent for the default); ``output``
gets ``{"drafts": [R, N], "input_ids", "positions": [R * Q], "context_positions": [sum L], "sample_indices",
"sample_pos": [R * N], "num_query_per_req", "sample_from_anchor"}``.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import json
import linecache
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.wheels (a script)

from tests import wheels  # noqa: E402

GPU = "vllm/v1/worker/gpu/"
DSPARK = GPU + "spec_decode/dspark/speculator.py"
DFLASH = GPU + "spec_decode/dflash/speculator.py"
SPECULATOR = GPU + "spec_decode/speculator.py"
MODEL = "vllm/model_executor/models/qwen3_dspark.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
VOCAB_EMB = "vllm/model_executor/layers/vocab_parallel_embedding.py"
LAYER_UTILS = "vllm/model_executor/layers/utils.py"
MAX_MODEL_LEN = 4096  # the model's context length: past every position here
EXTRACT = (GPU + "cp_utils.py", GPU + "sample/gumbel.py")


class _Platform:
    """``current_platform`` as on an NVIDIA GPU, for the few questions the code asks."""

    @staticmethod
    def is_cuda():
        return True

    @staticmethod
    def is_cuda_alike():
        return True

    @staticmethod
    def use_all_gather():
        return True  # Platform.use_all_gather's default (platforms/interface.py:1279-1281)

    is_rocm = is_cpu = is_xpu = staticmethod(lambda: False)


def _never(*args, **kwargs):
    raise AssertionError("a tensor-parallel gather: tp_size is 1")


@dataclasses.dataclass
class ParallelConfig:  # the fields DFlashSpeculator / DraftModelSpeculator read (config/parallel.py)
    data_parallel_size: int = 1
    data_parallel_rank: int = 0
    prefill_context_parallel_size: int = 1
    decode_context_parallel_size: int = 1


def jitted(src: wheels.WheelSource, path: str, names: tuple[str, ...], ns: dict) -> dict:
    """``definitions`` of a file holding ``@triton.jit`` kernels: the interpreter re-reads a kernel's source, so the
    wheel's text is put in ``linecache`` under the name the code was compiled with."""
    text = src.text(path)
    name = f"{src.wheel.name}/{path}"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    return src.definitions(path, names, ns)


def build(src: wheels.WheelSource, inputs: dict, load) -> tuple[object, dict]:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn

    cfg = inputs["config"]
    R, Q, H = inputs["head_hidden"].shape
    V, rank = inputs["markov"]["markov_w1.weight"].shape
    n = cfg["num_speculative_tokens"]
    # the scheduler's token budget: every request's target tokens (the context) and its query rows
    max_num_tokens = -(-(int(inputs["anchors"].sum()) + R * Q) // 256) * 256

    # -- the speculator, by its constructors
    hf = types.SimpleNamespace(**{k: v for k, v in cfg["hf_config"].items()})
    draft_model_config = types.SimpleNamespace(hf_config=hf, use_mla=False, get_hidden_size=lambda: H,
                                               get_vocab_size=lambda: V)
    spec_config = types.SimpleNamespace(method="dspark", num_speculative_tokens=n,
                                        draft_model_config=draft_model_config,
                                        use_local_argmax_reduction=False, enable_adaptive_verification=False,
                                        draft_sample_method="greedy")
    modes = src.definitions("vllm/config/compilation.py", ("CUDAGraphMode",), {"enum": enum})["CUDAGraphMode"]
    vllm_config = types.SimpleNamespace(
        speculative_config=spec_config, parallel_config=ParallelConfig(),
        scheduler_config=types.SimpleNamespace(max_num_seqs=R, max_num_batched_tokens=max_num_tokens),
        model_config=types.SimpleNamespace(max_model_len=MAX_MODEL_LEN, dtype=torch.float32,
                                           use_fp64_gumbel=False, head_dtype=torch.float32),
        compilation_config=types.SimpleNamespace(cudagraph_mode=modes.NONE), watermark_config=None)
    buffers = src.definitions(GPU + "input_batch.py", ("InputBuffers",), {"torch": torch})["InputBuffers"]
    hc = src.function(SPECULATOR, "_target_feeds_hc_residual", {"get_model_cls": lambda model_config: nn.Module})
    draft_base = src.cls(SPECULATOR, "DraftModelSpeculator", ("__init__", "max_model_len", "_maybe_predict_acceptance"),
                         (object,), {"torch": torch, "np": np, "InputBuffers": buffers,
                                     "_target_feeds_hc_residual": hc})
    draft_base.max_model_len = property(draft_base.max_model_len)  # @property in the wheel (:214-217)
    causal = src.definitions("vllm/model_executor/models/qwen3_dflash.py",
                             ("_SLIDING_ATTENTION", "_dflash_layer_causal", "dflash_has_any_non_causal"), {})
    dflash_ns = {"torch": torch, "copy": copy, "replace": dataclasses.replace, "CUDAGraphMode": modes,
                 "get_parallel_drafting_token_id": src.function(GPU + "spec_decode/utils.py",
                                                                "get_parallel_drafting_token_id", {}),
                 "dflash_has_any_non_causal": causal["dflash_has_any_non_causal"],
                 "get_eagle3_aux_layers_from_config": src.function(GPU + "spec_decode/eagle/eagle3_utils.py",
                                                                   "get_eagle3_aux_layers_from_config", {})}
    dflash_base = src.cls(DFLASH, "DFlashSpeculator", ("__init__",), (draft_base,), dflash_ns)
    gumbel = load("vllm.v1.worker.gpu.sample.gumbel").gumbel_sample  # the probabilistic path's (not taken: greedy)
    speculator_cls = src.cls(DSPARK, "DSparkSpeculator", ("__init__", "_sample_logits", "_sample_sequential"),
                             (dflash_base,), {"torch": torch, "gumbel_sample": gumbel})
    spec = speculator_cls(vllm_config, torch.device("cpu"))

    # -- the draft model's pieces the loop calls
    platform = _Platform
    gemm = src.function(LAYER_UTILS, "dispatch_unquantized_gemm", {
        "current_platform": platform, "functools": functools,
        "default_unquantized_gemm": src.function(LAYER_UTILS, "default_unquantized_gemm", {"torch": torch}),
        # the wheel's table (:148-154) has one entry, never the default "auto" backend
        "_FLASHINFER_BF16_BACKENDS": {"flashinfer_cutedsl": None}})
    quant = src.cls(VOCAB_EMB, "UnquantizedEmbeddingMethod", ("apply",), (object,), {
        "envs": types.SimpleNamespace(VLLM_BATCH_INVARIANT=False), "current_platform": platform,
        "dispatch_unquantized_gemm": gemm})
    logits_cls = src.cls(LOGITS, "LogitsProcessor", ("__init__", "forward", "_gather_logits", "_apply_head",
                                                     "_get_logits"), (nn.Module,), {
        "torch": torch, "F": F, "current_platform": platform,
        "get_current_vllm_config": lambda: vllm_config, "tensor_model_parallel_all_gather": _never,
        "tensor_model_parallel_gather": _never, "UnquantizedEmbeddingMethod": quant, "UnquantizedLinearMethod": quant})

    class Head(nn.Module):  # ParallelLMHead's stand-in: the weight and what LogitsProcessor reads of it
        def __init__(self, rows: int, cols: int):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(rows, cols), requires_grad=False)
            self.quant_method, self.tp_size = quant(), 1

    markov_cls = src.cls(MODEL, "DSparkMarkovHead", ("embed", "bias"), (nn.Module,), {"torch": torch})
    markov = markov_cls()
    markov.markov_w1 = nn.Embedding(V, rank)  # qwen3_dspark.py:71
    markov.markov_w2 = Head(V, rank)  # :72-79, disable_tp
    markov.load_state_dict(inputs["markov"], strict=True)
    model_cls = src.cls(MODEL, "Qwen3DSparkForCausalLM", ("compute_draft_logits", "map_draft_to_target",
                                                           "markov_embed", "markov_bias"), (nn.Module,),
                        {"torch": torch})
    model = model_cls()
    model.model = nn.Module()
    model.model.markov_head = markov
    model.lm_head = Head(V, H)
    model.lm_head.weight.data.copy_(inputs["target_head"])
    # Qwen3DSparkForCausalLM.__init__ (qwen3_dspark.py:240-241, 249-257): draft_vocab_size defaults to vocab_size
    draft_vocab = getattr(hf, "draft_vocab_size", None) or hf.vocab_size
    model.logits_processor = logits_cls(draft_vocab, scale=getattr(hf, "logit_scale", 1.0))
    model.draft_id_to_target_id = None
    spec.model = model.eval()

    cp = load("vllm.v1.worker.gpu.cp_utils")
    import triton
    import triton.language as tl

    kernels = jitted(src, DFLASH, ("_prepare_dflash_inputs_kernel", "prepare_dflash_inputs"),
                     {"torch": torch, "triton": triton, "tl": tl, "cp_local_slot": cp.cp_local_slot,
                      "PAD_SLOT_ID": -1})  # v1/attention/backends/utils.py:54
    return spec, kernels


def draft(src: wheels.WheelSource, inputs: dict, load) -> dict:
    import numpy as np
    import torch

    spec, kernels = build(src, inputs, load)
    anchors, bonus = inputs["anchors"].long(), inputs["bonus"].long()
    R = len(anchors)
    n, Q = spec.num_speculative_steps, spec.num_query_per_req
    assert inputs["head_hidden"].shape[1] == Q, (inputs["head_hidden"].shape, Q)
    # the target batch: request r ran positions 0..L_r-1 and sampled x_{L_r}
    lens = anchors.tolist()
    query_start = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int32)
    batch = types.SimpleNamespace(num_reqs=R, num_scheduled_tokens=np.array(lens, dtype=np.int32),
                                  positions=torch.cat([torch.arange(L, dtype=torch.int64) for L in lens]),
                                  query_start_loc=query_start, idx_mapping=torch.arange(R, dtype=torch.int32))
    block_size = 16
    blocks = (max(lens) + Q) // block_size + 1
    block_table = (torch.arange(R * blocks, dtype=torch.int32).view(R, blocks) + 1)  # block 0 is the null block
    max_num_tokens = spec.max_num_tokens
    context_slots = torch.zeros(max_num_tokens, dtype=torch.int64)
    query_slots = torch.zeros(max_num_tokens, dtype=torch.int64)
    kernels["prepare_dflash_inputs"](
        spec.input_buffers, query_slots, spec.context_positions, context_slots, spec.sample_indices, spec.sample_pos,
        spec.sample_idx_mapping, spec.temperature, spec.seeds, batch, torch.ones(R, dtype=torch.int32),
        torch.zeros(R, dtype=torch.int32), bonus.clone(), torch.zeros(R, dtype=torch.int64),
        torch.zeros(R, dtype=torch.float32), torch.zeros(R, dtype=torch.int64), block_table, block_size,
        0, 1, 1, spec.parallel_drafting_token_id, Q, n, spec.max_num_reqs, max_num_tokens, spec.max_model_len,
        spec.sample_from_anchor, R)
    head_hidden = inputs["head_hidden"].reshape(R * Q, -1).contiguous()  # row r * Q + k: request r's query row k
    with torch.inference_mode():
        spec._sample_sequential(R, head_hidden)
    total = int(query_start[-1])
    return {"drafts": spec.draft_tokens[:R].clone(), "input_ids": spec.input_buffers.input_ids[:R * Q].clone(),
            "positions": spec.input_buffers.positions[:R * Q].clone(),
            "context_positions": spec.context_positions[:total].clone(),
            "sample_indices": spec.sample_indices[:R * n].clone(), "sample_pos": spec.sample_pos[:R * n].clone(),
            "num_query_per_req": Q, "sample_from_anchor": spec.sample_from_anchor}


def main() -> None:
    req = json.load(sys.stdin)
    shim = wheels.vllm_triton_utils(req["triton_dir"])
    import torch
    src = wheels.WheelSource(Path(req["vllm_wheel"]))
    root = wheels.extract(src.wheel, Path(req["work"]), *EXTRACT)
    inputs = torch.load(req["inputs"], weights_only=False)
    with wheels.wheel_modules(root, "vllm", {"vllm.triton_utils": shim}) as load:
        out = draft(src, inputs, load)
    torch.save(out, req["output"])


if __name__ == "__main__":
    main()
