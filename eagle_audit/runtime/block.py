"""A DFlash / DSpark block-draft forward, on the target's states (the fingerprint's scorer runs it).

What a DFlash draft computes, as z-lab ``dflash`` 0.1.0 (``dflash/model.py`` ``DFlashDraftModel.forward``,
``Qwen3DFlashAttention.forward``) and SpecForge 0.2.0 (``specforge/modeling/draft/dflash.py``, trained through
``algorithms/common/dflash_family_model.py`` ``OnlineDFlashModel``) define it; tests/fingerprint/
test_dflash_forward.py executes both wheels' own forwards against this one:

* **Context.** The target states of the draft's slots, concatenated per position, go through ``fc`` (no bias)
  and ``hidden_norm``: ``ctx = hidden_norm(fc(cat(s_1..s_n)))`` [batch, S, H]. The same ``ctx`` feeds every
  draft layer (it is not updated through the layers).
* **Block.** A block starts at an *anchor* position a: its tokens are ``[x_a, mask, ..., mask]``
  (``block_size`` tokens, ``mask_token_id``), embedded with the target's embedding (times
  ``input_embedding_scale``, z-lab), at positions a..a+block_size-1. Its context is the target's states at
  positions < a (``kv < anchor``, SpecForge's mask; at inference the state of x_a is not computed yet).
* **Layer.** Pre-norm Qwen3 layer whose attention reads queries from the block only and keys/values from
  ``cat(ctx, block)`` through the same ``k_proj`` / ``v_proj``; per-head ``q_norm`` / ``k_norm`` before RoPE
  (context keys at their own positions); the block sees itself bidirectionally (``is_causal`` false, as
  SpecForge always and z-lab for full-attention layers), every allowed context key, and nothing of other blocks.
* **Output.** ``norm`` of the last layer, then the *target's* ``lm_head`` (times ``output_multiplier``, and
  ``final_logit_softcapping`` when set: z-lab); block position k (1..block_size-1) predicts x_{a+k}.

DSpark (SpecForge 0.2.0 ``modeling/draft/dspark.py`` ``DSparkDraftModel``): the same backbone, and a Markov head
whose logit bias for a drafted token depends on the token before it (``markov_w2(markov_w1[prev])``; ``gated``:
times ``sigmoid(gate_proj(cat(h, markov_w1[prev])))``; ``rnn``: a recurrent state over the block's drafted tokens, from zeros,
``markov_w2(tanh(out))``). The fingerprint scores the block's first drafted token with it (:meth:`DFlashDraft.logits`
``prev_ids``) on the row the engines draft it from (:attr:`DFlashArch.first_draft_row`): its previous token is the
anchor, known. :meth:`MarkovHead.step` is the head at any position (the
state it carries to the next one), which drafting a whole block sequentially needs
(:mod:`eagle_audit.simulate.block`, as SGLang 0.5.23 ``dspark_draft.py`` ``draft_markov_block`` runs it).
``sample_from_anchor`` (top-level config key, default true in both engines) says which block rows draft: true, row
0 (the anchor) predicts the first draft and the block's B rows draft B tokens (SpecForge 0.2.0's DSpark objective,
``OnlineDSparkModel._build_dspark_labels_and_mask``: label offsets 1..B); false, the DFlash rows 1..B.

**The speculators 0.9.0 layout** (``speculators_model_type: "dflash"``): the same network, read from other places
(:mod:`eagle_audit.runtime.block_speculators`).

Not run here (refused in one line by :func:`dflash_arch` / :func:`build_dflash_draft`): sliding-attention layers,
DFlash2's convolutions and candidate selector, speculators-layout drafts other than ``dflash`` (DSpark, DFlash2) or
with ``sample_from_anchor: true`` (a DFlash block drafted from the anchor's row: the engines' DFlash block drafts
from the mask rows), and DSpark heads of any other kind or layout (:data:`DSPARK_NOT_RUN`: weights the forward does
not know are refused, never dropped).

Assumption, named: the target's embedding is its raw ``embed_tokens`` weight (what ``source.embedding()``
gives): exact for Llama / Qwen targets, not for targets that scale their embedding inside the module (Gemma).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import BadCheckpoint
from .arch import LayerShape, RopeScaling, rope_params
from .block_speculators import SPECULATORS_IGNORED, speculators_arch, speculators_head
from .modules import DraftMLP, RMSNorm, rope_cos_sin, rotate

#: DFlash variants named in ``architectures`` that this forward does not run, and why.
NOT_RUN_ARCHS = {"DFlash2": "DFlash2's grouped causal convolutions and candidate selector are not implemented"}
DSPARK_NOT_RUN = ("eagle-audit runs DSpark drafts with SpecForge 0.2.0's Markov heads (vanilla, gated, rnn: "
                  "modeling/draft/dspark.py) in the z-lab / SpecForge layout only; this head is not implemented; "
                  "`eagle-audit layers` audits its wiring")
MARKOV_KINDS = ("vanilla", "gated", "rnn")
#: weights a DFlash / DSpark checkpoint may hold that do not change its logits (ignored; the target's embedding
#: and head are the ones every engine and trainer uses)
IGNORED_WEIGHTS = ("confidence_head.", "embed_tokens.", "lm_head.")


@dataclass(frozen=True)
class DFlashArch(LayerShape):
    """Shapes and hyper-parameters of a DFlash draft (its config, and fc's shape for the slot count)."""

    block_size: int
    mask_token_id: int
    attention_bias: bool = False
    causal: bool = False  # z-lab ``is_causal: true``: block position i sees block positions <= i only
    embed_scale: float = 1.0  # z-lab ``input_embedding_scale``
    output_multiplier: float = 1.0  # z-lab ``output_multiplier``
    softcap: float | None = None  # z-lab ``final_logit_softcapping``
    rope: RopeScaling | None = None
    markov: str | None = None  # DSpark's Markov head: "vanilla", "gated", "rnn"; None: none (DFlash)
    markov_rank: int = 0
    dspark: bool = False  # a DSpark draft (its block is drafted token by token, through the Markov head if any)
    #: DSpark ``sample_from_anchor``: block row 0 (the anchor) predicts the first draft (row i predicts a+i+1);
    #: False: row i (1..) predicts a+i, as DFlash
    sample_from_anchor: bool = False
    layout: str = "dflash"  # DraftSpec.layout: "dflash" (z-lab / SpecForge) or "speculators"
    #: the speculators layout's ``draft_vocab_size`` when it is not the verifier's (a reduced vocabulary: its own
    #: ``lm_head`` and ``d2t``); None: the target's vocabulary and head
    draft_vocab_size: int | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def first_draft_row(self) -> int:
        """The block row the engines draft the first token from: 0 (the anchor's) for a DSpark draft sampling from
        the anchor (SGLang 0.5.23 ``dspark_draft.py:656-664``, vLLM 0.33.0 ``dflash/speculator.py:781-788``; what
        SpecForge 0.2.0's DSpark loss supervises: ``dflash_family_model.py:764-767``), else 1 (DFlash; DSpark
        ``sample_from_anchor`` false: ``dspark_draft.py:88-107``). Its previous token is the anchor either way."""
        return 0 if self.sample_from_anchor else 1

    @property
    def engine_block(self) -> int:
        """Tokens of the engines' block, [anchor, masks]: ``block_size``, one more for a DSpark draft not sampling
        from the anchor (its gamma = ``block_size`` drafts sit on rows 1..gamma: SGLang ``dspark_draft.py:351``,
        vLLM ``dspark/speculator.py:52-55``)."""
        return self.block_size + (1 if self.dspark and not self.sample_from_anchor else 0)


def _value(cfg: Mapping[str, Any], name: str, default=None):
    """``dflash_config.<name>``, else the top-level key (z-lab ``_draft_value``)."""
    nested = cfg.get("dflash_config") if isinstance(cfg.get("dflash_config"), Mapping) else {}
    v = nested.get(name, cfg.get(name))
    return default if v is None else v


def dflash_arch(spec, target_hidden: int) -> DFlashArch:
    """The forward's arch for a DFlash draft ``spec`` (:class:`eagle_audit.draft.read.DraftSpec`); bad input (one
    line) for what it does not run."""
    where = spec.path
    if spec.block is None:  # not read as a block draft (eagle_audit/draft/family.py)
        raise BadCheckpoint(f"{where}: not a DFlash draft (kind {spec.kind})")
    if spec.layout == "speculators":
        smt = spec.config.get("speculators_model_type")
        if spec.draft_kind.token_by_token:
            raise BadCheckpoint(f"{where}: a DSpark draft in the speculators layout: {DSPARK_NOT_RUN}")
        if smt != "dflash":
            why = NOT_RUN_ARCHS["DFlash2"] if smt == "dflash2" else "not a DFlash model this forward runs"
            raise BadCheckpoint(f"{where}: speculators_model_type {smt!r}: {why} (the speculators layout runs "
                                "speculators_model_type \"dflash\")")
        return DFlashArch(**speculators_arch(spec, target_hidden))
    if spec.layout != "dflash":
        raise BadCheckpoint(f"{where}: a DFlash draft in the {spec.layout} layout: fingerprint runs the z-lab layout "
                            "(SpecForge, modelopt, z-lab dflash write it) and the speculators one")
    for arch in spec.architectures:
        for name, why in NOT_RUN_ARCHS.items():
            if name in arch:
                raise BadCheckpoint(f"{where}: {arch}: {why}")
    cfg = spec.config
    layer_types = cfg.get("layer_types") or ()
    if "sliding_attention" in layer_types:
        raise BadCheckpoint(f"{where}: layer_types has sliding_attention layers: the DFlash forward here runs "
                            "full-attention layers only")
    mask = _value(cfg, "mask_token_id")
    if not isinstance(mask, int) or isinstance(mask, bool):
        raise BadCheckpoint(f"{where}: no mask_token_id (dflash_config.mask_token_id): the block's mask token is "
                            "needed to run the draft")
    H = int(cfg.get("hidden_size") or spec.hidden_size)
    heads = int(cfg.get("num_attention_heads") or 0)
    if not heads or not cfg.get("intermediate_size"):
        raise BadCheckpoint(f"{where}: num_attention_heads and intermediate_size are needed to run the draft")
    if target_hidden <= 0 or spec.fc_in % target_hidden:
        raise BadCheckpoint(f"{where}: fc.weight takes {spec.fc_in} inputs, not a multiple of the target's hidden "
                            f"size {target_hidden}")
    if H != target_hidden:
        raise BadCheckpoint(f"{where}: draft hidden size {H} differs from the target's {target_hidden}: a DFlash "
                            "draft embeds with the target's embedding and predicts with its lm_head")
    markov, rank = None, int(_value(cfg, "markov_rank", 0) or 0)
    dspark = spec.draft_kind.token_by_token
    if dspark and rank > 0:
        markov = str(_value(cfg, "markov_head_type", "vanilla")).lower()
        if markov not in MARKOV_KINDS:
            raise BadCheckpoint(f"{where}: a dspark draft with markov_head_type {markov!r}: {DSPARK_NOT_RUN}")
    theta, rope, notes = rope_params(cfg, ("linear", "llama3", "yarn"))
    cap = _value(cfg, "final_logit_softcapping")
    is_causal = cfg.get("is_causal")
    return DFlashArch(
        hidden_size=H, target_hidden_size=target_hidden, num_aux=spec.fc_in // target_hidden,
        num_layers=int(cfg.get("num_hidden_layers") or spec.num_layers), num_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads), head_dim=int(cfg.get("head_dim") or H // heads),
        intermediate_size=int(cfg["intermediate_size"]), eps=float(cfg.get("rms_norm_eps") or 1e-6),
        rope_theta=theta, block_size=int(_value(cfg, "block_size", 16)), mask_token_id=mask,
        attention_bias=bool(cfg.get("attention_bias", False)), causal=bool(is_causal) if is_causal is not None else False,
        embed_scale=float(_value(cfg, "input_embedding_scale", 1.0)),
        output_multiplier=float(_value(cfg, "output_multiplier", 1.0)),
        softcap=float(cap) if cap is not None and float(cap) > 0 else None, rope=rope, notes=tuple(notes),
        markov=markov, markov_rank=rank if markov else 0, dspark=dspark,
        # the top-level key, default true: SGLang 0.5.23 dspark_config.py:29-31, vLLM 0.33.0 dspark/speculator.py:49-51
        sample_from_anchor=dspark and bool(cfg.get("sample_from_anchor", True)))


class MarkovHead(nn.Module):
    """DSpark's logit bias for a drafted token from the token before it (SpecForge 0.2.0 ``modeling/draft/dspark.py``;
    SGLang 0.5.23 ``srt/models/dspark.py:186-383``, the same three kinds)."""

    def __init__(self, a: DFlashArch, vocab: int):
        super().__init__()
        self.kind, r = a.markov, a.markov_rank
        self.markov_w1 = nn.Embedding(vocab, r)
        self.markov_w2 = nn.Linear(r, vocab, bias=False)
        if self.kind == "gated":
            self.gate_proj = nn.Linear(a.hidden_size + r, r)
        elif self.kind == "rnn":
            self.joint_proj = nn.Linear(2 * r + a.hidden_size, 3 * r)

    def init_state(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """The state before a block's first drafted token (``hidden`` [M, H]): zeros [M, r] for ``rnn``, else none."""
        if self.kind != "rnn":
            return None
        return torch.zeros(hidden.shape[0], self.markov_w1.embedding_dim, dtype=hidden.dtype, device=hidden.device)

    def step(self, prev_ids: torch.Tensor, hidden: torch.Tensor,
             state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One drafted position: ``prev_ids`` [M] (the token before it), ``hidden`` [M, H] (its final-normed draft
        hidden), ``state`` (:meth:`init_state`, then what the previous step returned) -> (bias [M, vocab], state)."""
        e = self.markov_w1(prev_ids)  # [M, r]
        if self.kind == "gated":
            e = torch.sigmoid(self.gate_proj(torch.cat([hidden, e], dim=-1))) * e
        elif self.kind == "rnn":
            gate, cand, out = self.joint_proj(torch.cat([state, e, hidden], dim=-1)).chunk(3, dim=-1)
            gate = torch.sigmoid(gate)
            state = gate * state + (1.0 - gate) * torch.tanh(cand)
            e = torch.tanh(out)
        return self.markov_w2(e), state

    def first_bias(self, prev_ids: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``prev_ids`` [M] (the anchors), ``hidden`` [M, H] (the first drafted position's) -> [M, vocab]."""
        return self.step(prev_ids, hidden, self.init_state(hidden))[0]


class BlockAttention(nn.Module):
    """Queries from the block, keys/values from the context and the block (same projections)."""

    def __init__(self, a: DFlashArch):
        super().__init__()
        self.arch = a
        self.q_proj = nn.Linear(a.hidden_size, a.num_heads * a.head_dim, bias=a.attention_bias)
        self.k_proj = nn.Linear(a.hidden_size, a.num_kv_heads * a.head_dim, bias=a.attention_bias)
        self.v_proj = nn.Linear(a.hidden_size, a.num_kv_heads * a.head_dim, bias=a.attention_bias)
        self.o_proj = nn.Linear(a.num_heads * a.head_dim, a.hidden_size, bias=a.attention_bias)
        self.q_norm = RMSNorm(a.head_dim, a.eps)
        self.k_norm = RMSNorm(a.head_dim, a.eps)

    def forward(self, x, ctx, rope_blk, rope_ctx, ctx_visible):
        """``x`` [B, A, bs, H] (normed block hidden), ``ctx`` [B, S, H]; ``rope_*`` (cos, sin) of
        [B, A, bs, 1, d] and [B or 1, S, 1, d]; ``ctx_visible`` [B, A, S] bool -> [B, A, bs, H]."""
        a = self.arch
        B, A, bs, _ = x.shape
        S = ctx.shape[1]
        g, r, d = a.num_kv_heads, a.num_heads // a.num_kv_heads, a.head_dim
        q = self.q_norm(self.q_proj(x).view(B, A, bs, a.num_heads, d))  # [B, A, bs, heads, d]
        kb = self.k_norm(self.k_proj(x).view(B, A, bs, g, d))  # [B, A, bs, kv_heads, d]
        vb = self.v_proj(x).view(B, A, bs, g, d)
        kc = self.k_norm(self.k_proj(ctx).view(B, S, g, d))  # [B, S, kv_heads, d]
        vc = self.v_proj(ctx).view(B, S, g, d)
        q, kb = rotate(q, *rope_blk), rotate(kb, *rope_blk)
        kc = rotate(kc, *rope_ctx)
        q = q.view(B, A, bs, g, r, d) * d ** -0.5
        s_ctx = torch.einsum("baqgrd,bsgd->bgraqs", q, kc)  # [B, kv_heads, rep, A, bs, S]
        s_blk = torch.einsum("baqgrd,bakgd->bgraqk", q, kb)  # [B, kv_heads, rep, A, bs, bs]
        neg = torch.finfo(s_ctx.dtype).min
        s_ctx = s_ctx.masked_fill(~ctx_visible[:, None, None, :, None, :], neg)
        if a.causal:
            tri = torch.ones(bs, bs, dtype=torch.bool, device=x.device).tril()
            s_blk = s_blk.masked_fill(~tri, neg)
        p = torch.softmax(torch.cat([s_ctx, s_blk], dim=-1).float(), dim=-1).to(q.dtype)
        o = (torch.einsum("bgraqs,bsgd->baqgrd", p[..., :S], vc)
             + torch.einsum("bgraqk,bakgd->baqgrd", p[..., S:], vb))  # [B, A, bs, kv_heads, rep, d]
        return self.o_proj(o.reshape(B, A, bs, a.num_heads * d))


class BlockLayer(nn.Module):
    def __init__(self, a: DFlashArch):
        super().__init__()
        self.input_layernorm = RMSNorm(a.hidden_size, a.eps)
        self.self_attn = BlockAttention(a)
        self.post_attention_layernorm = RMSNorm(a.hidden_size, a.eps)
        self.mlp = DraftMLP(a.hidden_size, a.intermediate_size)

    def forward(self, x, ctx, rope_blk, rope_ctx, ctx_visible):
        x = x + self.self_attn(self.input_layernorm(x), ctx, rope_blk, rope_ctx, ctx_visible)
        return x + self.mlp(self.post_attention_layernorm(x))


@dataclass
class BlockStep:
    """The scorer's view (:meth:`DFlashDraft.forward`): the block's first drafted token at every anchor."""

    logits: torch.Tensor  # [batch, pos, vocab]


class DFlashDraft(nn.Module):
    """The DFlash draft network; ``embed`` and ``target_head`` (the target's, [vocab, H]) are set by
    :func:`load_dflash_draft` and are not parameters of the draft. Weight names are z-lab's / SpecForge's
    (``fc``, ``hidden_norm``, ``layers.{i}.self_attn.{q,k,v,o}_proj`` / ``{q,k}_norm``, ``layers.{i}.mlp``,
    ``norm``)."""

    family = "block"  # the draft family it runs (eagle_audit/runtime/load.py; load_draft sets the kind's)
    fc_always = True  # fc runs at any width (z-lab, SpecForge): no skip when n x H_t == H
    input_norm = None  # no norm before fc, no per-slot norm: fc is linear in the slots (the scorer's fast path)
    fc_norm = None

    def __init__(self, arch: DFlashArch):
        super().__init__()
        self.arch = arch
        a = arch
        self.fc = nn.Linear(a.num_aux * a.target_hidden_size, a.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(a.hidden_size, a.eps)
        self.layers = nn.ModuleList(BlockLayer(a) for _ in range(a.num_layers))
        self.norm = RMSNorm(a.hidden_size, a.eps)
        self.embed: torch.Tensor | None = None  # [vocab, H], the target's
        #: [vocab, H], the target's lm_head; a reduced-vocabulary speculators draft: its own [draft_vocab, H]
        self.target_head: torch.Tensor | None = None
        #: [head rows]: the target id of each logit (the target's whole vocabulary; a reduced vocabulary: i + d2t[i])
        self.register_buffer("hot_ids", torch.arange(0), persistent=False)
        self.markov_head: MarkovHead | None = None  # DSpark (build_dflash_draft adds it: it needs the vocab size)

    @property
    def device(self) -> torch.device:
        return self.norm.weight.device

    def project(self, target_states: torch.Tensor) -> torch.Tensor:
        """fc over the concatenated slot states [..., n*H_t] -> [..., H] (``hidden_norm`` is the forward's)."""
        return self.fc(target_states)

    def context(self, target_states: torch.Tensor, projected: bool = False) -> torch.Tensor:
        """``hidden_norm(fc(...))``: the context every layer attends to [B, S, H]."""
        return self.hidden_norm(target_states if projected else self.project(target_states))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Logit indices -> target token ids (the identity unless the draft has a reduced vocabulary; an empty
        ``hot_ids``, a module built without :func:`build_dflash_draft`, is the target's whole vocabulary)."""
        return self.hot_ids[draft_ids] if self.hot_ids.numel() else draft_ids

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        x = F.embedding(ids, self.embed).to(self.norm.weight.dtype)
        return x * self.arch.embed_scale if self.arch.embed_scale != 1.0 else x

    def blocks(self, ctx: torch.Tensor | None, block_ids: torch.Tensor, anchors: torch.Tensor,
               ctx_valid: torch.Tensor | None = None, last_rows: slice | None = None) -> torch.Tensor:
        """The draft's final-normed hidden for blocks. ``ctx`` [B, S, H] (:meth:`context`; context position j is
        absolute position j; None: no context at all), ``block_ids`` [B, A, bs] (anchor token + mask tokens),
        ``anchors`` [B, A] (each block's first position; it sees context positions < its anchor),
        ``ctx_valid`` [B, S] (False: padding, never seen) -> [B, A, bs, H]. ``last_rows``: return only these
        block positions (the last layer's other rows are not computed: they feed nothing)."""
        a = self.arch
        B, A, bs = block_ids.shape
        dt = self.norm.weight.dtype
        dev = block_ids.device
        x = self.embed_tokens(block_ids)  # [B, A, bs, H]
        pos_blk = anchors[..., None] + torch.arange(bs, device=dev)  # [B, A, bs]
        cos, sin = rope_cos_sin(pos_blk.reshape(B, A * bs), a.head_dim, a.rope_theta, dt, a.rope)  # [B,1,A*bs,d]
        rope_blk = tuple(t[:, 0].view(B, A, bs, 1, a.head_dim) for t in (cos, sin))
        if ctx is None:
            ctx = torch.zeros(B, 0, a.hidden_size, dtype=dt, device=dev)
        S = ctx.shape[1]
        cos, sin = rope_cos_sin(torch.arange(S, device=dev)[None], a.head_dim, a.rope_theta, dt, a.rope)
        rope_ctx = tuple(t[:, 0][:, :, None] for t in (cos, sin))  # [1, S, 1, d]
        visible = torch.arange(S, device=dev)[None, None] < anchors[..., None]  # [B, A, S]
        if ctx_valid is not None:
            visible = visible & ctx_valid[:, None, :]
        ctx = ctx.to(dt)
        for layer in self.layers:
            x = layer(x, ctx, rope_blk, rope_ctx, visible)
        if last_rows is not None:
            x = x[:, :, last_rows]
        return self.norm(x)

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The target's head on the draft's hidden [..., H] -> [..., vocab], without any Markov bias (DSpark's base
        logits)."""
        out = (hidden @ self.target_head.T.to(hidden.dtype)) * self.arch.output_multiplier
        if self.arch.softcap is not None:
            out = torch.tanh(out / self.arch.softcap) * self.arch.softcap
        return out

    def logits(self, hidden: torch.Tensor, prev_ids: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`head_logits`; a DSpark draft adds its Markov bias, for the block's first drafted token only:
        ``prev_ids`` [...] are then the anchors (required)."""
        out = self.head_logits(hidden)
        if self.markov_head is not None:
            if prev_ids is None:
                raise ValueError("a DSpark draft's logits need the previous token (the anchor)")
            out = out + self.markov_head.first_bias(prev_ids.reshape(-1), hidden.reshape(-1, hidden.shape[-1])
                                                    ).view(out.shape)
        return out

    def first_hidden(self, input_ids: torch.Tensor, hidden: torch.Tensor | None, projected: bool = True) -> torch.Tensor:
        """The fingerprint scorer's view, position for position as the EAGLE-3 step 0: at position t of a case,
        the block anchored at t+1 (token ``input_ids[:, t]`` = x[t+1]; context: the states at positions 0..t),
        and the final-normed hidden of its first drafted token (which predicts x[t+2]) [B, T, H]: the engines'
        block (:attr:`DFlashArch.engine_block` tokens) and the row they draft it from
        (:attr:`DFlashArch.first_draft_row`: the anchor's for a DSpark draft sampling from it). ``hidden``
        [B, T, H]: fc's output (``projected``) or the concatenated slot states [B, T, n*H_t]; None: no context
        (the draft fed no target information)."""
        B, T = input_ids.shape
        a = self.arch
        block = torch.full((B, T, a.engine_block), a.mask_token_id, dtype=torch.long, device=input_ids.device)
        block[..., 0] = input_ids
        anchors = torch.arange(1, T + 1, device=input_ids.device).expand(B, T)
        ctx = self.context(hidden.to(self.norm.weight.dtype), projected) if hidden is not None else None
        row = a.first_draft_row
        return self.blocks(ctx, block, anchors, last_rows=slice(row, row + 1))[:, :, 0]

    def forward(self, input_ids: torch.Tensor, hidden: torch.Tensor | None, positions: torch.Tensor | None = None,
                projected: bool = True) -> BlockStep:
        """:meth:`first_hidden` through the head: [B, T, vocab] (``positions`` is implied: the anchors)."""
        return BlockStep(self.logits(self.first_hidden(input_ids, hidden, projected), input_ids))


def build_dflash_draft(arch: DFlashArch, weights: Mapping[str, torch.Tensor], embed: torch.Tensor,
                       head: torch.Tensor, where: str = "draft", dtype=torch.float32) -> DFlashDraft:
    """The draft module with ``weights`` (canonical names) loaded, the target's ``embed`` / ``head`` [vocab, H]; a
    reduced-vocabulary speculators draft's head is its own ``lm_head`` and its logits map through ``d2t``."""
    with torch.device(embed.device):
        model = DFlashDraft(arch)
        if arch.markov:
            model.markov_head = MarkovHead(arch, embed.shape[0])
    legacy = "logit_head."  # early DSpark checkpoints (SpecForge normalize_draft_head_checkpoint_keys)
    weights = {k[len(legacy):] if k.startswith(legacy + "markov_head.") else k: v for k, v in weights.items()}
    own = model.state_dict()
    ignored = SPECULATORS_IGNORED if arch.layout == "speculators" else IGNORED_WEIGHTS
    unknown = sorted(k for k in weights if k not in own and not k.startswith(ignored))
    if unknown:
        raise BadCheckpoint(f"{where}: weight(s) the DFlash / DSpark forward does not know: "
                            f"{', '.join(unknown[:4])}{' ...' if len(unknown) > 4 else ''} ({DSPARK_NOT_RUN})")
    missing = [k for k in own if k not in weights]
    if missing:
        raise BadCheckpoint(f"{where}: missing weight(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    for k, p in own.items():
        if tuple(weights[k].shape) != tuple(p.shape):
            raise BadCheckpoint(f"{where}: weight {k} has shape {tuple(weights[k].shape)}, the config implies "
                                f"{tuple(p.shape)}")
    model.load_state_dict({k: weights[k] for k in own}, strict=True)
    model.to(dtype)
    V = embed.shape[0]
    if not 0 <= arch.mask_token_id < V:
        raise BadCheckpoint(f"{where}: mask_token_id {arch.mask_token_id} is outside the target's vocabulary "
                            f"(0..{V - 1})")
    hot = torch.arange(V, device=embed.device)
    if arch.layout == "speculators":
        head, hot = speculators_head(arch, weights, embed, head, where, dtype)
    model.embed, model.target_head = embed, head
    model.hot_ids = hot.to(embed.device)
    return model.eval()


def load_dflash_draft(spec, target, dtype=torch.float32) -> DFlashDraft:
    """The DFlash draft of ``spec`` with the loaded ``target``'s embedding and lm_head (a state source)."""
    from .eagle3 import read_weights
    from ..source import as_source

    source = as_source(target)
    embed, head = source.embedding(), source.lm_head()  # [vocab, H] each
    arch = dflash_arch(spec, target.info.hidden_size)
    return build_dflash_draft(arch, read_weights(spec.path), embed, head, spec.path, dtype)
