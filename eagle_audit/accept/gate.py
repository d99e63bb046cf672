"""CI gates on acceptance: ``--fail-under`` (the overall accept length) and ``--fail-under-positions``
(the acceptance at each draft position), for ``accept-rate`` and ``check``.

What is gated is what serving gives: the simulated accept length of the **served** wiring, and, where a
server was read (``--server``), the server's own figures too (each must pass). ``per_position[i]`` is
the share of verify steps that accepted draft token i+1 (docs/accept-rate.md), the figure speculators'
release tests threshold (e.g. ``0.4,0.2,0.1``). Torch-free: it reads result JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import BadOption, param, shown


@dataclass(frozen=True)
class Gate:
    """The thresholds; None / () where not set."""

    fail_under: float | None = None
    fail_under_positions: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        v = self.fail_under
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise BadOption(f"{param('fail_under')}: must be a finite number >= 0, got {shown(v)}")
        for p in self.fail_under_positions:
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
                raise BadOption(f"{param('fail_under_positions')}: each threshold must be a number in 0..1, got "
                                f"{shown(p)}")

    def fits(self, num_steps: int) -> None:
        """Refuse (exit 2) more position thresholds than the draft runs steps, before anything runs."""
        if len(self.fail_under_positions) > num_steps:
            raise BadOption(f"{param('fail_under_positions')}: {len(self.fail_under_positions)} thresholds, but the "
                            f"draft runs {num_steps} steps ({param('num_steps')})")

    @property
    def active(self) -> bool:
        return self.fail_under is not None or bool(self.fail_under_positions)

    def to_json(self) -> dict:
        return {"fail_under": self.fail_under, "fail_under_positions": list(self.fail_under_positions)}


def parse_positions(text: str | None) -> tuple[float, ...]:
    """``"0.4,0.2,0.1"`` -> thresholds for draft positions 1, 2, 3 (the CLI's form)."""
    if text is None:
        return ()
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise BadOption(f"{param('fail_under_positions')}: {shown(text)} is not a comma-separated list of numbers "
                        "such as 0.4,0.2,0.1") from None
    if not values:
        raise BadOption(f"{param('fail_under_positions')}: no thresholds given")
    return values


def _figures(accept: Mapping[str, Any]) -> list[tuple[str, float | None, Sequence[float]]]:
    """(what, accept length, per position) of each figure the gate reads from an accept-rate result."""
    al = accept.get("accept_length") or {}
    pp = accept.get("per_position") or {}
    out = [("simulated served accept length", al.get("served"), pp.get("served") or ())]
    server = accept.get("server")
    if isinstance(server, Mapping):
        out.append((f"{server.get('kind') or 'server'} server accept length", server.get("accept_length"),
                    server.get("per_position") or ()))
    return out


def failures(gate: Gate, accept: Mapping[str, Any] | None, unavailable: str | None = None) -> list[str]:
    """One line per threshold not met by ``accept`` (an accept-rate result's JSON); [] when all pass.
    ``accept`` None: the accept lengths were not measured (``unavailable`` says why) and that is a
    failure of every active gate (a gate that cannot read its figure does not pass)."""
    if not gate.active:
        return []
    if accept is None:
        return [f"no accept length to gate: {unavailable or 'the accept-rate stage did not run'}"]
    out = []
    steps = (accept.get("settings") or {}).get("num_steps")
    if steps is not None:
        gate.fits(steps)
    for what, al, per_pos in _figures(accept):
        if gate.fail_under is not None:
            if al is None:
                out.append(f"{what}: not measured (fail_under {gate.fail_under:g})")
            elif al < gate.fail_under:
                out.append(f"{what} {al:.3f} < fail_under {gate.fail_under:g}")
        for i, threshold in enumerate(gate.fail_under_positions):
            got = per_pos[i] if i < len(per_pos) else None
            if got is None:
                out.append(f"{what}: position {i + 1} not measured (threshold {threshold:g})")
            elif got < threshold:
                out.append(f"{what}: position {i + 1} acceptance {got:.3f} < {threshold:g}")
    return out


def reason(lines: Sequence[str]) -> str:
    """The one line the CLI prints for failed gates."""
    return "fail: " + "; ".join(lines)
