"""Result objects of an audit: frozen data, the only thing renderers and reports receive."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..conventions import Wiring
from ..states import State

LAYERS_SCHEMA = "eagle-audit/layers/1"

#: Every finding code, with the sentence the README documents it by.
CODES = {
    "LAYER_OFFSET": "a slot is served a different layer boundary than it was trained on",
    "STREAM_MISMATCH": "a slot is served another view of a hyper-connection boundary (one stream, their mean, the mixed input) than trained",
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
    "IDS_ASSUMED": "the draft config declares no layer ids: the trained and served wirings are both defaults, assumed",
    "DRAFT_CONFIG_KEY": "a key the engine's draft class sizes a module from is absent or contradicts the weights: the engine fails to load or builds another draft",
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
    fix: str  # what to do, in words ("see the fix below": the config change, :attr:`config_fix`)
    config_fix: Fix | None = field(default=None, compare=False, repr=False)  # that change as data, where one is offered

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code}")

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "config_fix"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, pure: ``target`` and ``patch`` are left as they are. A patch that is not an
    object replaces the target; a null member deletes the key; an object member is merged into the target's
    member (into ``{}`` where that is absent or not an object, so nulls inside it delete nothing and are not kept)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def compose_patches(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict:
    """One merge patch equal to applying ``first`` and then ``then`` (a null in either is kept: it deletes)."""
    out = copy.deepcopy(dict(first))
    for k, v in then.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = compose_patches(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass(frozen=True)
class Fix:
    """The config change that makes the engine feed the trained states, as data.

    ``patch`` is an RFC 7386 JSON merge patch for ``path`` (the draft's ``config.json``); :meth:`apply` applies
    it. A fix is ``possible`` only where its fixed copy, re-audited under the same engine release and trainer
    with the original trained states pinned, is a match (``proof`` says what was re-audited). ``release``: the
    engine release it was proven on. Where no config change works on that release, ``upgrade`` is the fix
    proven on the first later release given that has one; ``engine_bugs``: engine bugs behind the mismatch
    that a later release fixed (its release and pull request, in words)."""

    engine: str
    possible: bool
    explanation: str
    patch: Mapping[str, Any] = field(default_factory=dict)  # JSON merge patch for config.json
    ids: tuple[int, ...] | None = None
    key: str | None = None  # the dotted key the ids go to
    resolved: tuple[State, ...] = ()  # what the engine feeds with the patch applied (checked)
    release: str | None = None  # "SGLang 0.5.6": the release the fix is for
    proof: str = ""  # what the re-audit of the fixed copy found
    upgrade: Fix | None = None  # no config fix on ``release``: the first later release's (proven there)
    engine_bugs: tuple[str, ...] = ()
    path: str = "config.json"  # the file of the draft directory the patch applies to

    def apply(self, config: Mapping[str, Any]) -> dict:
        """``config`` with the patch applied (RFC 7386; ``config`` is not changed). A fix that is not possible
        has nothing to apply: ValueError, with why."""
        if not self.possible:
            raise ValueError(f"no config change fixes this for {self.engine}: {self.explanation}")
        return merge_patch(config, self.patch)

    def to_json(self) -> dict:
        return {"engine": self.engine, "possible": self.possible, "explanation": self.explanation,
                "patch": dict(self.patch), "ids": list(self.ids) if self.ids is not None else None, "key": self.key,
                "resolved": [s.to_json() for s in self.resolved], "release": self.release, "proof": self.proof,
                "upgrade": self.upgrade.to_json() if self.upgrade is not None else None,
                "engine_bugs": list(self.engine_bugs), "path": self.path}


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
    #: the verdict on other engines or releases (layers.across.EngineVerdict): every engine at its newest release
    #: where none was named, every release of a range; ``verdict`` is then the worst of all
    engines: tuple[Any, ...] = ()

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def own_verdict(self) -> str:
        """The verdict on the engine and release the slots speak for (``verdict`` is the worst of it and
        ``engines``): what ``check``, which speaks for one engine, shows as the stage's verdict."""
        return "mismatch" if self.errors else "match"

    def to_json(self) -> dict:
        return {"schema": LAYERS_SCHEMA, "verdict": self.verdict, "target": dict(self.target),
                "draft": dict(self.draft), "trained": self.trained.to_json(), "served": self.served.to_json(),
                "slots": [s.to_json() for s in self.slots], "findings": [f.to_json() for f in self.findings],
                "fix": self.fix.to_json() if self.fix else None,
                "heatmap": self.heatmap.to_json() if self.heatmap else None, "provenance": dict(self.provenance),
                "suggestions": list(self.suggestions), "served_states": self.served_states,
                "engines": [e.to_json() for e in self.engines]}
