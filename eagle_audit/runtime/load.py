"""The one place a draft's network is chosen by its kind: an EAGLE-3 chain draft (:mod:`.eagle3`) or a block
draft (:mod:`.block`, DFlash / DSpark), loaded with the target's embedding and head."""

from __future__ import annotations

import torch


def load_draft(spec, target, flags, dtype=torch.float32):
    """The draft network of ``spec`` for ``target`` (a loaded target or state source); ``flags`` (the draft
    semantics an engine or trainer runs) apply to EAGLE-3 drafts; a block draft has one forward."""
    if spec.draft_kind.block:
        from .block import load_dflash_draft

        return load_dflash_draft(spec, target, dtype)
    from .eagle3 import load_draft_model

    return load_draft_model(spec, target, flags, dtype)
