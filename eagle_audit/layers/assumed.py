"""Checks on what an audit assumes rather than reads: a draft that declares no layer ids (``IDS_ASSUMED``).

Where the config names no ids, the trained side is the trainer's default and the served side the engine's
default: a match then says only that two defaults agree. nvidia/Llama-3.3-70B-Instruct-Eagle3 ships no ids; vLLM
falls back to (2, 40, 77) and the report (vLLM #50170) measured accept length 1.036 against 2.77 with the ids the
draft was trained on.
"""

from __future__ import annotations

from typing import Iterable

from ..conventions import EAGLE_PLACES, Wiring, place_key, read_ids
from ..errors import param
from ..resolution import MEASURED, SideWiring
from ..states import labels
from .checks import Context, check
from .result import Finding

#: the sources of a trained side that the user (or the weights) pinned, not a default
PINNED = {"override": f"pinned by {param('trained_ids')}", "boundaries": "pinned (given directly, recorded by a "
          f"canary, or measured with {param('trainer', MEASURED)})"}


def _places(ctx: Context) -> tuple[str, ...]:
    conv = ctx.served.convention if ctx.served is not None else None
    return conv.kind_places() if conv is not None else EAGLE_PLACES


def _side(side: SideWiring, who: str) -> str:
    w: Wiring = side.wiring
    if w.ids_source in PINNED:
        return f"Trained: {PINNED[w.ids_source]}: {labels(w.states)}"
    return f"{who}: {side.title}'s default ({w.case}) -> {labels(w.states)}"


@check
def ids_assumed(ctx: Context) -> Iterable[Finding]:
    """The draft config declares no ids in any place its kind uses, and at least one side took a default."""
    if ctx.served is None or ctx.served.wiring.unsupported is not None:
        return
    t, s = ctx.trained.wiring, ctx.served.wiring
    if "use_aux_hidden_state" in (t.ids_source, s.ids_source):  # no aux states: there are no ids to declare
        return
    places = _places(ctx)
    if any(read_ids(ctx.draft.config, p) is not None for p in places):
        return
    if t.ids_source != "default" and s.ids_source != "default":
        return
    both = t.ids_source == "default" and s.ids_source == "default"
    engine_place = next(iter(ctx.served.id_places), None)
    where = f" ({place_key(engine_place)})" if engine_place else ""
    yield Finding(
        "IDS_ASSUMED", "warning", None,
        f"The draft config declares no layer ids (none of {', '.join(place_key(p) for p in places)}): "
        + ("both sides are assumed defaults. " if both else "the engine's side is its default. ")
        + f"{_side(ctx.trained, 'Trained')}; served: {ctx.eng}'s default ({s.case}) -> {labels(s.states)}.",
        "A match between two defaults says only that the defaults agree, not that the draft was trained on them: "
        "nvidia/Llama-3.3-70B-Instruct-Eagle3 declares no ids; vLLM fell back to its default (2, 40, 77) and measured "
        "accept length 1.036, against 2.77 with the ids it was trained on (vLLM #50170).",
        f"Pin the trained wiring: {param('trained_ids')} (the ids passed to the trainer, in its own convention and "
        f"order), {param('trained_boundaries')} (the states), or {param('trainer', MEASURED)} (measured on the "
        f"draft's weights); then write the trained ids into the config where {ctx.eng} reads them{where}.")
