"""The pieces a convention file declares, as frozen objects: how ids are read (:class:`IdRead`), what an
engine raises (:class:`EngineFailure`, :class:`IdCheck`), the capture rules (:class:`CaptureRule`: ids ->
capture indices), the draft flags (:class:`FlagRule`), tree drafting, and the result of a resolution
(:class:`Wiring`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .. import expr
from ..errors import BadConvention
from ..kinds import detect
from ..states import State
from .places import FLAG_PLACES

@dataclass(frozen=True)
class IdRead:
    """One place an engine reads the draft's ids from, and how."""

    place: str
    shift: int = 0  # added to each id as read (vLLM's DFlash/DSpark keys: +1)
    empty: str = "read"  # "read": an empty list is taken as given; "absent": skipped like a missing key
    verbatim_model_types: tuple[str, ...] = ()  # draft model_types for which ``shift`` is not applied
    unless_truthy: str | None = None  # skipped when this top-level key holds a non-empty dict (vLLM V1)
    only_with: str | None = None  # read only when this top-level key is in the config (a loader that maps it)

    def skipped(self, config: Mapping[str, Any]) -> bool:
        if self.only_with and self.only_with not in config:
            return True
        node = config.get(self.unless_truthy) if self.unless_truthy else None
        return isinstance(node, Mapping) and bool(node)

    def to_json(self) -> dict | str:
        if (self.shift, self.empty, self.verbatim_model_types, self.unless_truthy, self.only_with) == (0, "read", (), None, None):
            return self.place
        out: dict = {"place": self.place, "shift": self.shift, "empty": self.empty}
        if self.verbatim_model_types:
            out["verbatim_model_types"] = list(self.verbatim_model_types)
        if self.unless_truthy:
            out["unless_truthy"] = self.unless_truthy
        if self.only_with:
            out["only_with"] = self.only_with
        return out


@dataclass(frozen=True)
class EngineFailure:
    """How an engine fails on an id set: its exception type and message, and when it raises."""

    error: str  # exception class name, as the engine raises it
    message: str  # the engine's own message (placeholders filled in once resolved)
    at: str  # "start-up" or "first forward"
    source: str = ""
    when: str | None = None  # for index failures: an expression over k and N

    def format(self, **values: Any) -> "EngineFailure":
        return EngineFailure(self.error, self.message.format(**values), self.at, self.source)

    def text(self) -> str:
        return f"{self.error}: {self.message}"

    def to_json(self) -> dict:
        return {"error": self.error, "message": self.message, "at": self.at, "source": self.source}


@dataclass(frozen=True)
class DraftRefusal:
    """An engine that refuses a whole kind or class of draft, whatever its ids (vLLM's V1 runner: DSpark, DFlash
    candidate-head drafts, DFlash drafts mixing sliding and full attention): every condition given must hold."""

    failure: EngineFailure
    kinds: tuple[str, ...] = ()  # the draft's kind is one of these (eagle_audit.kinds)
    architectures: tuple[str, ...] = ()  # one of the draft config's architectures is one of these
    mixed_layer_types: bool = False  # the draft's top-level layer_types mixes sliding_attention with other layers

    def applies(self, config: Mapping[str, Any]) -> bool:
        if self.kinds and detect(config).name not in self.kinds:
            return False
        archs = config.get("architectures") or ()
        if self.architectures and not (isinstance(archs, list) and set(self.architectures) & set(archs)):
            return False
        if self.mixed_layer_types:
            types = config.get("layer_types") or []
            sliding = sum(t == "sliding_attention" for t in types) if isinstance(types, list) else 0
            return 0 < sliding < len(types)
        return True

    def to_json(self) -> dict:
        return {**({"kinds": list(self.kinds)} if self.kinds else {}),
                **({"architectures": list(self.architectures)} if self.architectures else {}),
                **({"mixed_layer_types": True} if self.mixed_layer_types else {}), **self.failure.to_json()}


@dataclass(frozen=True)
class IdCheck:
    """An engine check over the ids it reads (``when``: an expression over ids and N), and how it fails."""

    when: str
    failure: EngineFailure
    places: tuple[str, ...] = ()  # only for ids read from these places (empty: any)
    as_read: bool = False  # a rule's check over the ids as read (before any shift), not as its setter gets them

    def fails(self, ids: tuple[int, ...], num_layers: int, place: str) -> EngineFailure | None:
        if self.places and place not in self.places:
            return None
        if expr.evaluate(self.when, N=num_layers, ids=list(ids)):
            return self.failure.format(ids=list(ids))
        return None


@dataclass(frozen=True)
class DraftShift:
    """Ids of drafts whose architectures include one of ``architectures`` are shifted by ``shift``."""

    architectures: tuple[str, ...]
    shift: int
    source: str = ""


@dataclass(frozen=True)
class Feed:
    """Capture indices (``when``, over k and N) whose tensor is not the residual stream B_k: ``what`` it is."""

    when: str
    what: str
    source: str = ""


@dataclass(frozen=True)
class ExplicitCase:
    shift: int
    when: str | None = None
    source: str = ""

    def text(self) -> str:
        shift = "verbatim" if self.shift == 0 else f"{self.shift:+d}"
        return f"{shift} if {self.when}" if self.when else shift


@dataclass(frozen=True)
class CaptureRule:
    name: str
    default_ids: str
    default_shift: int = 0
    explicit: tuple[ExplicitCase, ...] = (ExplicitCase(shift=0),)
    min_capture: str = "0"
    max_capture: str = "N"
    source: str = ""
    default_explicit: bool = False
    index_failures: tuple[EngineFailure, ...] = ()
    wraps_negative: bool = False
    count_check: EngineFailure | None = None
    feeds: tuple[Feed, ...] = ()
    id_checks: tuple[IdCheck, ...] = ()  # the setter's own checks over the ids it is handed
    draft_shift: DraftShift | None = None
    final_normed: bool = False  # capture index N is the post-norm final state (HF ``hidden_states[N]``)

    def failure_for(self, indices: tuple[int, ...], num_layers: int) -> EngineFailure | None:
        """The first index failure the engine raises for these capture indices (start-up ones first)."""
        for phase in ("start-up", "first forward"):
            for k in indices:
                for f in self.index_failures:
                    if f.at == phase and expr.evaluate(f.when, N=num_layers, k=k):
                        return f.format(k=k)
        return None

    def feed(self, k: int, num_layers: int) -> str | None:
        """What capture index ``k`` feeds when it is not the residual stream B_k (None: it is)."""
        for f in self.feeds:
            if expr.evaluate(f.when, N=num_layers, k=k):
                return f.what.replace("{k-1}", str(k - 1)).replace("{k}", str(k))
        return None

    def indices(self, ids: tuple[int, ...] | None, num_layers: int, draft_layers: int | None = None
                ) -> tuple[tuple[int, ...], str]:
        """Capture indices (= boundaries) for ``ids`` (None: the default, an expression over N and the draft's
        layer count D), and which case applied."""
        if ids is None:
            base = [int(v) for v in expr.evaluate(self.default_ids, N=num_layers, D=draft_layers)]
            if self.default_explicit:
                case = self.case_for(tuple(base), num_layers)
                return tuple(v + case.shift for v in base), f"default {self.default_ids} passed as ids, {case.text()}"
            shift = f" then {self.default_shift:+d}" if self.default_shift else ""
            return tuple(v + self.default_shift for v in base), f"default {self.default_ids}{shift}"
        case = self.case_for(ids, num_layers)
        return tuple(v + case.shift for v in ids), f"explicit ids, {case.text()}"

    def case_for(self, ids: tuple[int, ...], num_layers: int) -> ExplicitCase:
        for case in self.explicit:
            if case.when is None or expr.evaluate(case.when, N=num_layers, ids=list(ids)):
                return case
        raise BadConvention(f"rule {self.name}: no explicit case matches ids {list(ids)}")

    def reachable(self, num_layers: int) -> tuple[int, int]:
        return int(expr.evaluate(self.min_capture, N=num_layers)), int(expr.evaluate(self.max_capture, N=num_layers))


@dataclass(frozen=True)
class FlagRule:
    honoured: bool
    default: Any = None
    read: tuple[str, ...] = FLAG_PLACES  # places tried in order; the first holding the key wins
    any_of: tuple[str, ...] = ()  # further top-level keys OR-ed in (``getattr(c, "fc_norm", None) or getattr(c, "use_aux_norm", False)``)
    default_if_present: tuple[tuple[str, Any], ...] = ()  # (top-level key, default when the flag is absent)
    semantics: str | None = None  # norm_output only: "carried" or "head" (see the module docstring)

    def value(self, config: Mapping[str, Any], name: str) -> Any:
        """The flag's value as the engine reads it from ``config`` (honoured or not)."""
        value, found = None, False
        for place in self.read:
            node = config if place == "top_level" else config.get("eagle_config")
            if isinstance(node, Mapping) and name in node:
                value, found = node[name], True
                break
        if not found:
            value = self.default
            for key, default in self.default_if_present:  # a config loader that fills the flag in
                if key in config:
                    value = default
        for alias in self.any_of:
            value = value or config.get(alias, False)
        return value

    def to_json(self) -> dict:
        return {"honoured": self.honoured, "default": self.default, "read": list(self.read),
                **({"or": list(self.any_of)} if self.any_of else {}),
                **({"default_if_present": dict(self.default_if_present)} if self.default_if_present else {}),
                **({"semantics": self.semantics} if self.semantics else {})}


TREE_ATTENTION_MODES = ("kv_by_slot", "exact_ancestor")  # = eagle_audit.simulate.tree.TREE_ATTENTION (no torch here)


@dataclass(frozen=True)
class TreeDrafts:
    """How an engine drafts trees: ``attention`` one of :data:`TREE_ATTENTION_MODES`, or None when it
    drafts chains only; ``source`` the upstream code it was read from."""

    attention: str | None
    source: str = ""


@dataclass(frozen=True)
class Wiring:
    """What one convention feeds the draft: states in concatenation order, and how it got there."""

    convention: str
    kind: str
    version: str
    rule: str
    ids: tuple[int, ...] | None
    ids_source: str  # a place name, "override", "boundaries" (given directly) or "default"
    case: str
    capture_indices: tuple[int, ...]
    states: tuple[State, ...]
    dropped: tuple[int, ...] = ()
    ignored_places: tuple[str, ...] = ()  # places holding ids this convention does not read
    failure: EngineFailure | None = None  # the engine raises on these ids (states: what it would have captured)
    not_residual: tuple[tuple[int, str], ...] = ()  # (capture index, what it feeds) where that is not B_k
    unsupported: str | None = None  # the engine has no capture for this architecture: why

    def to_json(self) -> dict:
        return {
            "convention": self.convention, "kind": self.kind, "version": self.version, "rule": self.rule,
            "ids": list(self.ids) if self.ids is not None else None, "ids_source": self.ids_source,
            "case": self.case, "capture_indices": list(self.capture_indices),
            "states": [s.to_json() for s in self.states], "dropped": list(self.dropped),
            "ignored_places": list(self.ignored_places),
            "failure": self.failure.to_json() if self.failure else None,
            "not_residual": [{"capture_index": k, "feeds": what} for k, what in self.not_residual],
            "unsupported": self.unsupported,
        }
