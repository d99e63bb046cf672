"""The analysis side of an acceptance run's target states: captured states concatenated in wiring order (the
target's forwards themselves are :mod:`eagle_audit.source.forwards`, asked through :mod:`eagle_audit.source`).
"""

from __future__ import annotations

import torch

from ..states import State


def aux_of(caps: dict[State, torch.Tensor], states: tuple[State, ...]) -> torch.Tensor:
    """Concatenate captured states in wiring order: [..., pos, n*hidden] (one state: passed through)."""
    parts = [caps[s] for s in states]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
