"""DFlash drafts in the speculators 0.9.0 layout (``speculators_model_type: "dflash"``,
``speculators/models/dflash/core.py`` ``DFlashDraftModel``; :func:`speculators_arch`, :func:`speculators_head`): the
network of :mod:`eagle_audit.runtime.block` under the same weight names (``layers.*``, ``fc``, ``hidden_norm``,
``norm``: its converter copies z-lab's as they are, ``convert/dflash/converter.py:6-7, 220-222``), read from other
places:

* sizes from ``transformer_layer_config``, its absent keys the defaults of its ``model_type``'s transformers config
  class (Qwen3 without one), as speculators builds it (``models/dflash/config.py:614-624``); ``block_size``
  (default 8) and ``mask_token_id`` top-level keys (``config.py:569-589``; ``core.py:406-414`` fills the block);
* the embedding is the verifier's (the target's): ``load_verifier_weights`` overwrites ``embed_tokens`` on every
  load and never saves it (``core.py:157, 171-176``; ``model.py:165-170``), so a checkpoint's ``embed_tokens`` is
  ignored as speculators ignores it; no embedding scale (``core.py:415``, a plain ``nn.Embedding``);
* the head is ``lm_head`` on ``norm``'s output, nothing after it (``core.py:468-469``: no multiplier, no
  softcapping). A full-vocabulary draft (``draft_vocab_size`` = ``transformer_layer_config.vocab_size``,
  ``model.py:45-48``) uses the verifier's head (``core.py:174-175``, ``overwrite_lm_head``; not saved,
  ``core.py:158-160``); a reduced one its own ``lm_head`` [draft_vocab, H] from the checkpoint (or, absent, the
  verifier's rows marked in ``t2d``: ``model.py:172-185``), and a draft id i is target id ``i + d2t[i]``
  (``train/vocab_mapping.py:98-101``), as for an EAGLE-3 draft (:attr:`DFlashDraft.hot_ids`,
  :meth:`DFlashDraft.to_target_ids`): its logits are over the draft vocabulary;
* attention as z-lab's: the block bidirectional in full-attention layers (``models/dflash/attention.py:42-43``,
  ``model_definitions.py:166``), context keys at positions < the anchor (``attention.py:61-83``), per-head
  q/k norms on context and block keys alike (``model_definitions.py:212-230``);
* ``verifier_norm`` / ``verifier_lm_head`` build the training labels only (``core.py:436-453``): not part of the
  draft's logits, ignored;
* ``aux_hidden_state_layer_ids`` are IN-k (speculators' layer id is ``hidden_states[id]``; the converter adds one to
  z-lab's ids and drops the one whose state is the verifier's last: ``converter.py:117-126``); fc's slot count is
  read off ``fc.weight`` as for every DFlash draft, the ids by the conventions (``speculators-dflash``).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..errors import BadCheckpoint
from .arch import rope_params

#: weights of a speculators-layout DFlash checkpoint outside the draft network: the verifier's embedding and head
#: and the norm of its training labels (never in the draft's logits: speculators/models/dflash/core.py:436-453,
#: 468-469); ``lm_head`` / ``d2t`` / ``t2d`` are read by :func:`speculators_head` for a reduced vocabulary
SPECULATORS_IGNORED = ("embed_tokens.", "verifier_lm_head.", "verifier_norm.", "lm_head.", "d2t", "t2d")


def layer_config(cfg: Mapping[str, Any], where: str) -> dict:
    """``transformer_layer_config`` with the defaults speculators reads it with: the transformers config class of
    its ``model_type`` (Qwen3 without one) built from it (speculators 0.9.0 ``models/dflash/config.py:614-624``;
    saved with ``to_diff_dict``, ``config.py:609-612``, so a key equal to the class default may be absent)."""
    tl = cfg.get("transformer_layer_config")
    if not isinstance(tl, Mapping):
        raise BadCheckpoint(f"{where}: a speculators DFlash config needs transformer_layer_config (a JSON object): "
                            "the draft layers' sizes are there")
    try:
        import transformers

        cls = (transformers.AutoConfig.for_model(tl["model_type"]).__class__ if "model_type" in tl
               else transformers.Qwen3Config)
        return cls(**tl).to_dict()
    except Exception as e:  # an unknown model_type, a value the class refuses
        raise BadCheckpoint(f"{where}: transformer_layer_config cannot be read as speculators reads it "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})") from None


def speculators_arch(spec, target_hidden: int) -> dict[str, Any]:
    """The :class:`~eagle_audit.runtime.block.DFlashArch` fields of a speculators 0.9.0 DFlash draft (this module's
    docstring); its kind (``speculators_model_type: "dflash"``, not DSpark) is checked by the caller."""
    where, cfg = spec.path, spec.config
    if cfg.get("sample_from_anchor"):
        # speculators models/dflash/core.py:138-144, 438-442: row 0 (the anchor's) trained to predict the next token
        raise BadCheckpoint(f"{where}: sample_from_anchor: true: a DFlash draft drafted from the anchor's row is not "
                            "run (the DFlash forward here drafts from the mask rows, as the engines' DFlash block)")
    tl = layer_config(cfg, where)
    if "sliding_attention" in (tl.get("layer_types") or ()):
        raise BadCheckpoint(f"{where}: transformer_layer_config.layer_types has sliding_attention layers: the DFlash "
                            "forward here runs full-attention layers only")
    act = tl.get("hidden_act") or "silu"
    if act != "silu":  # Qwen3MLP's ACT2FN[hidden_act] (model_definitions.py:263); DraftMLP is SiLU-gated
        raise BadCheckpoint(f"{where}: transformer_layer_config.hidden_act {act!r}: the draft MLP here is SiLU-gated")
    mask = cfg.get("mask_token_id")  # top-level (config.py:586-589; core.py:309-317 needs it)
    if not isinstance(mask, int) or isinstance(mask, bool):
        raise BadCheckpoint(f"{where}: no mask_token_id (a top-level key in the speculators layout): the block's mask "
                            "token is needed to run the draft")
    H, heads = int(tl.get("hidden_size") or spec.hidden_size), int(tl.get("num_attention_heads") or 0)
    if not heads or not tl.get("intermediate_size"):
        raise BadCheckpoint(f"{where}: transformer_layer_config needs num_attention_heads and intermediate_size")
    if target_hidden <= 0 or spec.fc_in % target_hidden:
        raise BadCheckpoint(f"{where}: fc.weight takes {spec.fc_in} inputs, not a multiple of the target's hidden "
                            f"size {target_hidden}")
    if H != target_hidden:  # fc is len(ids) x hidden_size wide (core.py:122-126): the draft's width is the target's
        raise BadCheckpoint(f"{where}: draft hidden size {H} differs from the target's {target_hidden}: a DFlash "
                            "draft embeds with the target's embedding")
    verifier_vocab = int(tl.get("vocab_size") or 0)
    dvs = cfg.get("draft_vocab_size", 32000)  # config.py:564-567: default 32000 (always written: a pydantic field)
    reduced = isinstance(dvs, int) and not isinstance(dvs, bool) and dvs > 0 and dvs != verifier_vocab  # model.py:48
    theta, rope, notes = rope_params(tl, ("linear", "llama3", "yarn"))
    head = tl.get("head_dim") or H // heads  # model_definitions.py:156-160
    return dict(
        hidden_size=H, target_hidden_size=target_hidden, num_aux=spec.fc_in // target_hidden,
        num_layers=int(tl.get("num_hidden_layers") or spec.num_layers), num_heads=heads,
        num_kv_heads=int(tl.get("num_key_value_heads") or heads), head_dim=int(head),
        intermediate_size=int(tl["intermediate_size"]), eps=float(tl.get("rms_norm_eps") or 1e-6),
        rope_theta=theta, block_size=int(cfg.get("block_size") or 8),  # config.py:569-574: default 8
        mask_token_id=mask, attention_bias=bool(tl.get("attention_bias", False)),
        causal=False,  # attention.py:42-43: full-attention layers always see their block bidirectionally
        rope=rope, notes=tuple(notes), layout="speculators", draft_vocab_size=int(dvs) if reduced else None)


def speculators_head(arch, weights: Mapping[str, torch.Tensor], embed: torch.Tensor,
                      head: torch.Tensor, where: str, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A speculators DFlash draft's head [rows, H] and the target id of each row (module docstring)."""
    V, H = embed.shape
    if arch.draft_vocab_size is None:  # full vocabulary: the verifier's lm_head (core.py:171-176); d2t unused
        return head, torch.arange(V)  # (model.py:97-102: full-vocabulary mappings are identity no-ops)
    Vd = arch.draft_vocab_size
    d2t = weights.get("d2t")
    if d2t is None or tuple(d2t.shape) != (Vd,):
        raise BadCheckpoint(f"{where}: draft_vocab_size {Vd} differs from the verifier's vocabulary and the checkpoint "
                            f"has no d2t of {Vd} entries: its drafts cannot be mapped to target tokens")
    hot = torch.arange(Vd) + d2t.long().cpu()  # target id = draft id + d2t[draft id] (train/vocab_mapping.py:98-101)
    if int(hot.min()) < 0 or int(hot.max()) >= V:
        raise BadCheckpoint(f"{where}: d2t maps draft ids to target ids outside the target's vocabulary (0..{V - 1})")
    own = weights.get("lm_head.weight")
    if own is None:  # model.py:172-185: the verifier's head rows marked in t2d
        t2d = weights.get("t2d")
        if t2d is None or t2d.shape[0] != V or int(t2d.bool().sum()) != Vd:
            raise BadCheckpoint(f"{where}: a reduced-vocabulary draft without lm_head.weight needs a t2d of {V} "
                                f"entries marking {Vd} (speculators fills its head from the verifier's rows)")
        own = head[t2d.bool().to(head.device)]
    if tuple(own.shape) != (Vd, H):
        raise BadCheckpoint(f"{where}: lm_head.weight has shape {tuple(own.shape)}, the config implies {(Vd, H)}")
    return own.to(embed.device, dtype), hot
