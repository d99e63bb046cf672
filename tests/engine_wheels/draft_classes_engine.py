"""The engines' EAGLE-3 draft-class constructors, executed from the wheels (tests/wheels.py) on CPU.

What runs: each draft model's ``__init__`` (the code that reads the draft config: how many aux states ``fc``
is sized for, which draft flags it sets, whether it reads ``use_aux_hidden_state``), compiled out of the wheel
one class at a time: SGLang 0.5.23 ``kimi_k25_eagle3.py`` ``Eagle3MLAModel`` (with its real
``_get_eagle_aux_layer_count``) and ``llama_eagle3.py`` ``LlamaModel``; vLLM 0.33.0 ``llama_eagle3.py``
``LlamaModel``, ``qwen3_eagle3.py`` ``Qwen3Eagle3Model``, ``deepseek_eagle3.py`` ``DeepseekV2Eagle3Model``; vLLM's
speculators config loader (``transformers_utils/configs/speculators/algos.py``, a module with no imports, run
whole) and its draft registry (``model_executor/models/registry.py``, the dict literal read with ``ast``).

Stubs: the parallel layers (embedding, linear, the decoder layer, MLA attention) record their sizes and hold no
weights; ``RMSNorm`` is a marker. None of them reads the draft config, so what the constructors decide is
theirs.
"""

from __future__ import annotations

import ast
import typing
from functools import lru_cache
from pathlib import Path

import torch

from tests.wheels import WheelSource


class Rec(torch.nn.Module):
    """A stub layer: keeps its arguments (``in_features`` for a linear layer)."""

    def __init__(self, *args, **kw):
        super().__init__()
        self.args, self.kw = args, kw
        sizes = [a for a in args if isinstance(a, int)]
        self.in_features = kw.get("input_size", sizes[0] if sizes else None)


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def hf(config: dict, kind: str = "llama"):
    """A draft config as transformers holds it (top-level keys as attributes, ``eagle_config`` a dict)."""
    import transformers

    base = dict(hidden_size=8, intermediate_size=16, num_attention_heads=2, num_key_value_heads=2,
                num_hidden_layers=1, vocab_size=32, rms_norm_eps=1e-6)
    cls = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config,
           "deepseek": transformers.DeepseekV3Config}[kind]
    if kind == "deepseek":
        base.update(q_lora_rank=4, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)
    return cls(**{**base, **config})


@lru_cache(maxsize=4)
def sglang_kimi_model(src: WheelSource):
    path = "sglang/srt/models/kimi_k25_eagle3.py"
    ns = {"torch": torch, "nn": torch.nn, "Optional": typing.Optional, "PretrainedConfig": object,
          "VocabParallelEmbedding": Rec, "get_embedding_tp_kwargs": dict, "ColumnParallelLinear": Rec,
          "RMSNorm": Rec, "Eagle3MLADecoderLayer": Rec, "add_prefix": lambda name, prefix: name,
          "triton_symm_mem_ag": Obj(MultimemAllGatherer=Rec, recommended_max_tokens=lambda **kw: 512)}
    ns["_get_eagle_aux_layer_count"] = src.function(path, "_get_eagle_aux_layer_count", ns)
    return src.cls(path, "Eagle3MLAModel", ("__init__",), (torch.nn.Module,), ns)


def sglang_draft_reads(src: WheelSource, cls_name: str, config: dict) -> dict:
    """What an SGLang draft model's ``__init__`` sets from ``config``."""
    if cls_name == "kimi_k25_eagle3":
        model = sglang_kimi_model(src)(hf(config, "deepseek"))
        return {"aux": model.num_aux_hidden_states, "fc_in": model.fc.in_features,
                "fc_norm": model.fc_norm is not None, "norm_output": bool(model.norm_output),
                "norm_before_fc": bool(getattr(model, "norm_before_fc", False))}
    from tests.engine_wheels.sglang_engine import draft_reads

    return draft_reads(src, config)


VLLM_MODELS = "vllm/model_executor/models/"
VLLM_DRAFTS = {  # class name -> (file, model class, config kind)
    "llama_eagle3": ("llama_eagle3.py", "LlamaModel", "llama"),
    "qwen3_eagle3": ("qwen3_eagle3.py", "Qwen3Eagle3Model", "qwen3"),
    "deepseek_eagle3": ("deepseek_eagle3.py", "DeepseekV2Eagle3Model", "deepseek"),
}


@lru_cache(maxsize=8)
def vllm_model(src: WheelSource, name: str):
    file, cls, _ = VLLM_DRAFTS[name]
    layer = {"llama_eagle3": "LlamaDecoderLayer", "qwen3_eagle3": "Qwen3Eagle3DecoderLayer",
             "deepseek_eagle3": "DeepseekV2Eagle3DecoderLayer"}[name]
    ns = {"torch": torch, "nn": torch.nn, "VocabParallelEmbedding": Rec, "ReplicatedLinear": Rec, "RMSNorm": Rec,
          layer: Rec, "get_draft_quant_config": lambda c: None, "get_current_vllm_config": lambda: None,
          "maybe_prefix": lambda prefix, name: name, "VllmConfig": object}
    return src.cls(VLLM_MODELS + file, cls, ("__init__",), (torch.nn.Module,), ns)


def vllm_draft_reads(src: WheelSource, name: str, config) -> dict:
    """What a vLLM draft model's ``__init__`` sets from ``config`` (an hf config object, as the loader made it)."""
    vllm_config = Obj(speculative_config=Obj(draft_model_config=Obj(hf_config=config)),
                      model_config=Obj(dtype=torch.float32))
    model = vllm_model(src, name)(vllm_config=vllm_config)
    use_aux = getattr(model, "use_aux_hidden_state", True)
    fc = getattr(model, "fc", None)
    return {"aux": getattr(model, "num_aux_layers", getattr(model, "num_aux_hidden_states", None)) if fc is not None
            else None, "fc_in": fc.in_features if fc is not None else None, "use_aux_hidden_state": bool(use_aux),
            "fc_norm": getattr(model, "fc_norm", None) is not None, "norm_output": bool(model.norm_output),
            "norm_before_fc": bool(getattr(model, "norm_before_fc", False)),
            # read in the decoder layer's __init__ (llama_eagle3.py:101, qwen3_eagle3.py:85, deepseek_eagle3.py:101)
            "norm_before_residual": bool(getattr(config, "norm_before_residual", False))}


@lru_cache(maxsize=2)
def vllm_loader(src: WheelSource) -> dict:
    """algos.py run whole: ``SUPPORTED_SPECULATORS_TYPES`` (speculators_model_type -> updater)."""
    return src.module("vllm/transformers_utils/configs/speculators/algos.py")["SUPPORTED_SPECULATORS_TYPES"]


def vllm_view(src: WheelSource, config: dict) -> dict:
    """base.py:58-63 ``extract_transformers_pre_trained_config``: transformer_layer_config, updated."""
    import copy

    pre = copy.deepcopy(config.get("transformer_layer_config", {}))
    vllm_loader(src)[config["speculators_model_type"]](config_dict=config, pre_trained_config=pre)
    return pre


@lru_cache(maxsize=2)
def vllm_registry(src: WheelSource) -> dict[str, tuple[str, str]]:
    """The speculative-decoding model registry of registry.py: architecture -> (module, class)."""
    tree = src.tree(VLLM_MODELS + "registry.py")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            if "Eagle3Qwen3ForCausalLM" in keys:
                return ast.literal_eval(node.value)
    raise LookupError("registry.py: no dict registering Eagle3Qwen3ForCausalLM")


def sglang_entry_classes(src: WheelSource) -> dict[str, str]:
    """Every ``EntryClass`` of sglang/srt/models/*.py: class name -> file."""
    out = {}
    for name in sorted(n for n in src._names if n.startswith("sglang/srt/models/") and n.endswith(".py")):
        text = src.text(name)
        if "EntryClass" not in text:
            continue
        for node in src.tree(name).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
                values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                for v in values:
                    if isinstance(v, ast.Name):
                        out[v.id] = Path(name).name
    return out

