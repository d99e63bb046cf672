"""Trainer ``fingerprint`` (:data:`eagle_audit.resolution.MEASURED`): an audit's trained side measured on the
draft's weights (:func:`resolve_measured`), for ``layers`` and ``accept-rate``. ``inputs.py`` imports this module
inside ``prepare`` (an upward import, docs/layout.md); it must not import ``inputs.py`` back (no cycle), so it does
not go through :mod:`eagle_audit.fingerprint.options`."""

from __future__ import annotations

from typing import Callable, Sequence

from ..conventions import Convention, Wiring
from ..draft.read import DraftSpec
from ..errors import AuditError
from ..resolution import MEASURED, Resolution, given_side, resolve_trained, side_of
from .claims import settled
from .corpus import prepare_corpus
from .infer import infer_wiring, starting_points


def resolve_measured(target, spec: DraftSpec, engine: Convention, notes: list[str],
                     prompt_ids: Sequence[Sequence[int]], max_new_tokens: int = 64,
                     status: Callable[[str], None] | None = None) -> Resolution:
    """Both sides of an audit with the trained side measured on the draft's weights (trainer
    ``fingerprint``): the wiring the fingerprint infers (for a slot not separated, its best state, said in
    ``notes``); the draft flags as the config states them (or as the layout's trainer runs them)."""
    info = target.info
    declared, _ = resolve_trained(spec, info, [])
    served = side_of(engine, spec.config, info.architecture, info.num_layers)
    corpus = prepare_corpus(target, prompt_ids, max_new_tokens, status)
    inf = infer_wiring(target, spec, corpus, starting_points(spec, info, declared.wiring, engine), declared.flags,
                       status=status)
    if inf.states is None:
        raise AuditError(f"trainer {MEASURED}: no wiring can be read off {spec.path}'s weights for {info.name}: "
                         f"{inf.reason}", hint="eagle-audit fingerprint shows the evidence (REPRESENTATION_MISMATCH)")
    amb = [f"slot {sl.index}: {sl.text()}" for sl in inf.slots if sl.ambiguous]
    states = settled(inf, declared.states, served.states)
    notes.append(f"trained states measured on the draft's weights (fingerprint, {inf.scored_tokens} tokens): "
                 f"{[s.label() for s in states]}, confidence {inf.confidence}"
                 + (f"; not separated: {'; '.join(amb)} (the declared state where the weights admit it, else the "
                    "best)" if amb else ""))
    wiring = Wiring(MEASURED, "trainer", "-", "measured", None, "boundaries", "draft weights",
                    tuple(s.boundary for s in states), states)
    return Resolution(given_side(wiring, spec, None), served, info.architecture, info.num_layers)
