"""The fingerprint result: frozen data, rendered by the CLI, written as ``eagle-audit/fingerprint/1`` JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..conventions import Wiring
from ..result import Finding, Fix
from ..states import State
from .search import Interval

FINGERPRINT_SCHEMA = "eagle-audit/fingerprint/1"


def _label(s: State | None) -> str | None:
    return s.label() if s is not None else None


@dataclass(frozen=True)
class SlotInference:
    index: int
    best: State
    runner_up: State | None
    margin: Interval | None  # mean log-prob of the target's token: best - runner-up (paired, per token)
    top1_margin: Interval | None  # top-1 agreement: best - runner-up
    candidates: tuple[State, ...]  # the best and every state not separated from it
    ambiguous: bool
    undetermined: bool = False  # more than MAX_NAMED states not separated: the slot carries too little signal here

    def text(self) -> str:
        """``B15`` or, where not separated, ``B15 or B16``; ``undetermined (9 states ...)`` where too many are
        not separated to name."""
        if self.undetermined:
            return f"undetermined ({len(self.candidates)} states not separated, best {self.best.label()})"
        return " or ".join(s.label() for s in self.candidates)

    def admits(self, state: State) -> bool:
        """``state`` is consistent with what the weights say about this slot (an undetermined slot admits any)."""
        return self.undetermined or state in self.candidates

    def to_json(self) -> dict:
        iv = self.margin
        return {"index": self.index, "best": self.best.label(), "runner_up": _label(self.runner_up),
                "margin": iv.mean if iv else None, "interval": [iv.low, iv.high] if iv else None,
                "top1_margin": self.top1_margin.mean if self.top1_margin else None,
                "top1_interval": [self.top1_margin.low, self.top1_margin.high] if self.top1_margin else None,
                "ambiguous": self.ambiguous, "undetermined": self.undetermined,
                "candidates": [s.label() for s in self.candidates], "text": self.text()}


@dataclass(frozen=True)
class Agreement:
    """Per slot, the draft's agreement with every candidate state in that slot (other slots at the best)."""

    states: tuple[State, ...]
    logprob: tuple[tuple[float, ...], ...]  # [slot][state]: mean log-prob of the target's next token
    top1: tuple[tuple[float, ...], ...]  # [slot][state]: share of tokens where the draft's top-1 is it

    def to_json(self) -> dict:
        return {"states": [s.label() for s in self.states], "logprob": [list(r) for r in self.logprob],
                "top1": [list(r) for r in self.top1]}


@dataclass(frozen=True)
class Claim:
    """What one source says the draft was trained on, and whether the weights agree."""

    source: str  # "declared", a trainer convention name, or "engine"
    states: tuple[State, ...] | None
    agrees: bool | None  # None: no inferred wiring, or the claim does not fit the checkpoint
    note: str = ""

    def to_json(self) -> dict:
        return {"source": self.source, "states": [s.label() for s in self.states] if self.states is not None else None,
                "agrees": self.agrees, "note": self.note}


@dataclass(frozen=True)
class FingerprintResult:
    verdict: str  # "match" or "mismatch" (any error finding)
    confidence: str  # "high" (every slot separated), "ambiguous" (some slot not), "none" (representation mismatch)
    target: Mapping[str, Any]
    draft: Mapping[str, Any]
    inferred: tuple[State, ...] | None  # None: REPRESENTATION_MISMATCH
    best: tuple[State, ...]  # the best-scoring wiring, whether or not it is trusted
    slots: tuple[SlotInference, ...]
    top1: float | None  # the best wiring's top-1 agreement (None: nothing could be scored)
    logprob: float | None  # its mean log-prob of the target's next token
    baseline_top1: float | None  # the draft with no target information
    baseline_logprob: float | None
    scored_tokens: int
    coverage: float  # share of positions whose target token is in the draft vocabulary
    agreement: Agreement
    claims: tuple[Claim, ...]
    declared: Wiring
    served: Wiring | None
    findings: tuple[Finding, ...]
    fix: Fix | None
    search: Mapping[str, Any]
    provenance: Mapping[str, Any]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def to_json(self) -> dict:
        return {
            "schema": FINGERPRINT_SCHEMA, "verdict": self.verdict, "target": dict(self.target),
            "draft": dict(self.draft),
            "inferred": {"states": [s.label() for s in self.inferred] if self.inferred is not None else None,
                         "confidence": self.confidence, "best": [s.label() for s in self.best],
                         "slots": [s.to_json() for s in self.slots], "top1": self.top1, "logprob": self.logprob,
                         "baseline": {"top1": self.baseline_top1, "logprob": self.baseline_logprob},
                         "scored_tokens": self.scored_tokens, "coverage": self.coverage},
            "agreement": self.agreement.to_json(), "claims": [c.to_json() for c in self.claims],
            "declared": self.declared.to_json(), "served": self.served.to_json() if self.served else None,
            "findings": [f.to_json() for f in self.findings], "fix": self.fix.to_json() if self.fix else None,
            "search": dict(self.search), "provenance": dict(self.provenance),
        }
