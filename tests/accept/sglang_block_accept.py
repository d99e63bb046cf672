"""SGLang 0.5.23's own DFlash / DSpark verify and DSpark block drafting, executed on the CPU (run as a subprocess by
test_accept_block_engines.py).

From the wheel, unchanged:

* ``kernels/ops/speculative/dflash.py`` (the whole file, imported): ``compute_dflash_correct_drafts_and_bonus``
  (its CPU path, ``:398-401``), the ``_fused_correct_drafts_and_bonus_kernel`` its CUDA path launches (``:383-391``,
  launched the same way, under Triton's interpreter) and ``_compute_dflash_accept_bonus_triton_unchecked``, the
  DFlash worker's fast path (``srt/speculative/dflash_worker_v2.py:2231-2248``), also under the interpreter;
* ``kernels/ops/speculative/dspark/dspark_accept.py`` ``accept_greedy`` and ``_row_argmax`` (compiled out of the file
  with ast: the file imports SGLang's server packages), DSpark's all-greedy verify (``AcceptGreedy.torch``,
  ``dspark_verify.py:1262-1268``);
* ``srt/speculative/dspark_components/dspark_draft.py`` ``draft_markov_block`` and ``_draft_step`` (compiled out),
  over ``kernels/ops/speculative/dspark/markov_sample.py`` (the whole file, imported: ``MarkovSampleStep``'s CPU
  path) and SGLang's Markov heads ``VanillaMarkov`` / ``GatedMarkovHead`` / ``RNNHead`` (``srt/models/dspark.py``,
  the classes compiled out with the methods a draft step calls), loaded with the test draft's head weights;
  ``SpecTpSync.sync`` (``spec_tp_sync.py``) on one rank (no site synced).

The files are imported from a throwaway package whose ``sglang/srt/utils.py`` is a stub: ``is_npu`` and the other
platform tests return False (the Triton path, as on a GPU). Its own process: Triton is imported with the interpreter
switched on, and the test process's torch never sees Triton.

stdin: JSON ``{"sglang_wheel", "triton_dir", "work", "inputs", "output"}``; ``inputs`` a ``torch.save`` file of
``{"dflash": {"candidates", "target_predict", "prefix_lens"}, "dspark": {"base_logits", "hidden", "anchors",
"kind", "head", "target_logits"}}`` (either may be absent); ``output`` where the results are saved the same way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.wheels (a script)

from tests.wheels import WheelSource  # noqa: E402

KERNELS = "sglang/kernels/ops/speculative/"
IMPORTED = (KERNELS + "dflash.py", KERNELS + "dspark/dispatch.py", KERNELS + "dspark/markov_sample.py")
MODELS = "sglang/srt/models/dspark.py"
DRAFT = "sglang/srt/speculative/dspark_components/dspark_draft.py"
HEADS = {"vanilla": "VanillaMarkov", "gated": "GatedMarkovHead", "rnn": "RNNHead"}


def stub_package(src: WheelSource, root: Path) -> None:
    for d in ("sglang", "sglang/srt", "sglang/kernels", "sglang/kernels/ops", KERNELS.rstrip("/"), KERNELS + "dspark"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "__init__.py").write_text("")
    (root / "sglang/srt/utils.py").write_text(
        "def _no():\n    return False\n\n\nis_cpu = is_cuda = is_hip = is_musa = is_npu = is_xpu = _no\n")
    for path in IMPORTED:
        (root / path).write_text(src.text(path))


def dflash(req: dict) -> dict:
    import torch
    import triton

    from sglang.kernels.ops.speculative import dflash as dk

    cand, tp = req["candidates"].contiguous(), req["target_predict"].contiguous()
    bs, block = cand.shape
    eager = dk.compute_dflash_correct_drafts_and_bonus(candidates=cand, target_predict=tp)
    kernel = (torch.empty(bs, dtype=torch.int32), torch.empty(bs, dtype=torch.int64))
    dk._fused_correct_drafts_and_bonus_kernel[(bs,)](cand, tp, kernel[0], kernel[1], block,
                                                     BLOCK=triton.next_power_of_2(max(block - 1, 1)))
    accept, commit, bonus = (torch.empty(bs, dtype=torch.int32), torch.empty(bs, dtype=torch.int32),
                             torch.empty(bs, dtype=torch.int64))
    out_tokens, new_seq = torch.empty(bs, block, dtype=torch.int64), torch.empty(bs, dtype=torch.int64)
    dk._compute_dflash_accept_bonus_triton_unchecked(
        candidates=cand, target_top1=tp, accept_lens_out=accept, commit_lens_out=commit, bonus_ids_out=bonus,
        out_tokens_out=out_tokens, prefix_lens=req["prefix_lens"], new_seq_lens_out=new_seq)
    return {"eager": eager, "kernel": kernel, "worker": (accept, bonus, commit, out_tokens, new_seq)}


def markov_heads(src: WheelSource) -> dict:
    from typing import Optional, Tuple

    import torch
    import torch.nn.functional as F
    from torch import nn

    ns = {"torch": torch, "nn": nn, "F": F, "Optional": Optional, "Tuple": Tuple}
    base = src.cls(MODELS, "BaseDSparkMarkovHead", ("init_state",), (nn.Module,), ns)
    base.vocab_shard = None  # the wheel's class attribute (srt/models/dspark.py:158): a whole vocab
    vanilla = src.cls(MODELS, "VanillaMarkov", ("__init__", "get_prev_embeddings", "project_bias", "step_logits_dtype",
                                                "step_bias"), (base,), ns)
    vanilla._w2_rows = None  # (srt/models/dspark.py:188): no TP shard
    return {"vanilla": vanilla,
            "gated": src.cls(MODELS, "GatedMarkovHead", ("__init__", "compute_gate", "step_bias"), (vanilla,), ns),
            "rnn": src.cls(MODELS, "RNNHead", ("__init__", "_rnn_step", "init_state", "step_bias"), (vanilla,), ns)}


def dspark(req: dict, src: WheelSource) -> dict:
    from enum import IntEnum
    from typing import Optional

    import msgspec
    import torch

    from sglang.kernels.ops.speculative import dflash as dk
    from sglang.kernels.ops.speculative.dspark.markov_sample import MarkovSampleStep

    base_logits, hidden, anchors = req["base_logits"], req["hidden"], req["anchors"]
    vocab, rank = req["head"]["markov_head.markov_w1.weight"].shape
    H = hidden.shape[-1]
    kwargs = {"vocab_size": vocab, "markov_rank": rank} | ({} if req["kind"] == "vanilla" else {"hidden_size": H})
    head = markov_heads(src)[req["kind"]](**kwargs)
    head.load_state_dict({k[len("markov_head."):]: v for k, v in req["head"].items()}, strict=True)
    sync_path = "sglang/srt/speculative/spec_tp_sync.py"
    sites = src.definitions(sync_path, ("SpecTpSyncSite",), {"IntEnum": IntEnum})["SpecTpSyncSite"]
    sync_cls = src.cls(sync_path, "SpecTpSync", ("sync",), (object,), {})
    tp_sync = object.__new__(sync_cls)
    tp_sync._sites = frozenset()  # one rank: SpecTpSync.__init__ (spec_tp_sync.py:121-125) syncs no site
    ns = {"torch": torch, "Optional": Optional, "MarkovSampleStep": MarkovSampleStep}
    noise_ns = src.definitions(DRAFT, ("DraftNoise",), {"msgspec": msgspec, "torch": torch})
    step = src.function(DRAFT, "_draft_step", ns)
    width = src.function(DRAFT, "step_logits_width", {})
    block = src.function(DRAFT, "draft_markov_block", {"torch": torch, "_draft_step": step, "step_logits_width": width,
                                                       "SpecTpSyncSite": sites, "Optional": Optional})
    out = {}
    with torch.inference_mode():
        for greedy in (False, True):  # SGLANG_DSPARK_USE_GREEDY_DRAFT off (the default: step logits kept) and on
            noise = noise_ns["DraftNoise"](key=12345, offset=torch.zeros(1, dtype=torch.int64))
            tokens, _ = block(markov_head=head, base_logits=base_logits, anchor_tokens=anchors, draft_hidden=hidden,
                              step_temperatures=torch.zeros(len(anchors)), noise=noise, tp_sync=tp_sync,
                              greedy_draft=greedy)
            out["greedy_draft" if greedy else "drafts"] = tokens
    gamma = base_logits.shape[1]
    candidates = torch.cat([anchors[:, None], out["drafts"]], dim=1)  # [bs, gamma + 1]: the verify window's ids
    row_argmax = src.function(KERNELS + "dspark/dspark_accept.py", "_row_argmax", {"torch": torch})
    accept = src.function(KERNELS + "dspark/dspark_accept.py", "accept_greedy", {
        "torch": torch, "_row_argmax": row_argmax,
        "compute_dflash_correct_drafts_and_bonus": dk.compute_dflash_correct_drafts_and_bonus})
    out["accept"] = accept(candidates=candidates, target_logits=req["target_logits"].reshape(-1, vocab),
                           verify_num_draft_tokens=gamma + 1)
    return out


def main() -> None:
    req = json.load(sys.stdin)
    work = Path(req["work"])
    src = WheelSource(Path(req["sglang_wheel"]))
    stub_package(src, work)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path[:0] = [str(work), req["triton_dir"]]
    import torch

    inputs = torch.load(req["inputs"], weights_only=False)
    out = {}
    if "dflash" in inputs:
        out["dflash"] = dflash(inputs["dflash"])
    if "dspark" in inputs:
        out["dspark"] = dspark(inputs["dspark"], src)
    torch.save(out, req["output"])


if __name__ == "__main__":
    main()
