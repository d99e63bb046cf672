"""The engines' EAGLE-3 draft forwards, executed from the wheels (tests/wheels.py) on CPU, on a tiny random draft.

What runs is the engine's own draft code, compiled out of the wheel: SGLang 0.5.23 ``kimi_k25_eagle3.py``
``Eagle3MLAModel.forward`` and ``Eagle3MLADecoderLayer.forward``; vLLM 0.33.0 ``deepseek_eagle3.py`` and
``qwen3_eagle3.py`` (the model ``forward``, the decoder layer's ``forward`` and ``_norm_before_residual`` /
``_norm_after_residual``, the ForCausalLM's ``combine_hidden_states``). That is fc, ``fc_norm``, the layer's two
input norms and its residual, the fused post-attention norm, the final norm and which hidden ``norm_output``
carries, exactly as the engines order them.

What the engines' forwards call is supplied, with the same math, because the engines' own kernels need CUDA:

* attention is transformers 5's own module for the architecture (``DeepseekV3Attention``: multi-latent attention,
  RoPE on the rope part, interleaved pairs as SGLang's ``deepseek_v2.py:2166`` and vLLM's ``deepseek_v2.py:553``
  set it up; ``Qwen3Attention``: per-head q/k RMSNorm), with its input projections widened to the draft's 2H input
  as the engines widen theirs (kimi_k25_eagle3.py:118-124, deepseek_eagle3.py:82, qwen3_eagle3.py:66-80);
* ``RMSNorm(x)`` / ``RMSNorm(x, residual)`` is the engines' fused form: ``(norm(x + residual), x + residual)``;
* the MLP is ``down(silu(gate(x)) * up(x))`` (``DeepseekV2MLP``, Qwen3's MLP: gate_up + SiluAndMul);
* linear layers are ``torch.nn.Linear`` holding the checkpoint's weights (SGLang's ``ColumnParallelLinear``
  returns ``(out, bias)``: wrapped so).
"""

from __future__ import annotations

import contextlib
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from tests.wheels import WheelSource


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FusedRMSNorm(nn.Module):
    """The engines' RMSNorm: ``norm(x)``, or with a residual ``(norm(x + residual), x + residual)``."""

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight, self.eps = weight, eps

    def forward(self, x, residual=None):
        s = x if residual is None else x + residual
        xf = s.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()).to(x.dtype)
        return out if residual is None else (out, s)


class MLP(nn.Module):
    def __init__(self, sd: dict, prefix: str):
        super().__init__()
        self.g, self.u, self.d = (sd[f"{prefix}.{n}_proj.weight"] for n in ("gate", "up", "down"))

    def forward(self, x):
        return F.linear(F.silu(F.linear(x, self.g)) * F.linear(x, self.u), self.d)


def _linear(w: torch.Tensor, b: torch.Tensor | None = None) -> nn.Linear:
    lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
    with torch.no_grad():
        lin.weight.copy_(w)
        if b is not None:
            lin.bias.copy_(b)
    return lin


class HFAttention(nn.Module):
    """transformers' attention module for ``kind`` ("mla": DeepseekV3Attention, "qwen3": Qwen3Attention, "llama":
    LlamaAttention) with the
    checkpoint's layer-0 weights, called as the engines call theirs (flat [tokens, 2H] input and positions)."""

    def __init__(self, kind: str, config: dict, sd: dict, in_dim: int):
        super().__init__()
        import transformers

        if kind == "mla":
            from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m

            cfg = transformers.DeepseekV3Config(**config)
            cfg._attn_implementation = "sdpa"
            self.attn, self.rope = m.DeepseekV3Attention(cfg, 0), m.DeepseekV3RotaryEmbedding(cfg)
        elif kind == "qwen3":
            from transformers.models.qwen3 import modeling_qwen3 as m

            cfg = transformers.Qwen3Config(**config)
            cfg._attn_implementation = "sdpa"
            self.attn, self.rope = m.Qwen3Attention(cfg, 0), m.Qwen3RotaryEmbedding(cfg)
        else:
            from transformers.models.llama import modeling_llama as m

            cfg = transformers.LlamaConfig(**config)
            cfg._attn_implementation = "sdpa"
            self.attn, self.rope = m.LlamaAttention(cfg, 0), m.LlamaRotaryEmbedding(cfg)
        for name, mod in list(self.attn.named_children()):
            key = f"layers.0.self_attn.{name}"
            if isinstance(mod, nn.Linear):
                setattr(self.attn, name, _linear(sd[key + ".weight"], sd.get(key + ".bias")))
            elif hasattr(mod, "weight"):
                with torch.no_grad():
                    mod.weight.copy_(sd[key + ".weight"])
        first = self.attn.q_a_proj if kind == "mla" and self.attn.q_a_proj is not None else self.attn.q_proj
        assert first.in_features == in_dim, (first.in_features, in_dim)  # widened to the draft's 2H input
        self.attn.eval()
        self.prepare_qkv_latent = None  # read by kimi_k25_eagle3.py:168-174 (published to a stub context)

    def forward(self, positions, hidden_states, **kw):
        x = hidden_states[None]  # [1, tokens, 2H]
        pe = self.rope(x, positions[None])
        return self.attn(x, pe, None)[0][0]


def _norm(sd, key, eps):
    return FusedRMSNorm(sd[key], eps)


NS = {"torch": torch, "nn": nn, "Optional": None, "Tuple": tuple, "List": list,
      "BumpAllocator": lambda **kw: None, "AttentionInputs": lambda *a, **k: None,
      "get_attn_tp_context": lambda: Obj(set_attn_inputs=lambda x: None,
                                         maybe_input_scattered=lambda fb: contextlib.nullcontext())}


@lru_cache(maxsize=4)
def _compiled(src: WheelSource, path: str, cls: str, methods: tuple[str, ...]):
    return src.cls(path, cls, methods, (nn.Module,), NS)


def sglang_kimi(src: WheelSource, config: dict, sd: dict):
    """SGLang's Eagle3MLAModel (its forward and its layer's), holding the checkpoint's weights: a callable
    ``(input_ids [T], positions [T], aux [T, n*Ht or H]) -> (logits [T, draft_vocab], carried hidden [T, H])``."""
    path = "sglang/srt/models/kimi_k25_eagle3.py"
    Layer = _compiled(src, path, "Eagle3MLADecoderLayer", ("forward",))
    Model = _compiled(src, path, "Eagle3MLAModel", ("forward",))
    eps, H = config["rms_norm_eps"], config["hidden_size"]
    layer = Layer()
    layer.self_attn = HFAttention("mla", config, sd, 2 * H)
    layer.mlp = MLP(sd, "layers.0.mlp")
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        setattr(layer, n, _norm(sd, f"layers.0.{n}.weight", eps))
    model = Model()
    model.midlayer, model.norm = layer, _norm(sd, "norm.weight", eps)
    fc = _linear(sd["fc.weight"])
    model.fc, model._fc_gatherer = (lambda x: (fc(x), None)), (lambda x: x)
    n_aux = sd["fc.weight"].shape[1] // config["target_hidden_size"]
    model.num_aux_hidden_states = n_aux
    model.fc_norm = (nn.ModuleList(_norm(sd, f"fc_norm.{i}.weight", eps) for i in range(n_aux))
                     if "fc_norm.0.weight" in sd else None)
    model.norm_output = config.get("norm_output", False)
    embed = sd["embed"]
    model.embed_tokens = lambda ids: F.embedding(ids, embed)

    def run(input_ids, positions, aux):
        batch = Obj(mm_input_embeds=None, forward_mode=Obj(is_extend=lambda: False), spec_info=Obj(hidden_states=aux))
        logits_hidden, (carried,) = model.forward(input_ids, positions, batch)
        return F.linear(logits_hidden, sd["lm_head.weight"]), carried

    return run


def sglang_llama(src: WheelSource, config: dict, sd: dict):
    """SGLang's llama_eagle3 LlamaModel (its forward and its decoder layer's), as :func:`sglang_kimi`."""
    path = "sglang/srt/models/llama_eagle3.py"
    Layer = _compiled(src, path, "LlamaDecoderLayer", ("forward",))
    Model = _compiled(src, path, "LlamaModel", ("forward",))
    eps, H = config["rms_norm_eps"], config["hidden_size"]
    layer = Layer()
    layer.is_input_layer = True
    layer.self_attn = HFAttention("llama", config, sd, 2 * H)
    layer.mlp = MLP(sd, "layers.0.mlp")
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        setattr(layer, n, _norm(sd, f"layers.0.{n}.weight", eps))
    model = Model()
    model.layers, model.norm, model.is_mrope_enabled = nn.ModuleList([layer]), _norm(sd, "norm.weight", eps), False
    model.fc = _linear(sd["fc.weight"])
    n_aux = sd["fc.weight"].shape[1] // config["target_hidden_size"]
    model.num_aux_hidden_states = n_aux
    model.fc_norm = (nn.ModuleList(_norm(sd, f"fc_norm.{i}.weight", eps) for i in range(n_aux))
                     if "fc_norm.0.weight" in sd else None)
    nbf = bool((config.get("eagle_config") or {}).get("norm_before_fc", config.get("norm_before_fc", False)))
    model.input_norm = _norm(sd, "input_norm.weight", eps) if nbf else None  # llama_eagle3.py:173-183
    model.norm_output = config.get("norm_output", False)
    embed = sd["embed"]
    model.embed_tokens = lambda ids: F.embedding(ids, embed)

    def run(input_ids, positions, aux):
        batch = Obj(mm_input_embeds=None, forward_mode=Obj(is_extend=lambda: False), spec_info=Obj(hidden_states=aux))
        logits_hidden, (carried,) = model.forward(input_ids, positions, batch)
        return F.linear(logits_hidden, sd["lm_head.weight"]), carried

    return run


VLLM = {"llama_eagle3": ("vllm/model_executor/models/llama_eagle3.py", "LlamaDecoderLayer", "LlamaModel",
                         "Eagle3LlamaForCausalLM", "llama"),
        "deepseek_eagle3": ("vllm/model_executor/models/deepseek_eagle3.py", "DeepseekV2Eagle3DecoderLayer",
                            "DeepseekV2Eagle3Model", "Eagle3DeepseekV2ForCausalLM", "mla"),
        "qwen3_eagle3": ("vllm/model_executor/models/qwen3_eagle3.py", "Qwen3Eagle3DecoderLayer", "Qwen3Eagle3Model",
                         "Eagle3Qwen3ForCausalLM", "qwen3")}


def vllm_draft(src: WheelSource, name: str, config: dict, sd: dict):
    """vLLM's draft model ``name`` (its model and layer forwards, its ``combine_hidden_states``) with the
    checkpoint's weights: the same callable as :func:`sglang_kimi`."""
    path, layer_cls, model_cls, causal_cls, kind = VLLM[name]
    Layer = _compiled(src, path, layer_cls, ("_norm_before_residual", "_norm_after_residual", "forward"))  # file order
    Model = _compiled(src, path, model_cls, ("forward",))
    combine = src.function(path, f"{causal_cls}.combine_hidden_states", NS)
    eps, H = config["rms_norm_eps"], config["hidden_size"]
    layer = Layer()
    layer.layer_idx = 0
    layer.self_attn = HFAttention(kind, config, sd, 2 * H)
    layer.mlp = MLP(sd, "layers.0.mlp")
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        setattr(layer, n, _norm(sd, f"layers.0.{n}.weight", eps))
    # the choice its __init__ makes (deepseek_eagle3.py:101-104, qwen3_eagle3.py:85-88)
    layer._residual_norm = (layer._norm_before_residual if config.get("norm_before_residual", False)
                            else layer._norm_after_residual)
    model = Model()
    model.layers, model.norm = nn.ModuleList([layer]), _norm(sd, "norm.weight", eps)
    model.fc = _linear(sd["fc.weight"])
    n_aux = sd["fc.weight"].shape[1] // config["target_hidden_size"]
    model.num_aux_hidden_states = model.num_aux_layers = n_aux
    model.fc_norm = (nn.ModuleList(_norm(sd, f"fc_norm.{i}.weight", eps) for i in range(n_aux))
                     if "fc_norm.0.weight" in sd else None)
    model.norm_before_fc = bool((config.get("eagle_config") or {}).get("norm_before_fc", config.get("norm_before_fc", False)))
    model.input_norm = _norm(sd, "input_norm.weight", eps) if model.norm_before_fc else None
    model.use_aux_hidden_state = True
    model.norm_output = config.get("norm_output", False)
    embed = sd["embed"]
    model.embed_input_ids = lambda ids: F.embedding(ids, embed)
    causal = Obj(model=model)

    def run(input_ids, positions, aux):
        h = combine(causal, aux) if aux.shape[-1] != H else aux  # the proposer combines target states only
        logits_hidden, carried = model.forward(input_ids, positions, h)
        return F.linear(logits_hidden, sd["lm_head.weight"]), carried

    return run
