"""The one canonical coordinate for every hidden state eagle-audit captures.

Boundary k of a target with N decoder layers is the full residual stream *entering* layer k:

  boundary 0        the embedding output (= input of layer 0 = HF ``hidden_states[0]``)
  boundary k, 0<k<N the output of layer k-1 (= HF ``hidden_states[k]``)
  boundary N        the output of the last layer, **before** the final norm
                    (HF ``hidden_states[N]`` is *not* this: transformers overwrites it with the
                    post-norm state)
  final norm        the post-final-norm state (= HF ``hidden_states[N]`` / ``last_hidden_state``)

A hyper-connection (mHC) target (DeepSeek-V4, HY-V4: ``hc_mult`` streams, HF ``hidden_states[k]`` is
[batch, tokens, streams, hidden]) has several views of boundary k, named by ``State.stream``:

  ``""``   (``Bk``)      the mean over the streams entering layer k: what vLLM 0.34.0 and SGLang 0.5.23 feed a
                        draft (on a single-stream target: the residual stream itself; ``k.mean`` parses to it)
  ``"s<i>"`` (``Bk.si``) stream i entering layer k
  ``"mix"`` (``Bk.mix``) the mixed input of layer k: its attention hyper-connection's pre-weighted collapse of
                        the streams, before the layer's input norm (k < N)
  ``BN+norm``           the final norm of the hyper-head's collapse (HF ``last_hidden_state``), as for every target

Every pipeline's bare layer ids are converted to this coordinate at the edge, in
``eagle_audit.conventions``; nothing else in the package handles bare ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import AuditError, BadArgument, OutOfRange, param, shown


#: the view of a hyper-connection boundary: the mean over the streams (""), the mixed input of the layer ("mix"),
#: or one stream ("s0", "s1", ...); module docstring
MEAN, MIX = "", "mix"


def stream_index(stream: str) -> int | None:
    """i for a one-stream view ``"s<i>"``, else None."""
    if stream[:1] == "s" and stream[1:].isdigit() and str(int(stream[1:])) == stream[1:]:
        return int(stream[1:])
    return None


@dataclass(frozen=True, order=True)
class State:
    """A captured point of the residual stream: ``State(k)`` is boundary k; ``State(N, normed=True)``
    is the post-final-norm state; ``State(k, stream="s0")`` / ``"mix"`` a view of a hyper-connection boundary
    (module docstring)."""

    boundary: int
    normed: bool = False
    stream: str = MEAN

    def __post_init__(self) -> None:
        if isinstance(self.boundary, bool) or not isinstance(self.boundary, int):
            raise BadArgument(f"{param('boundary')}: expected an int (State(3) is B3), got {shown(self.boundary)}")
        if not isinstance(self.normed, bool):
            raise BadArgument(f"{param('normed')}: expected True or False, got {shown(self.normed)}")
        if self.boundary < 0:
            raise OutOfRange(f"{param('boundary')}: must be an integer >= 0 (B0 is the embedding output), "
                             f"got {self.boundary}")
        if not isinstance(self.stream, str) or not (self.stream in (MEAN, MIX) or stream_index(self.stream) is not None):
            raise BadArgument(f"{param('stream')}: expected '' (the mean), 'mix' or 's<i>', got {shown(self.stream)}")
        if self.normed and self.stream:
            raise BadArgument(f"{param('stream')}: the post-norm state has one stream, got {shown(self.stream)}")

    def label(self, num_layers: int | None = None) -> str:
        if self.normed:
            return f"B{self.boundary}+norm"
        return f"B{self.boundary}.{self.stream}" if self.stream else f"B{self.boundary}"

    def describe(self, num_layers: int, streams: int = 1) -> str:
        """Human words for this state in a target of ``num_layers`` layers and ``streams`` hyper-connection
        streams (1: a plain residual stream)."""
        if self.normed:
            return "final state after the final norm" + (" (of the hyper-head's collapse)" if streams > 1 else "")
        if self.boundary == 0:
            where = "embedding output"
        elif self.boundary == num_layers:
            where = f"output of the last layer ({num_layers - 1}), before the final norm"
        else:
            where = f"output of layer {self.boundary - 1}"
        if self.stream == MIX:
            return f"mixed input of layer {self.boundary} (its hyper-connection's collapse of the streams)"
        if self.stream:
            return f"stream {stream_index(self.stream)} of the {where}"
        return f"mean of the {streams} hyper-connection streams of the {where}" if streams > 1 else where

    def to_json(self) -> dict:
        out = {"boundary": self.boundary, "normed": self.normed, "label": self.label()}
        if self.stream:
            out["stream"] = self.stream
        return out


#: how messages name the trained states when given directly (the ``trained_boundaries`` parameter)
TRAINED_BOUNDARIES = param("trained_boundaries")


def labels(states: Iterable[State]) -> str:
    """A wiring as findings and notes write it: ``[B0, B3, B16]``."""
    return "[" + ", ".join(s.label() for s in states) + "]"


def final_normed(num_layers: int) -> State:
    return State(num_layers, normed=True)


def all_states(num_layers: int) -> tuple[State, ...]:
    """Every capturable state of a target: boundaries 0..N and the post-norm final state (on a hyper-connection
    target, the boundaries' means: :func:`stream_states` names the other views)."""
    return tuple(State(k) for k in range(num_layers + 1)) + (final_normed(num_layers),)


def forward_order(state: State) -> tuple:
    """Sort key in the order a forward computes the states: Bk and its streams (layer k-1's output), then Bk.mix
    (inside layer k), then B(k+1); the post-norm state last."""
    return state.boundary, state.normed, state.stream == MIX, state.stream


def stream_states(num_layers: int, streams: int) -> tuple[State, ...]:
    """The views of a hyper-connection target besides :func:`all_states`: each stream of boundaries 0..N and the
    mixed input of layers 0..N-1, in forward order (none on a single-stream target)."""
    if streams <= 1:
        return ()
    return tuple(sorted([State(k, stream=f"s{i}") for k in range(num_layers + 1) for i in range(streams)]
                        + [State(k, stream=MIX) for k in range(num_layers)], key=forward_order))


def adjacent(a: State, b: State) -> bool:
    """Next to each other on the residual stream: one boundary apart (one layer's update between them), or the
    last boundary and the post-norm state of the same target (the final norm between them)."""
    if a.normed or b.normed:
        return a.boundary == b.boundary and a.normed != b.normed and not (a.stream or b.stream)
    return abs(a.boundary - b.boundary) == 1 and a.stream == b.stream


def parse_states(text: str, num_layers: int | None, what: str = TRAINED_BOUNDARIES) -> tuple[State, ...]:
    """Parse ``"0,3,31"`` into states. ``N`` stands for the last boundary and ``final`` (or ``N+norm``)
    for the post-norm state; both need ``num_layers``. A hyper-connection view follows a dot: ``3.s0`` (stream 0),
    ``3.mix`` (the mixed input of layer 3), ``3.mean`` (= ``3``)."""
    out = []
    for raw in text.split(","):
        tok = raw.strip().lower().replace(" ", "")
        if not tok:
            continue
        if tok.startswith("b") and tok[1:2].isdigit():
            tok = tok[1:]  # B3 as labels print it
        tok, _, stream = tok.partition(".")
        stream = MEAN if stream == "mean" else stream
        if stream not in (MEAN, MIX) and stream_index(stream) is None:
            raise AuditError(f"{what}: {raw.strip()!r}: the view after the dot is 'mean', 'mix' or 's<i>' (a stream)")
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
        if normed and stream:
            raise AuditError(f"{what}: {raw.strip()!r}: the post-norm state has no stream view")
        if stream == MIX and num_layers is not None and k >= num_layers:
            raise AuditError(f"{what}: {raw.strip()!r}: layer {k} does not exist (the mixed input needs k < {num_layers})")
        out.append(State(k, normed, stream))
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
