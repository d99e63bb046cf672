"""The modules of a draft layer, shared by the EAGLE-3 draft (:mod:`.eagle3`) and the block drafts
(:mod:`eagle_audit.runtime.block`): RMSNorm, RoPE (default, ``linear``, ``llama3``, ``yarn``), GQA / Qwen3 /
multi-latent attention over a KV cache, the gated MLP, and one draft decoder layer.

Attention is ``scaled_dot_product_attention`` over ``cat(past keys, new keys)`` with a boolean mask
(``True`` = may attend); with no past and no mask it is plain causal.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..resolution import DraftFlags
from .arch import DraftArch, RopeScaling

KV = tuple[torch.Tensor, torch.Tensor]  # (k, v), each [batch, kv_heads, keys, head_dim], rope applied


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


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def attend(q, k, v, past: KV | None, mask: torch.Tensor | None, scale: float | None = None):
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
        q_pe, k_pe = rotate(q_pe, cos, sin), rotate(k_pe, cos, sin)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(B, a.num_heads, T, -1)], dim=-1)
        o = attend(q, k, v, past, mask, self.scale)
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
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        o = attend(q, k, v, past, mask)
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
