"""The ``check`` result: one verdict and one section per stage (frozen; JSON schema ``eagle-audit/check/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

CHECK_SCHEMA = "eagle-audit/check/1"

#: the stages, in the order they run; each says what it rests on (how sure a finding it shows is)
STAGES = ("static", "captured", "served", "fingerprint", "accept_rate")
EVIDENCE = {
    "static": "predicted from the configs and the engine's rules, no weights",
    "captured": "measured on the target's own states: cosines of the trained and the served states",
    "served": "read from the running engine: the states it feeds against the local capture of every boundary",
    "fingerprint": "read off the draft's weights: the wiring it agrees with best",
    "accept_rate": "measured as accept length: simulated greedy verification",
}


@dataclass(frozen=True)
class Stage:
    """One stage: its result (the result object of the command it is, e.g. a LayersResult), or why it did
    not run."""

    name: str  # one of STAGES
    ran: bool
    why: str | None  # why it did not run (None when it ran)
    result: Any = None  # LayersResult | ServedCheck | FingerprintResult | AcceptResult
    seconds: float = 0.0

    @property
    def verdict(self) -> str | None:
        if self.result is None:
            return None
        return getattr(self.result, "own_verdict", self.result.verdict)  # layers: the engine the check speaks for

    def to_json(self) -> dict:
        return {"name": self.name, "ran": self.ran, "why": self.why, "evidence": EVIDENCE[self.name],
                "verdict": self.verdict, "seconds": round(self.seconds, 2),
                "result": self.result.to_json() if self.result is not None else None}


@dataclass(frozen=True)
class Problem:
    """One thing wrong: a finding code and slot, and the stages that showed it."""

    code: str
    slot: int | None
    what: str
    shown_by: tuple[str, ...]

    def to_json(self) -> dict:
        return {"code": self.code, "slot": self.slot, "what": self.what, "shown_by": list(self.shown_by)}


@dataclass(frozen=True)
class Verdict:
    """What is wrong, how sure (the strongest stage that showed it), what it costs, the fix."""

    status: str  # "match" or "mismatch"
    problems: tuple[Problem, ...]
    sure: str | None  # the strongest stage that showed a problem (None: nothing wrong)
    cost: Mapping[str, Any] | None  # {"trained", "served", "loss", "per_position": {...}} (None: not measured)
    fix: Any  # Fix | None
    fix_from: str | None  # the stage whose fix it is
    gate: tuple[str, ...] = ()  # --fail-under lines not met
    grade: str | None = None  # how sure, as a grade: "high", "medium", "low" (:func:`eagle_audit.check.run.grade`)
    grade_why: str = ""  # the evidence the grade follows, in words

    def summary(self) -> str:
        if self.status == "match" and not self.gate:
            return "match: no stage found the wiring wrong"
        parts = []
        if self.problems:
            codes = ", ".join(dict.fromkeys(p.code for p in self.problems))
            parts.append(f"{codes}" + (f"; how sure: {self.grade}" if self.grade else ""))
        if self.cost and self.cost.get("loss") is not None:
            parts.append(f"costs {self.cost['loss']:.2f} accept length ({self.cost['trained']:.2f} trained, "
                         f"{self.cost['served']:.2f} served)")
        if self.gate:
            parts.append("; ".join(self.gate))
        return f"{self.status}: " + "; ".join(parts) if parts else self.status

    def to_json(self) -> dict:
        return {"status": self.status, "summary": self.summary(), "problems": [p.to_json() for p in self.problems],
                "sure": self.sure, "evidence": EVIDENCE[self.sure] if self.sure else None,
                "grade": self.grade, "grade_why": self.grade_why,
                "cost": dict(self.cost) if self.cost else None, "fix": self.fix.to_json() if self.fix else None,
                "fix_from": self.fix_from, "gate": list(self.gate)}


@dataclass(frozen=True)
class CheckResult:
    verdict: Verdict
    stages: tuple[Stage, ...]
    source: Mapping[str, Any] | None  # the state source's spec and what it ran (None: no weights loaded)
    gate: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict:
        return {"schema": CHECK_SCHEMA, "verdict": self.verdict.to_json(),
                "stages": [s.to_json() for s in self.stages], "source": dict(self.source) if self.source else None,
                "gate": dict(self.gate), "provenance": dict(self.provenance)}
