"""The one canonical coordinate for every hidden state eagle-audit captures.

Boundary k of a target with N decoder layers is the full residual stream *entering* layer k:

  boundary 0        the embedding output (= input of layer 0 = HF ``hidden_states[0]``)
  boundary k, 0<k<N the output of layer k-1 (= HF ``hidden_states[k]``)
  boundary N        the output of the last layer, **before** the final norm
                    (HF ``hidden_states[N]`` is *not* this: transformers overwrites it with the
                    post-norm state)
  final norm        the post-final-norm state (= HF ``hidden_states[N]`` / ``last_hidden_state``)

Every pipeline's bare layer ids are converted to this coordinate at the edge, in
``eagle_audit.conventions``; nothing else in the package handles bare ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import AuditError, BadArgument, OutOfRange, param, shown


@dataclass(frozen=True, order=True)
class State:
    """A captured point of the residual stream: ``State(k)`` is boundary k; ``State(N, normed=True)``
    is the post-final-norm state."""

    boundary: int
    normed: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.boundary, bool) or not isinstance(self.boundary, int):
            raise BadArgument(f"{param('boundary')}: expected an int (State(3) is B3), got {shown(self.boundary)}")
        if not isinstance(self.normed, bool):
            raise BadArgument(f"{param('normed')}: expected True or False, got {shown(self.normed)}")
        if self.boundary < 0:
            raise OutOfRange(f"{param('boundary')}: must be an integer >= 0 (B0 is the embedding output), "
                             f"got {self.boundary}")

    def label(self, num_layers: int | None = None) -> str:
        if self.normed:
            return f"B{self.boundary}+norm"
        return f"B{self.boundary}"

    def describe(self, num_layers: int) -> str:
        """Human words for this state in a target of ``num_layers`` layers."""
        if self.normed:
            return "final state after the final norm"
        if self.boundary == 0:
            return "embedding output"
        if self.boundary == num_layers:
            return f"output of the last layer ({num_layers - 1}), before the final norm"
        return f"output of layer {self.boundary - 1}"

    def to_json(self) -> dict:
        return {"boundary": self.boundary, "normed": self.normed, "label": self.label()}


#: how messages name the trained states when given directly (the ``trained_boundaries`` parameter)
TRAINED_BOUNDARIES = param("trained_boundaries")


def labels(states: Iterable[State]) -> str:
    """A wiring as findings and notes write it: ``[B0, B3, B16]``."""
    return "[" + ", ".join(s.label() for s in states) + "]"


def final_normed(num_layers: int) -> State:
    return State(num_layers, normed=True)


def all_states(num_layers: int) -> tuple[State, ...]:
    """Every capturable state of a target: boundaries 0..N and the post-norm final state."""
    return tuple(State(k) for k in range(num_layers + 1)) + (final_normed(num_layers),)


def adjacent(a: State, b: State) -> bool:
    """Next to each other on the residual stream: one boundary apart (one layer's update between them), or the
    last boundary and the post-norm state of the same target (the final norm between them)."""
    if a.normed or b.normed:
        return a.boundary == b.boundary and a.normed != b.normed
    return abs(a.boundary - b.boundary) == 1


def parse_states(text: str, num_layers: int | None, what: str = TRAINED_BOUNDARIES) -> tuple[State, ...]:
    """Parse ``"0,3,31"`` into states. ``N`` stands for the last boundary and ``final`` (or ``N+norm``)
    for the post-norm state; both need ``num_layers``."""
    out = []
    for raw in text.split(","):
        tok = raw.strip().lower().replace(" ", "")
        if not tok:
            continue
        normed = False
        if tok in ("final", "norm", "n+norm", "final-norm"):
            tok, normed = "n", True
        elif tok.endswith("+norm"):
            tok, normed = tok[: -len("+norm")], True
        if tok == "n":
            if num_layers is None:
                raise AuditError(f"{what}: 'N' needs the target's layer count")
            k = num_layers
        else:
            try:
                k = int(tok)
            except ValueError:
                raise AuditError(f"{what}: {raw.strip()!r} is not a boundary (use integers, 'N' or 'final')") from None
        if k < 0 or (num_layers is not None and k > num_layers):
            bound = f"0..{num_layers}" if num_layers is not None else ">= 0"
            raise AuditError(f"{what}: boundary {k} is outside {bound}")
        if normed and num_layers is not None and k != num_layers:
            raise AuditError(f"{what}: only the last boundary ({num_layers}) has a post-norm state")
        out.append(State(k, normed))
    if not out:
        raise AuditError(f"{what}: no boundaries given")
    return tuple(out)


def as_states(values, num_layers: int | None, what: str = TRAINED_BOUNDARIES) -> tuple[State, ...]:
    """States given in Python: :class:`State` objects or boundary ints (the checks of :func:`parse_states`)."""
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, State)):
            raise AuditError(f"{what}: {v!r} is not a State or a boundary int")
        st = v if isinstance(v, State) else State(v) if v >= 0 else None
        if st is None or (num_layers is not None and st.boundary > num_layers):
            bound = f"0..{num_layers}" if num_layers is not None else ">= 0"
            raise AuditError(f"{what}: boundary {v} is outside {bound}")
        if st.normed and num_layers is not None and st.boundary != num_layers:
            raise AuditError(f"{what}: only the last boundary ({num_layers}) has a post-norm state")
        out.append(st)
    if not out:
        raise AuditError(f"{what}: no boundaries given")
    return tuple(out)
