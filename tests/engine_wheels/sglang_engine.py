"""SGLang 0.5.23's own EAGLE-3 code, executed on CPU from the wheel (tests/wheels.py), against stub layers.

What runs is the engine's code, compiled out of the wheel one function at a time: each architecture's
``set_eagle3_layers_to_capture`` (and the inner model's setter where it has one), its model ``forward`` (the
capture loop and the capture condition), its ``ForCausalLM.forward`` (which unpacks the captures), the real
``AuxHiddenStateList`` / ``AuxHiddenStatePacker`` / ``pack_aux_hidden_states`` (layers/aux_hidden_states.py),
the ids reader ``_resolve_eagle_aux_hidden_state`` (spec_aux_hidden_state.py) and the draft's
``LlamaForCausalLMEagle3.__init__`` reads of its config (llama_eagle3.py).

What is stubbed, and why each stub is faithful:

* a decoder layer ``i`` receives the residual stream B_i and returns B_{i+1}; asked to capture (the
  ``capture_output`` callback or the ``captured_last_layer_outputs`` collector), it captures the stream
  entering it, B_i, as ``LayerBoundaryStage._prepare_attention`` does (layers/layer_boundary/stage.py:407-484:
  ``capture(value)`` before the first read, else ``stream.residual`` after the fused add);
* Gemma 3's layer keeps SGLang's own (branch, residual) pair: it returns the post_feedforward_layernorm
  branch output and a residual whose sum is B_{i+1} (gemma3_causal.py:369-412), so whatever the forward
  appends shows whether it is the stream or the branch;
* ``residual_batch.final_norm(..., capture=)`` captures the pre-norm stream B_N
  (layers/layer_boundary/residual/access.py ``final_norm_pair`` calls ``capture(residual)``) and returns a
  post-norm marker;
* attention, MLP, norms, embeddings, the expert recorder, CUDA-graph checks, allocators: markers and no-ops
  that take no part in which tensor is captured.

Every tensor is ``[T, H]`` filled with one number: B_k holds k, a Gemma branch output of layer j holds
``BRANCH + j``, so each captured tensor names itself.
"""

from __future__ import annotations

import contextlib
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from tests.wheels import WheelSource

MODELS = "sglang/srt/models/"
T, H = 3, 4  # tokens, hidden: T > 2 so that unpacking a bare [T, H] tensor into two names fails as it does on a server
BRANCH = 1000.0
NORMED = -1000.0


def tag(value: float) -> torch.Tensor:
    return torch.full((T, H), float(value))


def label(t: torch.Tensor) -> str:
    """``B<k>`` for the residual stream entering layer k; ``branch<j>`` for a Gemma layer j branch output."""
    v = t.reshape(-1)
    assert bool((v == v[0]).all()), "a captured tensor mixes states"
    v = float(v[0])
    if v >= BRANCH:
        return f"branch{int(v - BRANCH)}"
    if v == NORMED:
        return "normed"
    return f"B{int(v)}"


@dataclass(frozen=True)
class Arch:
    """Where one architecture's EAGLE-3 code lives in the wheel."""

    name: str
    file: str
    causal: str  # the ForCausalLM class (setter, forward)
    model: str  # the inner model class (forward)
    style: str  # how the forward calls a layer: "capture_output", "collector", "deepseek", "gemma"
    inner_file: str | None = None  # where the inner model's forward / setter live, when not in ``file``
    inner_setter: bool = False  # the inner model has its own set_eagle3_layers_to_capture

    @property
    def model_file(self) -> str:
        return self.inner_file or self.file


ARCHS = {a.name: a for a in (
    Arch("LlamaForCausalLM", "llama.py", "LlamaForCausalLM", "LlamaModel", "capture_output"),
    Arch("Qwen3ForCausalLM", "qwen3.py", "Qwen3ForCausalLM", "Qwen3Model", "capture_output"),
    Arch("Qwen3MoeForCausalLM", "qwen3_moe.py", "Qwen3MoeForCausalLM", "Qwen2MoeModel", "collector",
         inner_file="qwen2_moe.py", inner_setter=True),
    Arch("Qwen2MoeForCausalLM", "qwen2_moe.py", "Qwen2MoeForCausalLM", "Qwen2MoeModel", "collector",
         inner_setter=True),
    Arch("DeepseekV3ForCausalLM", "deepseek_v2.py", "DeepseekV2ForCausalLM", "DeepseekV2Model", "deepseek"),
    Arch("Glm4MoeLiteForCausalLM", "glm4_moe_lite.py", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteModel",
         "capture_output_alloc"),
    Arch("GptOssForCausalLM", "gpt_oss.py", "GptOssForCausalLM", "GptOssModel", "capture_output"),
    Arch("MiniMaxM3SparseForCausalLM", "minimax_m3.py", "MiniMaxM3SparseForCausalLM", "MiniMaxM3Model", "collector"),
    Arch("Gemma3ForCausalLM", "gemma3_causal.py", "Gemma3ForCausalLM", "Gemma3TextModel", "gemma"),
)}


class Obj:
    """A stub object: attributes from keywords; ``obj(...)`` calls its ``forward``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class StubLayer(torch.nn.Module):
    """Decoder layer ``i``: the stream entering it is B_i; it returns B_{i+1} (see the module docstring)."""

    def __init__(self, index: int, style: str):
        super().__init__()
        self.index, self.style = index, style

    def forward(self, *args, **kw):
        i = self.index
        if self.style == "gemma":
            h, r = kw["hidden_states"], kw["residual"]
            stream = h if r is None else h + r
            assert label(stream) == f"B{i}", f"layer {i} received {label(stream)}"
            branch = tag(BRANCH + i)
            return branch, tag(i + 1) - branch
        hidden = kw["hidden_states"] if "hidden_states" in kw else args[1]
        assert label(hidden) == f"B{i}", f"layer {i} received {label(hidden)}"
        if kw.get("capture_output") is not None:
            kw["capture_output"](tag(i))
        if kw.get("captured_last_layer_outputs") is not None:
            kw["captured_last_layer_outputs"].capture(tag(i))
        if self.style == "deepseek":
            return tag(i + 1), None  # (hidden_states, topk_indices)
        return tag(i + 1)


class ResidualBatch:
    """``residual_batch`` of layers/layer_boundary: only ``final_norm``'s capture matters (of B_N, pre-norm)."""

    @staticmethod
    def start(forward_batch):
        return None

    @staticmethod
    def complete_output(hidden, forward_batch):
        return hidden

    @staticmethod
    def snapshot(hidden, forward_batch):
        return hidden

    @staticmethod
    def final_norm(hidden, forward_batch, norm, capture=None, **kw):
        if capture is not None:
            capture(hidden)
        return tag(NORMED)


def _recorder():
    return Obj(with_current_layer=lambda i: contextlib.nullcontext())


class _TopK:
    def __init__(self, forward_batch, initial):
        self.topk_indices = initial

    def update(self, value):
        self.topk_indices = value


class EngineRun:
    """The SGLang 0.5.23 wheel, compiled function by function."""

    def __init__(self, wheel: Path):
        self.src = WheelSource(wheel)
        aux = self.src.module("sglang/srt/layers/aux_hidden_states.py", {
            "torch": torch, "TYPE_CHECKING": False, "Iterable": typing.Iterable, "List": typing.List,
            "Optional": typing.Optional, "Union": typing.Union})
        self.aux = aux
        self.ns = {
            "torch": torch, "Optional": typing.Optional, "List": typing.List, "nullcontext": contextlib.nullcontext,
            "AuxHiddenStateList": aux["AuxHiddenStateList"], "AuxHiddenStatePacker": aux["AuxHiddenStatePacker"],
            "residual_batch": ResidualBatch, "get_global_expert_distribution_recorder": _recorder,
            "check_cuda_graph_backend": lambda *a: False, "is_in_breakable_cuda_graph": lambda: False,
            "Phase": Obj(PREFILL="prefill"), "Backend": Obj(TC_PIECEWISE="tc_piecewise"),
            "BumpAllocator": lambda **kw: None, "IndexTopKShareState": _TopK,
            "get_attn_tp_context": lambda: Obj(maybe_input_scattered=lambda fb: contextlib.nullcontext()),
            "_is_cpu": False, "_is_cpu_amx_available": False, "einops": None,
        }

    @lru_cache(maxsize=None)
    def fn(self, file: str, qualname: str):
        return self.src.function(MODELS + file, qualname, self.ns)

    def build(self, arch: Arch, num_layers: int) -> Obj:
        """The target: a ForCausalLM stub whose methods are the wheel's, holding an inner model stub."""
        layers = torch.nn.ModuleList(StubLayer(i, arch.style) for i in range(num_layers))
        model_methods = {"forward": self.fn(arch.model_file, f"{arch.model}.forward")}
        if arch.inner_setter:
            model_methods["set_eagle3_layers_to_capture"] = self.fn(
                arch.model_file, f"{arch.model}.set_eagle3_layers_to_capture")
        Model = type(arch.model, (Obj,), model_methods)
        model = Model(
            config=Obj(num_hidden_layers=num_layers), layers=layers, layers_to_capture=[], start_layer=0,
            end_layer=num_layers, pp_group=Obj(is_first_rank=True, is_last_rank=True),
            embed_tokens=lambda ids: tag(0), get_input_embeddings=lambda: (lambda ids: tag(0)),
            norm=lambda h, r=None: (tag(NORMED), None), finalize_norm=None, rotary_emb=lambda h, p: None,
            rotary_emb_local=lambda h, p: None, first_k_dense_replace=3, use_dsa=False,
            _dsa_forward_uses_topk=lambda: False, llama_4_scaling_config=None, next_full_attention_layer_id={})
        Causal = type(arch.causal, (Obj,), {
            "forward": self.fn(arch.file, f"{arch.causal}.forward"),
            "set_eagle3_layers_to_capture": self.fn(arch.file, f"{arch.causal}.set_eagle3_layers_to_capture")})
        return Causal(model=model, config=Obj(num_hidden_layers=num_layers), capture_aux_hidden_states=False,
                      pp_group=Obj(is_last_rank=True), lm_head=None,
                      logits_processor=lambda ids, hidden, head, fb, aux: aux)

    def run(self, arch_name: str, num_layers: int, ids: list[int] | None) -> "Outcome":
        """Start-up (the setter with ``ids``), then one target forward; what reaches the logits processor."""
        arch = ARCHS[arch_name]
        target = self.build(arch, num_layers)
        try:
            target.set_eagle3_layers_to_capture(None if ids is None else list(ids))
        except Exception as e:  # noqa: BLE001 - the engine's own failure is the result
            return Outcome("start-up", error=type(e).__name__, message=str(e))
        batch = Obj(can_run_tbo=False, forward_mode=Obj(is_idle=lambda: False), aux_hidden_states_buffer=None)
        try:
            aux = target.forward(torch.arange(T), torch.arange(T).reshape(1, T), batch)
        except Exception as e:  # noqa: BLE001
            return Outcome("first forward", error=type(e).__name__, message=str(e))
        packed = self.aux["pack_aux_hidden_states"](aux)  # what LogitsProcessor._get_hidden_states_to_store stores
        return Outcome(None, captured=tuple(label(c) for c in packed.split(H, dim=-1)))

    def resolve_ids(self, draft_config: dict) -> tuple[bool, list[int] | None]:
        """``_resolve_eagle_aux_hidden_state`` (spec_aux_hidden_state.py) on a draft config: what it hands the
        setter (``eagle_use_aux_hidden_state``, ``eagle_aux_hidden_state_layer_ids``)."""
        return _resolve_ids(self.src, draft_config)


@dataclass(frozen=True)
class Outcome:
    failed_at: str | None  # None: the forward ran
    captured: tuple[str, ...] = ()
    error: str | None = None
    message: str | None = None


def hf_config(config: dict) -> Obj:
    """A draft config as transformers' PretrainedConfig presents it: top-level keys as attributes, nested
    dicts (``eagle_config``) left as dicts."""
    return Obj(**config)


def _resolve_ids(src: WheelSource, draft_config: dict) -> tuple[bool, list[int] | None]:
    path = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
    fn = _compiled_resolver(src, path)
    config = Obj(eagle_use_aux_hidden_state=False, eagle_aux_hidden_state_layer_ids=None, draft_kv_num_layers=None,
                 eagle_draft_num_layers=None)
    draft_model_config = Obj(num_nextn_predict_layers=None, num_hidden_layers=1, num_attention_layers=1,
                             hf_config=hf_config(draft_config), is_hybrid_swa=False)
    fn.__globals__["ModelConfig"] = Obj(from_server_args=lambda *a, **k: draft_model_config)
    fn.__globals__["get_spec"] = lambda: Obj(speculative_draft_model_path="draft", speculative_draft_model_revision=None)
    fn(config=config, server_args=Obj(), model_config=Obj(),
       spec_algorithm=Obj(is_eagle=lambda: True, is_standalone=lambda: False, is_eagle3=lambda: True), is_draft_worker=False)
    return config.eagle_use_aux_hidden_state, config.eagle_aux_hidden_state_layer_ids


@lru_cache(maxsize=4)
def _compiled_resolver(src: WheelSource, path: str):
    return src.function(path, "_resolve_eagle_aux_hidden_state", {})


def types_namespace() -> types.SimpleNamespace:  # pragma: no cover - convenience for debugging
    return types.SimpleNamespace(ARCHS=ARCHS)


class _Norm(torch.nn.Module):
    def __init__(self, *a, **k):
        super().__init__()


@lru_cache(maxsize=2)
def _draft_model_class(src: WheelSource):
    ns = {"torch": torch, "nn": torch.nn, "Optional": typing.Optional, "VocabParallelEmbedding": lambda *a, **k: None,
          "RMSNorm": _Norm, "LlamaDecoderLayer": lambda *a, **k: _Norm(), "layer_stack": contextlib.nullcontext,
          "add_prefix": lambda name, prefix: f"{prefix}.{name}" if prefix else name}
    return src.cls(MODELS + "llama_eagle3.py", "LlamaModel", ("__init__",), (torch.nn.Module,), ns)


def draft_reads(src: WheelSource, draft_config: dict) -> dict:
    """``llama_eagle3.py``'s ``LlamaModel.__init__`` run on a draft config (as transformers' LlamaConfig
    holds it): the aux count fc is sized for, and the draft flags as the draft model sets them."""
    import transformers

    base = dict(hidden_size=H, intermediate_size=8, num_attention_heads=1, num_key_value_heads=1,
                num_hidden_layers=1, vocab_size=16)
    config = transformers.LlamaConfig(**{**base, **draft_config})
    model = _draft_model_class(src)(config)
    return {"aux": model.num_aux_hidden_states, "fc_in": model.fc.in_features,
            "norm_before_fc": model.norm_before_fc, "fc_norm": model.fc_norm is not None,
            "norm_output": bool(model.norm_output)}
