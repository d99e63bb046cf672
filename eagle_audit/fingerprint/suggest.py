"""What ``layers`` and ``accept-rate`` need to know about the fingerprint without loading it (torch-free):
the trainer name that measures the trained wiring, and when ``layers`` suggests it."""

from __future__ import annotations

from typing import Sequence

from ..errors import param
from ..resolution import Resolution

#: the trainer name with which ``layers`` and ``accept-rate`` measure the trained wiring instead of assuming it
MEASURED = "fingerprint"


def suggestion(trainer_given: bool, resolution: Resolution, aux: int, cosines: Sequence[float | None]) -> str | None:
    """When ``layers`` should point at the fingerprint: the trained side is a convention assumed from the
    layout, or it does not fit fc, or a slot's trained and served states are far apart (cosine < 0.9) while
    the trained side rests only on a convention."""
    trained = resolution.trained
    if trained.wiring.ids_source == "boundaries":  # given directly, recorded by a canary, or measured
        return None
    why = None
    if len(trained.states) != aux:
        why = f"the trained wiring {trained.wiring.convention} assumes has {len(trained.states)} states, fc takes {aux}"
    elif not trainer_given:
        why = "the trainer was not given, so the trained wiring is assumed from the draft's layout"
    elif any(c is not None and c < 0.9 for c in cosines):
        why = "a slot's trained and served states are far apart, and the trained side rests on a convention alone"
    return f"{why}; measure it on the draft's weights: {param('trainer', MEASURED)} (or eagle-audit fingerprint)" if why else None
