"""The simulate floor's entry per draft family (:class:`eagle_audit.kinds.FamilyRegistry` ``SIMULATIONS``): how
one wiring's acceptance is simulated. ``eagle3``: a chain or tree (:mod:`.accept`, :mod:`.tree`), as many drafts a
verify as the settings ask; ``block``: DFlash / DSpark block rounds (:mod:`.block`), the drafts a verify fixed by
the draft's block. :func:`simulate` is the one dispatch, by the draft network's family
(``eagle_audit.runtime.load.load_draft`` tags it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..kinds import FamilyRegistry
from ..states import State
from .accept import AcceptStats, Case, simulate as simulate_chain
from .tree import KV_BY_SLOT


@dataclass(frozen=True)
class Simulation:
    #: (draft, cases, caps, states, steps, topk, num_draft_tokens, tree_attention) -> AcceptStats
    run: Callable[..., AcceptStats]
    #: draft -> the drafts a verify its rounds run whatever the settings ask (a block: its mask positions); None:
    #: the settings' ``num_steps``
    steps: Callable[[object], int] | None = None
    #: draft -> one line on the rounds it runs (for a run's notes), where ``steps`` fixes them
    note: Callable[[object], str] | None = None
    #: the settings' mode its rounds are reported in where ``steps`` fixes them ("block")
    mode: str | None = None


def _block(draft, cases, caps, states, steps, topk=1, num_draft_tokens=None, tree_attention=KV_BY_SLOT):
    from .block import simulate_block

    return simulate_block(draft, cases, caps, states, steps)


def _block_steps(draft) -> int:
    from .block import block_steps

    return block_steps(draft)


def _block_note(draft) -> str:
    from .block import layout_note

    return layout_note(draft)


SIMULATIONS = FamilyRegistry("simulate", "simulation")
SIMULATIONS.register("eagle3", Simulation(simulate_chain))
SIMULATIONS.register("block", Simulation(_block, _block_steps, _block_note, "block"))


def simulation(draft) -> Simulation:
    """The simulate entry of a draft network's family."""
    return SIMULATIONS.of(draft.family)


def steps_of(draft, asked: int) -> int:
    """The drafts a verify ``draft`` runs when ``asked`` for that many."""
    fixed = simulation(draft).steps
    return fixed(draft) if fixed is not None else asked


def simulate(draft, cases: Sequence[Case], caps: Sequence[dict[State, torch.Tensor]], states: tuple[State, ...],
             steps: int, topk: int = 1, num_draft_tokens: int | None = None,
             tree_attention: str = KV_BY_SLOT) -> AcceptStats:
    """One wiring's accept length with its family's simulation: for an EAGLE-3 draft
    :func:`eagle_audit.simulate.accept.simulate`; for a block draft :func:`eagle_audit.simulate.block.simulate_block`,
    its block's drafts a round (``steps``: the caller's settings carry them, :func:`steps_of`)."""
    return simulation(draft).run(draft, cases, caps, states, steps, topk, num_draft_tokens, tree_attention)
