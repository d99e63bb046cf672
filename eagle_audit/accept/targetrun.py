"""The analysis side of an acceptance run's target states: captured states concatenated in wiring order,
and one teacher-forced pass asked of the target's state source (:mod:`eagle_audit.source`; the target's
forwards themselves are :mod:`eagle_audit.source.forwards`).
"""

from __future__ import annotations

from typing import Iterable

import torch

from ..source import as_source
from ..states import State


def aux_of(caps: dict[State, torch.Tensor], states: tuple[State, ...]) -> torch.Tensor:
    """Concatenate captured states in wiring order: [..., pos, n*hidden] (one state: passed through)."""
    parts = [caps[s] for s in states]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


@torch.inference_mode()
def teacher_states(target, ids: list[int], states: Iterable[State]) -> dict[State, torch.Tensor]:
    """One teacher-forced pass over ``ids``: {state: [pos, hidden]} (float32, on the target's device)."""
    source = as_source(target)
    dev = source.input_device  # a target split over devices (device_map) leaves states where their layer ran
    return {s: t.to(dev, torch.float32) for s, t in source.teacher_forced([ids], tuple(states))[0].states.items()}
