"""One wiring's acceptance, whatever the draft drafts: an EAGLE-3 chain or tree (:mod:`.accept`) or a DFlash block
(:mod:`.block`). The one place the simulation is chosen by the draft network's kind."""

from __future__ import annotations

from typing import Sequence

import torch

from ..states import State
from .accept import AcceptStats, Case, simulate as simulate_chain
from .tree import KV_BY_SLOT


def simulate(draft, cases: Sequence[Case], caps: Sequence[dict[State, torch.Tensor]], states: tuple[State, ...],
             steps: int, topk: int = 1, num_draft_tokens: int | None = None,
             tree_attention: str = KV_BY_SLOT) -> AcceptStats:
    """:func:`eagle_audit.simulate.accept.simulate` for an EAGLE-3 draft; for a block draft
    (:class:`~eagle_audit.runtime.block.DFlashDraft`) :func:`eagle_audit.simulate.block.simulate_block`, its
    block's drafts a round (``steps``: the caller's settings carry them, :func:`~.block.block_steps`)."""
    if hasattr(draft, "blocks"):
        from .block import simulate_block

        return simulate_block(draft, cases, caps, states, steps)
    return simulate_chain(draft, cases, caps, states, steps, topk, num_draft_tokens, tree_attention)
