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

The draft's shapes are :mod:`.arch`, its layers :mod:`.modules`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..draft.read import DraftSpec, weight_files
from ..errors import BadCheckpoint
from ..resolution import DraftFlags
from .arch import DraftArch, arch_from_spec, canonical_weight, flags_from_config  # noqa: F401 (re-exported: the draft's one door)
from .modules import KV, DraftLayer, RMSNorm, rope_cos_sin


@dataclass
class DraftOutput:
    logits: torch.Tensor  # [batch, pos, draft_vocab]
    hidden: torch.Tensor  # [batch, pos, H]: the recurrent hidden for the next draft step
    kv: list[KV]  # per layer, the keys/values of this call only


class Eagle3Draft(nn.Module):
    """The draft network. ``embed`` (the target's embedding weight) and, for a null draft vocab, the
    target's head are set by :func:`load_draft_model`; they are not parameters of the draft."""

    family = "eagle3"  # the draft family it runs (eagle_audit/runtime/load.py; load_draft sets the kind's)

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
    for f in weight_files(Path(directory)):
        if f.suffix == ".safetensors":
            from safetensors.torch import load_file

            sd = load_file(str(f))
        else:
            sd = torch.load(f, map_location="cpu", weights_only=True)
        out.update({canonical_weight(k): v for k, v in sd.items()})
    return out


def build_draft(arch: DraftArch, flags: DraftFlags, weights: Mapping[str, torch.Tensor], target_embed: torch.Tensor,
                target_head: torch.Tensor | None, where: str = "draft", dtype=torch.float32,
                device: torch.device | str | None = None) -> Eagle3Draft:
    """The draft module with ``weights`` loaded. ``device``: where it is built (every parameter is created and
    given its throw-away initial value there, then overwritten by the weights): on a GPU that random
    initialisation is free, on the CPU it cost 4.2 s for an 8B-sized draft built twice (docs/performance.md,
    "`accept-rate` against its floor")."""
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
