"""A PyTorch EAGLE-3 draft forward, run with one side's semantics (:class:`DraftFlags`); the default
is SGLang 0.5.23's (``models/llama_eagle3.py``).

* ``fc`` runs on the target's states (``from_target``), after the optional ``input_norm``
  (``norm_before_fc``: one RMSNorm over n*H_t) and ``fc_norm.{i}`` (per-chunk RMSNorm). SGLang skips it
  when the incoming width equals the draft hidden size (``fc_skip_at_hidden_width``); SpecForge and
  speculators always apply it. The draft's own recurrent hidden (H wide) never goes through fc.
* Layer 0 reads ``cat([input_layernorm(embed), hidden_norm(h)])`` (width 2H) with ``residual = h``
  (the fc output, un-normed); vLLM's ``norm_before_residual`` makes the residual the normed h instead.
  Layers >= 1 read H-wide input, ``hidden_norm(h + residual)`` as their pre-attention norm.
* ``post_attention_layernorm`` is a fused add; then the MLP.
* Output: ``s = h + residual``; logits = ``lm_head(norm(s))`` (``lm_head(s)`` without ``head_norm``:
  SpecForge with ``norm_output: false``); the recurrent hidden handed to the next draft step is ``s``
  (pre-norm), or ``norm(s)`` with ``norm_output``.
* Vocabulary: target id = draft id + ``d2t[draft id]``; the token embedding is the target's.
* Positions: draft position t reads ``embed(x[t+1])`` with the target state at t; RoPE with the draft
  config's ``rope_theta`` and its ``rope_scaling`` (``linear``, ``llama3``, ``yarn`` as SGLang's
  ``get_rope`` and SpecForge's ``llama3_eagle.py`` compute them) when the side applies that type;
  anything else runs as default RoPE and says so in :attr:`DraftArch.notes`.

Attention is ``scaled_dot_product_attention`` over ``cat(past keys, new keys)`` with a boolean mask
(``True`` = may attend); with no past and no mask it is plain causal.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..draft.read import DraftSpec, _canonical, _weight_files
from ..errors import BadCheckpoint
from ..resolution import DraftFlags  # noqa: F401 (the flags a side runs the draft with; re-exported)

KV = tuple[torch.Tensor, torch.Tensor]  # (k, v), each [batch, kv_heads, keys, head_dim], rope applied


def flags_from_config(config: Mapping[str, Any], layout: str, semantics: str = "sglang") -> DraftFlags:
    """Flags as written in a draft config (tests and benches that run a draft outside an audit). SGLang
    never reads ``norm_before_residual``; vLLM's speculators loader defaults it to True when absent
    (conventions.md section 3)."""
    nested = config.get("eagle_config") if isinstance(config.get("eagle_config"), Mapping) else {}

    def get(name, default=False):
        v = config.get(name, nested.get(name))
        return default if v is None else bool(v)

    nbr = get("norm_before_residual", layout == "speculators") if semantics == "vllm" else False
    return DraftFlags(get("norm_before_fc"), get("fc_norm") or bool(config.get("use_aux_norm")), get("norm_output"),
                      nbr, semantics)


@dataclass(frozen=True)
class DraftArch:
    """Shapes and hyper-parameters of a draft, resolved from its config and fc shape."""

    hidden_size: int
    target_hidden_size: int
    num_aux: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    eps: float
    rope_theta: float
    vocab_size: int
    draft_vocab_size: int
    tie_word_embeddings: bool = False
    head_from_target: bool = False  # draft_vocab_size null: the target's lm_head (full vocab) is used
    rope: RopeScaling | None = None  # None: default RoPE
    notes: tuple[str, ...] = field(default=(), compare=False)
    no_fc: bool = False  # eagle_config.use_aux_hidden_state: false: the target's last state is fed unprojected
    attention: str = "llama"  # "llama" (GQA), "qwen3" (GQA + per-head q/k RMSNorm), "mla" (DeepSeek multi-latent)
    attention_bias: bool = False  # q/k/v biases (qwen3_eagle3.py:69 attention_bias)
    mla: "MlaDims | None" = None


@dataclass(frozen=True)
class MlaDims:
    """DeepSeek multi-latent attention sizes (draft config keys of the same names)."""

    q_lora_rank: int | None  # None: a plain q_proj (vLLM allows it; SGLang's kimi_k25_eagle3.py:114-117 refuses)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_interleave: bool = True  # SGLang deepseek_v2.py:2166 / HF: pairs (2i, 2i+1) rotate; vLLM always does


@dataclass(frozen=True)
class RopeScaling:
    """A ``rope_scaling`` block the runtime applies: ``linear`` (positions / factor), ``llama3`` (per-band
    frequency division), ``yarn`` (frequency blend + attention scale)."""

    kind: str
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float = 1.0
    mscale_all_dim: float = 0.0


#: The rope_scaling types the runtime implements.
ROPE_IMPLEMENTED = ("linear", "llama3", "yarn")


def _rope(cfg: Mapping[str, Any], applied: Sequence[str]) -> tuple[float, RopeScaling | None, list[str]]:
    """theta and the scaling to apply, from ``rope_parameters`` / ``rope_scaling``; ``applied``: the types
    the side running the draft applies."""
    notes = []
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(params, Mapping):
        params = {}
    theta = float(cfg.get("rope_theta") or params.get("rope_theta") or 10000.0)
    kind = params.get("rope_type", params.get("type")) or "default"
    if kind == "default":
        return theta, None, notes
    if kind not in applied:
        notes.append(f"rope_scaling {kind!r} is not applied by this side: run as default RoPE (theta {theta})")
        return theta, None, notes
    if kind not in ROPE_IMPLEMENTED:
        notes.append(f"rope_scaling {kind!r} is not implemented by the draft runtime: run as default RoPE "
                     f"(theta {theta}); positions beyond the original context are approximated")
        return theta, None, notes
    get = lambda key, default: float(params[key]) if params.get(key) is not None else default  # noqa: E731
    rope = RopeScaling(kind, get("factor", 1.0), get("low_freq_factor", 1.0), get("high_freq_factor", 4.0),
                       int(get("original_max_position_embeddings", 8192)), get("beta_fast", 32.0),
                       get("beta_slow", 1.0), get("mscale", 1.0), get("mscale_all_dim", 0.0))
    return theta, rope, notes


def weights_attention(names: Sequence[str]) -> str:
    """The decoder attention a checkpoint's weights are for: MLA projections, per-head q/k norms, or plain GQA."""
    names = {_canonical_weight(n) for n in names}
    if any(n.endswith(("self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_b_proj.weight")) for n in names):
        return "mla"
    if any(n.endswith("self_attn.q_norm.weight") for n in names):
        return "qwen3"
    return "llama"


def arch_from_spec(spec: DraftSpec, target_hidden: int, target_vocab: int,
                   rope_applied: Sequence[str] = ROPE_IMPLEMENTED, attention: str | None = None) -> DraftArch:
    """``attention``: the decoder attention of the draft class that runs it (an engine's); None: as the
    weights are (a trainer trains the layer its checkpoint holds)."""
    cfg = dict(spec.config)
    if spec.layout == "speculators" and isinstance(cfg.get("transformer_layer_config"), Mapping):
        cfg = {**cfg, **cfg["transformer_layer_config"]}
    H = spec.hidden_size
    Ht = spec.target_hidden_size or target_hidden
    heads = int(cfg.get("num_attention_heads") or max(1, H // 64))
    hd = int(cfg.get("head_dim") or H // heads)
    theta, rope, notes = _rope(cfg, rope_applied)
    dvs = cfg.get("draft_vocab_size")
    held = weights_attention(spec.weight_names) if spec.weight_names else "llama"
    kind = attention or held
    if "mla" in (kind, held) and kind != held:
        raise BadCheckpoint(f"{spec.path}: the draft's weights are for {held} attention, the draft class serving it "
                            f"runs {kind} attention: the engine cannot load this draft (the draft runtime cannot run it)")
    if kind == "llama" and held == "qwen3":
        notes.append("the draft's q_norm/k_norm weights are not used by this side's draft class (Llama attention)")
    if kind == "qwen3" and held == "llama":
        notes.append("this side's draft class (Qwen3 attention) applies per-head q/k RMSNorm; the checkpoint has no "
                     "q_norm/k_norm weights, so they keep their initial weight 1")
    mla = None
    if kind == "mla":
        try:
            mla = MlaDims(int(cfg["q_lora_rank"]) if cfg.get("q_lora_rank") else None, int(cfg["kv_lora_rank"]),
                          int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"]),
                          bool(cfg.get("rope_interleave", True)))
        except (KeyError, TypeError, ValueError):
            raise BadCheckpoint(f"{spec.path}: an MLA draft config needs kv_lora_rank, qk_nope_head_dim, "
                                "qk_rope_head_dim and v_head_dim") from None
    return DraftArch(
        hidden_size=H, target_hidden_size=int(Ht), num_aux=max(1, spec.fc_in // int(Ht)), num_layers=spec.num_layers,
        num_heads=heads, num_kv_heads=int(cfg.get("num_key_value_heads") or heads), head_dim=hd,
        intermediate_size=int(cfg.get("intermediate_size") or 4 * H), eps=float(cfg.get("rms_norm_eps") or 1e-6),
        rope_theta=theta, vocab_size=int(cfg.get("vocab_size") or target_vocab),
        draft_vocab_size=int(dvs or target_vocab), tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        head_from_target=dvs is None and "lm_head.weight" not in spec.weight_names, rope=rope, notes=tuple(notes),
        no_fc=not spec.use_aux_hidden_state, attention=kind, attention_bias=bool(cfg.get("attention_bias", False)),
        mla=mla)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).to(x.dtype)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def inv_freq(head_dim: int, theta: float, rope: RopeScaling | None, device=None) -> tuple[torch.Tensor, float]:
    """Per-pair inverse frequencies [head_dim/2] and the cos/sin scale, for ``rope``.

    llama3: SpecForge ``LlamaRotaryEmbedding`` / SGLang ``Llama3RotaryEmbedding`` (wavelengths below
    original/high_freq_factor kept, above original/low_freq_factor divided by ``factor``, smooth in
    between). yarn: SpecForge ``LlamaYarnRotaryEmbedding`` / SGLang ``YaRNScalingRotaryEmbedding``
    (frequencies blended over the correction range of beta_fast..beta_slow; cos/sin scaled by
    mscale(factor, mscale) / mscale(factor, mscale_all_dim), which is SGLang's 0.1 ln(factor) + 1 with the
    defaults). linear: positions divided by ``factor`` (returned as frequencies divided by it)."""
    base = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    if rope is None:
        return base, 1.0
    if rope.kind == "linear":
        return base / rope.factor, 1.0
    if rope.kind == "llama3":
        orig = rope.original_max_position_embeddings
        low_wl, high_wl = orig / rope.low_freq_factor, orig / rope.high_freq_factor
        wl = 2 * math.pi / base
        if rope.low_freq_factor != rope.high_freq_factor:
            smooth = (orig / wl - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        else:
            smooth = torch.zeros_like(base)
        mid = (1 - smooth) * base / rope.factor + smooth * base
        return torch.where(wl < high_wl, base, torch.where(wl > low_wl, base / rope.factor, mid)), 1.0
    # yarn
    def corr(rot: float) -> float:
        return (head_dim * math.log(rope.original_max_position_embeddings / (rot * 2 * math.pi))) / (2 * math.log(theta))
    low, high = max(math.floor(corr(rope.beta_fast)), 0), min(math.ceil(corr(rope.beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32, device=device) - low) / (high - low)).clamp(0, 1)
    extrapolate = 1.0 - ramp
    freq = (base / rope.factor) * (1 - extrapolate) + base * extrapolate
    return freq, _yarn_mscale(rope.factor, rope.mscale) / _yarn_mscale(rope.factor, rope.mscale_all_dim)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype,
                 rope: RopeScaling | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin for ``positions`` [batch, pos] -> each [batch, 1, pos, head_dim] (neox / rotate-half)."""
    inv, scale = inv_freq(head_dim, theta, rope, positions.device)
    ang = positions.float()[..., None] * inv  # [batch, pos, head_dim/2]
    emb = torch.cat([ang, ang], dim=-1)[:, None]  # [batch, 1, pos, head_dim]
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def _attend(q, k, v, past: KV | None, mask: torch.Tensor | None, scale: float | None = None):
    """Attention of ``q`` [batch, heads, pos, d] over ``past`` + the new ``k``/``v`` (kv heads repeated)."""
    B, _, T, _ = q.shape
    if past is not None:
        k = torch.cat([past[0].expand(B, -1, -1, -1), k], dim=2)  # [batch, kv_heads, keys, d]
        v = torch.cat([past[1].expand(B, -1, -1, -1), v], dim=2)
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if mask is None and past is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, scale=scale)
    if mask is None:  # offset causal: query i sees every past key and new keys 0..i
        S = k.shape[2] - T
        mask = torch.ones(T, S + T, dtype=torch.bool, device=q.device).tril(S)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


class MlaAttention(nn.Module):
    """DeepSeek multi-latent attention over the layer's input (2H wide in layer 0), as SGLang's
    ``DeepseekV2AttentionMLA`` (kimi_k25_eagle3.py:91-135, its fused q_a/kv_a projection fed [embed, hidden]) and
    vLLM's ``DeepseekV2MLAAttention`` (deepseek_eagle3.py:68-83) compute it, in the un-absorbed form:
    q = q_b(norm(q_a(x))) (or q_proj(x)); [c_kv, k_pe] = kv_a(x); [k_nope, v] = kv_b(norm(c_kv)); RoPE on the
    qk_rope_head_dim part only (pairs interleaved unless ``rope_interleave`` is false), k_pe shared by all heads;
    softmax scale (qk_nope + qk_rope)^-0.5, times mscale(factor, mscale_all_dim)^2 under yarn."""

    def __init__(self, arch: DraftArch, in_dim: int):
        super().__init__()
        a, m = arch, arch.mla
        self.arch, self.m = arch, m
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            self.q_a_proj = nn.Linear(in_dim, m.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(m.q_lora_rank, a.eps)
            self.q_b_proj = nn.Linear(m.q_lora_rank, a.num_heads * qk, bias=False)
        else:
            self.q_proj = nn.Linear(in_dim, a.num_heads * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(in_dim, m.kv_lora_rank + m.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(m.kv_lora_rank, a.eps)
        self.kv_b_proj = nn.Linear(m.kv_lora_rank, a.num_heads * (m.qk_nope_head_dim + m.v_head_dim), bias=False)
        self.o_proj = nn.Linear(a.num_heads * m.v_head_dim, a.hidden_size, bias=False)
        self.scale = qk ** -0.5
        if a.rope is not None and a.rope.kind == "yarn":
            self.scale *= _yarn_mscale(a.rope.factor, a.rope.mscale_all_dim) ** 2

    def forward(self, x, cos, sin, past: KV | None, mask: torch.Tensor | None) -> tuple[torch.Tensor, KV]:
        a, m = self.arch, self.m
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))) if m.q_lora_rank else self.q_proj(x)
        q = q.view(B, T, a.num_heads, -1).transpose(1, 2)  # [batch, heads, pos, qk_nope + qk_rope]
        q_nope, q_pe = q.split([m.qk_nope_head_dim, m.qk_rope_head_dim], dim=-1)
        c_kv, k_pe = self.kv_a_proj_with_mqa(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(c_kv)).view(B, T, a.num_heads, -1).transpose(1, 2)
        k_nope, v = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)  # [batch, heads, pos, *]
        k_pe = k_pe.view(B, 1, T, m.qk_rope_head_dim)
        if m.rope_interleave:  # (x0, x1), (x2, x3)... -> the rotate-half layout, the same for q and k
            q_pe = torch.cat([q_pe[..., 0::2], q_pe[..., 1::2]], dim=-1)
            k_pe = torch.cat([k_pe[..., 0::2], k_pe[..., 1::2]], dim=-1)
        q_pe, k_pe = _rotate(q_pe, cos, sin), _rotate(k_pe, cos, sin)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(B, a.num_heads, T, -1)], dim=-1)
        o = _attend(q, k, v, past, mask, self.scale)
        o = o.transpose(1, 2).reshape(B, T, a.num_heads * m.v_head_dim)
        return self.o_proj(o), (k, v)


class DraftAttention(nn.Module):
    def __init__(self, arch: DraftArch, in_dim: int):
        super().__init__()
        self.arch = arch
        a = arch
        bias = a.attention_bias
        self.q_proj = nn.Linear(in_dim, a.num_heads * a.head_dim, bias=bias)
        self.k_proj = nn.Linear(in_dim, a.num_kv_heads * a.head_dim, bias=bias)
        self.v_proj = nn.Linear(in_dim, a.num_kv_heads * a.head_dim, bias=bias)
        self.o_proj = nn.Linear(a.num_heads * a.head_dim, a.hidden_size, bias=False)
        if a.attention == "qwen3":  # Qwen3Attention: RMSNorm over each head's q and k, before RoPE
            self.q_norm = RMSNorm(a.head_dim, a.eps)
            self.k_norm = RMSNorm(a.head_dim, a.eps)

    def forward(self, x, cos, sin, past: KV | None, mask: torch.Tensor | None) -> tuple[torch.Tensor, KV]:
        a = self.arch
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, a.num_heads, a.head_dim).transpose(1, 2)  # [batch, heads, pos, head_dim]
        k = self.k_proj(x).view(B, T, a.num_kv_heads, a.head_dim).transpose(1, 2)  # [batch, kv_heads, pos, head_dim]
        v = self.v_proj(x).view(B, T, a.num_kv_heads, a.head_dim).transpose(1, 2)
        if a.attention == "qwen3":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        o = _attend(q, k, v, past, mask)
        o = o.transpose(1, 2).reshape(B, T, a.num_heads * a.head_dim)  # [batch, pos, heads*head_dim]
        return self.o_proj(o), (k, v)


class DraftMLP(nn.Module):
    def __init__(self, H: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(H, inter, bias=False)
        self.up_proj = nn.Linear(H, inter, bias=False)
        self.down_proj = nn.Linear(inter, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DraftLayer(nn.Module):
    def __init__(self, arch: DraftArch, index: int):
        super().__init__()
        H = arch.hidden_size
        self.index = index
        self.input_layernorm = RMSNorm(H, arch.eps)
        self.hidden_norm = RMSNorm(H, arch.eps)
        self.post_attention_layernorm = RMSNorm(H, arch.eps)
        self.self_attn = (MlaAttention if arch.attention == "mla" else DraftAttention)(arch, 2 * H if index == 0 else H)
        self.mlp = DraftMLP(H, arch.intermediate_size)

    def forward(self, embeds, h, residual, cos, sin, past, mask, flags: DraftFlags):
        if self.index == 0:
            if flags.norm_before_residual:  # vLLM: the residual is the normed hidden
                h = self.hidden_norm(h)
                residual = h
            else:  # SGLang: residual = fc output, un-normed
                residual = h
                h = self.hidden_norm(h)
            x = torch.cat([self.input_layernorm(embeds), h], dim=-1)  # [batch, pos, 2H]
        else:
            residual = h + residual
            x = self.hidden_norm(residual)  # [batch, pos, H]
        attn, new = self.self_attn(x, cos, sin, past, mask)
        residual = attn + residual
        return self.mlp(self.post_attention_layernorm(residual)), residual, new


@dataclass
class DraftOutput:
    logits: torch.Tensor  # [batch, pos, draft_vocab]
    hidden: torch.Tensor  # [batch, pos, H]: the recurrent hidden for the next draft step
    kv: list[KV]  # per layer, the keys/values of this call only


class Eagle3Draft(nn.Module):
    """The draft network. ``embed`` (the target's embedding weight) and, for a null draft vocab, the
    target's head are set by :func:`load_draft_model`; they are not parameters of the draft."""

    def __init__(self, arch: DraftArch, flags: DraftFlags, fc_bias: bool = False):
        super().__init__()
        self.arch, self.flags = arch, flags
        H, Ht, n = arch.hidden_size, arch.target_hidden_size, arch.num_aux
        self.fc = nn.Linear(n * Ht, H, bias=fc_bias) if not arch.no_fc else None
        self.input_norm = RMSNorm(n * Ht, arch.eps) if flags.norm_before_fc else None
        self.fc_norm = nn.ModuleList(RMSNorm(Ht, arch.eps) for _ in range(n)) if flags.fc_norm else None
        self.layers = nn.ModuleList(DraftLayer(arch, i) for i in range(arch.num_layers))
        self.norm = RMSNorm(H, arch.eps)
        self.lm_head = nn.Linear(H, arch.draft_vocab_size, bias=False)
        self.register_buffer("hot_ids", torch.arange(arch.draft_vocab_size), persistent=False)  # [draft_vocab]
        self.embed: torch.Tensor | None = None  # [vocab, H], the target's
        self.target_head: torch.Tensor | None = None

    def project(self, hidden: torch.Tensor, from_target: bool | None = None) -> torch.Tensor:
        """Target features (n*H_t wide) -> draft width; the draft's own hidden passes unchanged.

        ``from_target``: whether ``hidden`` is the target's states (None: judged by width, which cannot
        tell them apart when fc's input width equals the draft hidden size; callers that feed target
        states say so). Target states of draft width skip fc only with ``fc_skip_at_hidden_width``."""
        width = hidden.shape[-1]
        if self.fc is None:  # no aux states: the target's last state, at the draft's width, goes in as it is
            if width != self.arch.hidden_size:
                raise BadCheckpoint(f"the draft has no fc and takes {self.arch.hidden_size} features, it was fed {width}")
            return hidden
        if from_target is None:
            from_target = width != self.arch.hidden_size
        if not from_target or (width == self.arch.hidden_size and self.flags.fc_skip_at_hidden_width):
            return hidden
        if width != self.fc.in_features:
            raise BadCheckpoint(f"the draft's fc takes {self.fc.in_features} features, it was fed {hidden.shape[-1]}")
        if self.input_norm is not None:
            hidden = self.input_norm(hidden)
        if self.fc_norm is not None:
            chunks = hidden.split(self.arch.target_hidden_size, dim=-1)
            hidden = torch.cat([nrm(c) for nrm, c in zip(self.fc_norm, chunks)], dim=-1)
        return self.fc(hidden)

    def head(self, normed: torch.Tensor) -> torch.Tensor:
        if self.target_head is not None:
            return normed @ self.target_head.T
        return self.lm_head(normed)

    def forward(self, input_ids: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor,
                past: Sequence[KV] | None = None, mask: torch.Tensor | None = None,
                projected: bool = False, from_target: bool | None = None) -> DraftOutput:
        """``input_ids`` [batch, pos] (target ids), ``hidden`` [batch, pos, n*H_t or H], ``positions``
        [batch, pos] or [pos]; ``past`` per layer [batch or 1, kv_heads, keys, head_dim]; ``mask``
        [pos, keys + pos] bool. ``projected``: ``hidden`` is already :meth:`project`'s output [batch, pos, H]
        (the fingerprint search sums per-slot fc products itself); ``from_target``: ``hidden`` is the target's
        states (see :meth:`project`)."""
        if self.embed is None:
            raise RuntimeError("draft embedding not set (load_draft_model sets the target's)")
        if positions.dim() == 1:
            positions = positions[None]
        w = self.norm.weight
        embeds = F.embedding(input_ids, self.embed).to(w.dtype)  # [batch, pos, H]
        h = hidden.to(w.dtype) if projected else self.project(hidden.to(w.dtype), from_target)  # [batch, pos, H]
        rot = self.arch.mla.qk_rope_head_dim if self.arch.mla else self.arch.head_dim
        cos, sin = rope_cos_sin(positions, rot, self.arch.rope_theta, w.dtype, self.arch.rope)
        residual, kv = None, []
        for i, layer in enumerate(self.layers):
            h, residual, new = layer(embeds, h, residual, cos, sin, past[i] if past else None, mask, self.flags)
            kv.append(new)
        s = h + residual  # [batch, pos, H], pre-norm sum
        normed = self.norm(s)
        return DraftOutput(self.head(normed if self.flags.head_norm else s), normed if self.flags.norm_output else s, kv)

    @property
    def device(self) -> torch.device:
        return self.norm.weight.device

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return self.hot_ids[draft_ids]


# ---------------------------------------------------------------------------- loading

_LEGACY = {"aux_norm_low": "fc_norm.0", "aux_norm_mid": "fc_norm.1", "aux_norm_high": "fc_norm.2"}


def _canonical_weight(name: str) -> str:
    name = _canonical(name)
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    for old, new in _LEGACY.items():
        if name.startswith(old):
            name = new + name[len(old):]
    return name


def _optional(arch: DraftArch) -> set[str]:
    """Weights a checkpoint may omit: layers >= 1 never use ``input_layernorm``; ``input_norm`` (norm_before_fc)
    keeps its initial weight 1 when a checkpoint trained without it is served with the flag on (SGLang loads
    only the tensors the checkpoint has)."""
    out = {f"layers.{i}.input_layernorm.weight" for i in range(1, arch.num_layers)} | {"input_norm.weight"}
    if arch.attention == "qwen3":  # a Qwen3 class serving a draft trained without q/k norms keeps weight 1
        out |= {f"layers.{i}.self_attn.{n}_norm.weight" for i in range(arch.num_layers) for n in "qk"}
    return out


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a draft checkpoint under its canonical name (``midlayer.`` -> ``layers.0.``)."""
    out: dict[str, torch.Tensor] = {}
    for f in _weight_files(Path(directory)):
        if f.suffix == ".safetensors":
            from safetensors.torch import load_file

            sd = load_file(str(f))
        else:
            sd = torch.load(f, map_location="cpu", weights_only=True)
        out.update({_canonical_weight(k): v for k, v in sd.items()})
    return out


def build_draft(arch: DraftArch, flags: DraftFlags, weights: Mapping[str, torch.Tensor], target_embed: torch.Tensor,
                target_head: torch.Tensor | None, where: str = "draft", dtype=torch.float32,
                device: torch.device | str | None = None) -> Eagle3Draft:
    """The draft module with ``weights`` loaded. ``device``: where it is built (every parameter is created and
    given its throw-away initial value there, then overwritten by the weights): on a GPU that random
    initialisation is free, on the CPU it cost 4.2 s for an 8B-sized draft built twice (bench/README.md)."""
    with torch.device(device) if device is not None else contextlib.nullcontext():
        model = Eagle3Draft(arch, flags, fc_bias="fc.bias" in weights)
    own = dict(model.state_dict())
    sd, missing = {}, []
    for name, param in own.items():
        src = weights.get(name)
        if src is None and name.startswith("layers.0.") and f"midlayer.{name[9:]}" in weights:
            src = weights[f"midlayer.{name[9:]}"]
        if src is None:
            if name == "lm_head.weight" and (arch.head_from_target or arch.tie_word_embeddings):
                continue
            if name in _optional(arch):
                continue  # unused or optional norms keep weight 1
            missing.append(name)
            continue
        if tuple(src.shape) != tuple(param.shape):
            raise BadCheckpoint(f"{where}: weight {name} has shape {tuple(src.shape)}, the config implies {tuple(param.shape)}")
        sd[name] = src
    if missing:
        raise BadCheckpoint(f"{where}: missing weight(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    model.load_state_dict(sd, strict=False)
    model.to(dtype)
    V = target_embed.shape[0]
    if "d2t" in weights:
        d2t = weights["d2t"].long()
        hot = d2t + torch.arange(d2t.shape[0])
        if d2t.shape[0] != arch.draft_vocab_size or int(hot.min()) < 0 or int(hot.max()) >= V:
            raise BadCheckpoint(f"{where}: d2t maps draft ids to target ids outside 0..{V - 1} "
                                f"(or has {d2t.shape[0]} entries for a draft vocab of {arch.draft_vocab_size})")
        model.hot_ids = hot
    elif arch.draft_vocab_size != V and not arch.head_from_target:
        raise BadCheckpoint(f"{where}: draft vocab {arch.draft_vocab_size} != target vocab {V} and there is no d2t map")
    if arch.hidden_size != target_embed.shape[1]:
        emb = weights.get("embed_tokens.weight")
        if emb is None:
            raise BadCheckpoint(f"{where}: draft hidden {arch.hidden_size} differs from the target's "
                                f"{target_embed.shape[1]} and the draft has no embed_tokens")
        target_embed = emb  # SGLang set_embed is a no-op in this case (llama.py:910-916)
    model.embed = target_embed
    if arch.head_from_target:
        model.target_head = target_head
    elif arch.tie_word_embeddings and "lm_head.weight" not in weights:
        model.target_head = model.embed
    model.eval()
    return model


def load_draft_model(spec: DraftSpec, target, flags: DraftFlags, dtype=torch.float32) -> Eagle3Draft:
    """The draft of ``spec`` with the embedding (and, if needed, head) of the loaded ``target``."""
    from ..source import as_source

    source = as_source(target)
    embed = source.embedding()  # [vocab, H_t]: the draft's token embedding is the target's
    head = source.lm_head()  # [vocab, H_t]: borrowed only by drafts without an lm_head of their own
    if flags.parallel_drafting:
        raise BadCheckpoint(f"{spec.path}: served with parallel drafting (P-EAGLE: several tokens per forward, mask "
                            "tokens for the later ones), which the draft runtime does not run (it drafts one token "
                            "per step): this side of the draft cannot be measured")
    arch = arch_from_spec(spec, target.info.hidden_size, target.info.vocab_size, flags.rope_scaling, flags.attention)
    model = build_draft(arch, flags, read_weights(spec.path), embed, head, spec.path, dtype, device=embed.device)
    return model.to(embed.device)
