"""What the weights say, before any comparison (:class:`Inference`), and whether they agree with a claimed
wiring (:meth:`Inference.verdict`: per slot and as a whole wiring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..states import State
from .intervals import Interval
from .result import Agreement, SlotInference
from .search import separated


@dataclass(frozen=True)
class Inference:
    """What the weights say, before any comparison."""

    best: tuple[State, ...]
    slots: tuple[SlotInference, ...]
    confidence: str  # "high", "ambiguous", "none"
    top1: float | None  # None: nothing scored (see reason)
    logprob: float | None
    baseline_top1: float | None
    baseline_logprob: float | None
    scored_tokens: int
    coverage: float
    agreement: Agreement
    search: dict
    reason: str  # why "none", else ""
    joint: Mapping[tuple[State, ...], Interval] = field(default_factory=dict)  # best - wiring, whole wirings scored
    joint_top1: Mapping[tuple[State, ...], Interval] = field(default_factory=dict)  # best - wiring, top-1 agreement

    @property
    def states(self) -> tuple[State, ...] | None:
        return None if self.confidence == "none" else self.best

    def consistent(self, states: Sequence[State] | None) -> bool:
        """``states`` is one of the wirings the weights cannot tell from the best (:meth:`verdict` is True)."""
        return self.verdict(states)[0] is True

    def verdict(self, states: Sequence[State] | None) -> tuple[bool | None, str]:
        """Whether the weights agree with the claimed wiring ``states``, and why.

        True: every slot the weights determine admits it, and the whole wiring scored against the best is
        not separated from it. False: a determined slot excludes it *and* the whole wiring is separated
        (below the best). None otherwise: it differs from the best only in slots the weights do not
        determine, or the two tests disagree, or the wiring was not scored as a whole and differs from the
        best in more than one slot. An undetermined slot therefore never turns a wiring the scores reject
        into agreement, and never makes one differ on its own; nor does a claimed state that was not searched."""
        if states is None or self.confidence == "none" or len(states) != len(self.slots):
            return None, ""
        states = tuple(states)
        # a state the search never had (a server without it: B0 on the +1 rule, BN+norm) is neither admitted nor
        # excluded: a correct claim of it must not come out as differing
        unsearched = [f"slot {sl.index} {s.label()}" + (f" (admitted beside {sl.text()})" if s in sl.unsearched else "")
                      for s, sl in zip(states, self.slots) if s not in self.agreement.states]
        if unsearched:
            return None, f"not searched (the states' source does not give it): {', '.join(unsearched)}"
        excluded = [sl.index for s, sl in zip(states, self.slots) if not sl.undetermined and s not in sl.candidates]
        iv = self.joint.get(states)
        if iv is None:
            if sum(s != b for s, b in zip(states, self.best)) <= 1 and not any(
                    sl.undetermined and s != sl.best for s, sl in zip(states, self.slots)):
                return (not excluded), ""  # one slot off the best: the per-slot test is the test of the wiring
            return None, "not scored as a whole wiring"
        joint = f"whole wiring {-iv.mean:+.3f} [{-iv.high:+.3f}, {-iv.low:+.3f}] mean log-prob against the best"
        t1 = self.joint_top1.get(states)
        rejected = separated(iv, t1)  # as a slot's states (search.judge)
        if iv.low > 0 and not rejected:
            joint += (f", but within the tolerances of equivalence (top-1 {-t1.mean:+.3f} [{-t1.high:+.3f}, "
                      f"{-t1.low:+.3f}]; search.equivalent)")
        if not rejected and not excluded:
            return True, ""
        if rejected and excluded:
            return False, f"slot {', '.join(map(str, excluded))} excluded; {joint}"
        if rejected:
            return None, f"{joint}, but it differs only in slots the weights do not determine"
        return None, f"slot {', '.join(map(str, excluded))} excluded, but the {joint} is not separated"
