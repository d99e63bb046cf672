"""Result objects of an audit: frozen data, the only thing renderers and reports receive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..conventions import Wiring
from ..states import State

LAYERS_SCHEMA = "eagle-audit/layers/1"

#: Every finding code, with the sentence the README documents it by.
CODES = {
    "LAYER_OFFSET": "a slot is served a different layer boundary than it was trained on",
    "EMBEDDING_COMPOSITION": "one side feeds the embedding output in a slot where the other feeds a layer output",
    "NORM_MISMATCH": "one side's state (or draft-side norm) is post-norm where the other's is pre-norm",
    "AUX_COUNT_MISMATCH": "the engine feeds, or sizes fc for, a different number of states than fc was trained on",
    "UNREACHABLE_LAYER": "an id maps to a capture index the engine's loop never reaches; it is silently dropped",
    "IDS_NOT_READ": "the draft declares ids where the engine does not read them; the engine uses its default",
    "FC_SKIPPED": "the engine skips fc because the incoming width equals the draft hidden size",
    "HIDDEN_SIZE_MISMATCH": "the engine would size fc from a hidden size that is not the target's",
    "VOCAB_MAP_MISSING": "a reduced draft vocabulary has no d2t map; draft ids are read as target ids",
    "VOCAB_MAP_INVALID": "d2t/t2d exist but are inconsistent or out of range",
    "ORDER_MISMATCH": "the same states are concatenated in a different order than trained",
    "ENGINE_UNSUPPORTED": "the engine has no EAGLE-3 capture for the target's architecture: it cannot feed the draft",
    "ENGINE_CRASH": "the engine raises on the draft's ids (at start-up or at the first forward), with its own message",
    "NOT_RESIDUAL_STREAM": "the engine's capture index feeds a tensor that is not the residual stream the draft saw",
    "TRAINED_WIRING_DIFFERS": "the draft's weights were trained on other states than the config / trainer convention declares",
    "BLOCK_IDS_DISAGREE": "a DFlash / DSpark config's EAGLE-3 ids and its own ids name different states; engines read one or the other",
    "REPRESENTATION_MISMATCH": "no wiring makes the draft agree with this target: another target, untrained, or a changed residual stream",
    "DRAFT_CLASS_UNSUPPORTED": "the engine registers no EAGLE-3 draft class that loads this draft config",
    "TRAINER_REFUSES_IDS": "the trainer named (or assumed) refuses the draft's ids: it cannot have trained this draft",
    "ENGINE_STATE_MISMATCH": "a state a running server serves equals no boundary it should (partial sums, a wrong gather, corruption)",
    "ENGINE_STATE_SHIFTED": "a running server serves another boundary than the engine's rules say: this build captures elsewhere",
}


@dataclass(frozen=True)
class Slot:
    index: int
    trained: State | None
    served: State | None
    verdict: str  # "ok", "offset +1", "embedding", "norm", "missing", "extra", "order"
    cosine: float | None = None  # token-mean cosine of the trained and the served state
    nearest: State | None = None  # the state the engine can serve that is nearest to the trained one
    nearest_cosine: float | None = None

    def to_json(self) -> dict:
        j = lambda s: s.to_json() if s is not None else None  # noqa: E731
        return {"index": self.index, "trained": j(self.trained), "served": j(self.served), "verdict": self.verdict,
                "cosine": self.cosine, "nearest": j(self.nearest), "nearest_cosine": self.nearest_cosine}


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str  # "error" (costs acceptance or fails) or "warning"
    slot: int | None
    what: str
    why: str
    fix: str

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code}")

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Fix:
    engine: str
    possible: bool
    explanation: str
    patch: Mapping[str, Any] = field(default_factory=dict)  # JSON merge patch for config.json
    ids: tuple[int, ...] | None = None
    key: str | None = None  # the dotted key the ids go to
    resolved: tuple[State, ...] = ()  # what the engine feeds with the patch applied (checked)

    def to_json(self) -> dict:
        return {"engine": self.engine, "possible": self.possible, "explanation": self.explanation,
                "patch": dict(self.patch), "ids": list(self.ids) if self.ids is not None else None, "key": self.key,
                "resolved": [s.to_json() for s in self.resolved]}


@dataclass(frozen=True)
class Heatmap:
    """Token-mean cosine of each slot's trained state against every state of the target."""

    states: tuple[State, ...]
    rows: tuple[tuple[float, ...], ...]  # [slot][state]

    def to_json(self) -> dict:
        return {"states": [s.label() for s in self.states], "rows": [list(r) for r in self.rows]}


@dataclass(frozen=True)
class LayersResult:
    verdict: str  # "match" or "mismatch"
    target: Mapping[str, Any]
    draft: Mapping[str, Any]
    trained: Wiring
    served: Wiring
    slots: tuple[Slot, ...]
    findings: tuple[Finding, ...]
    fix: Fix | None
    heatmap: Heatmap | None
    provenance: Mapping[str, Any]
    suggestions: tuple[str, ...] = ()  # what to run next (e.g. measure the trained wiring with the fingerprint)
    served_states: Mapping[str, Any] | None = None  # --server: where the states came from, the served-vs-local table

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def to_json(self) -> dict:
        return {"schema": LAYERS_SCHEMA, "verdict": self.verdict, "target": dict(self.target),
                "draft": dict(self.draft), "trained": self.trained.to_json(), "served": self.served.to_json(),
                "slots": [s.to_json() for s in self.slots], "findings": [f.to_json() for f in self.findings],
                "fix": self.fix.to_json() if self.fix else None,
                "heatmap": self.heatmap.to_json() if self.heatmap else None, "provenance": dict(self.provenance),
                "suggestions": list(self.suggestions), "served_states": self.served_states}
