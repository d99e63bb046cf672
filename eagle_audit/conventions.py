"""Training pipelines and serving engines, each declared once in a convention file under ``probes/``.

A convention turns (draft config, target architecture, N) into the target states it feeds the draft,
in the order it concatenates them: a :class:`Wiring`. This module is the only place where a
pipeline's bare layer ids become canonical :class:`~eagle_audit.states.State` boundaries.

File format (JSON, ``"schema": "eagle-audit/convention/1"``), documented in README.md:

``name, kind ("trainer"|"engine"), title, version, source``
    identity and the upstream code it was read from.
``ids_from``
    ordered list of places the draft's ids are read from; the first present wins. Places:
    ``nested`` = ``eagle_config.eagle_aux_hidden_state_layer_ids``, ``top_level`` =
    ``eagle_aux_hidden_state_layer_ids``, ``nested_layer_ids`` = ``eagle_config.layer_ids``, and the
    DFlash/DSpark keys vLLM's V2 runner also reads (``dflash_target_layer_ids`` =
    ``dflash_config.target_layer_ids``, ``dspark_target_layer_ids``, ``target_layer_ids``,
    ``dflash_layer_ids`` = ``dflash_config.layer_ids``). An entry is a place name or
    ``{"place", "shift" (added to each id as read, default 0), "empty": "read"|"absent" (an empty list is
    taken as given, or skipped like a missing key), "verbatim_model_types" (draft model_types for which the
    shift is not applied), "unless_truthy" (a top-level key: the place is skipped when that key holds a
    non-empty dict), "only_with" (a top-level key: the place is read only when the config has it)}``. Empty: the ids are hard-coded and nothing is read. See docs/engines.md.
``order``
    ``"ascending"`` (capture-loop order; duplicates collapse) or ``"config"`` (as listed).
``rules``
    named capture rules: ``default_ids`` (expression in N), ``default_shift``, ``explicit`` (ordered
    cases ``{"when": expr over ids and N, "shift": int}``; the first whose ``when`` holds applies),
    ``min_capture`` / ``max_capture`` (expressions: capture indices outside are silently never
    captured), ``source``; what the engine does with indices it cannot serve as states:
    ``index_failures`` (ordered ``{"when": expr over k and N, "error", "message" (``{k}`` filled in),
    "at": "start-up"|"first forward", "source"}``: the engine raises for a capture index k),
    ``wraps_negative`` (an index -N <= k < 0 indexes the layer list from the end: captured as N+k),
    ``count_check`` (``{"error", "message" ({captured}, {expected}), "at", "source"}``: the engine raises
    when it captured another number of states than its capture list holds); and ``feeds``
    (``[{"when": expr over k and N, "what", "source"}]``: capture indices whose tensor is not the residual
    stream B_k, and what it is instead).
    ``default_explicit`` (true: the default ids are handed to the capture as explicit ids, so the
    explicit cases apply to them and ``default_shift`` is ignored: a trainer that computes its own
    default and passes it to an engine).
``architectures``
    target architecture -> rule name; ``fallback_rule`` for the rest (``null``: unsupported);
    ``unsupported``: architecture -> why.
``aux_count_from``
    how the draft side sizes ``fc``: keys tried in order, then an int default.
``draft_flags``
    per draft flag: ``{"honoured": bool, "default": value when absent, "read": places tried in order, the
    first that holds the key wins ("top_level", "nested" = inside ``eagle_config``; default both, top level
    first), "or": further top-level keys OR-ed in (SGLang's legacy ``use_aux_norm`` for ``fc_norm``),
    "default_if_present": {top-level key: default used instead when that key is in the config} (vLLM's
    speculators loader sets ``norm_before_residual`` to True when absent)}``.
    ``semantics`` (only ``norm_output``): ``"carried"`` (true: the normed state is also the hidden
    carried to the next draft step; the final norm always runs before ``lm_head``: SGLang, vLLM,
    speculators) or ``"head"`` (true: the final norm runs before ``lm_head`` only, the carried hidden stays
    pre-norm; false: no final norm at all: SpecForge ``llama3_eagle.py`` ``compute_logits``).
``empty_capture``
    ``{"error", "message", "at", "source"}``: the engine's failure when capture is on but nothing is
    captured (an empty id list, or every index out of reach).
``fc_skip_when_width_equals_hidden``
    this side runs ``fc`` only when the incoming width differs from the draft hidden size (else: ``fc``
    always runs on the target's states, never on the draft's own recurrent hidden).
``rope_scaling``
    the ``rope_scaling`` types this side applies to the draft's attention (others run as default RoPE).
``captures_through``
    ``{"engine", "version", "source"}``: a trainer that captures through an engine's own setter and
    capture loop, whose rules were derived with ``eagle-audit probe`` on that engine version.
``no_aux``
    ``{"what", "source"}``: this side reads ``eagle_config.use_aux_hidden_state`` and, when it is false,
    captures no aux states and feeds the draft the post-norm final state (no ``fc``). Absent: the flag is
    not read (the ids are resolved as usual).
``ids_accepted`` (trainers)
    ``{"when": expr over ids and N, "error", "message" ({ids}), "at", "source"}``: explicit ids the trainer
    trains on; others it refuses (so no draft of that trainer has them).
``draft_classes``, ``draft_class_fallback``, ``speculators_loader`` (engines)
    the EAGLE-3 draft classes the engine serves, each with its own fc sizing, draft flags and decoder
    attention, picked by the draft config's ``architectures[0]`` or through the engine's speculators config
    loader (:mod:`eagle_audit.draft_classes`); a class overrides the convention's draft-side keys.
``draft_kinds``
    the drafts this convention describes: ``"eagle3"`` (default), ``"dflash"``, ``"dspark"``
    (:mod:`eagle_audit.draft.block` picks the convention for a draft of another kind).
``id_checks`` (per convention and per rule)
    ``[{"when": expr over ids and N, "error", "message" ({ids}), "at", "source", "places"}]``: the engine
    raises for these ids (the id reader's or the setter's own checks, such as SGLang's DFlash range check);
    ``places`` limits a convention-level check to ids read from those places. A rule's checks see the ids
    as handed to its setter (after ``draft_shift``), or as read with ``"as_read": true``.
``final_normed`` (per rule)
    true: capture index N is the post-norm final state (a trainer reading HF ``hidden_states[N]``, which
    transformers returns after the final norm), not the pre-norm B_N.
``draft_shift`` (per rule)
    ``{"architectures": [draft architectures], "shift": int, "source"}``: ids of drafts with one of these
    architectures are shifted before the setter sees them (SGLang's Muse mapping).
``width_check``
    ``{"error", "message" ({captured}, {expected}), "at", "source"}``: the draft raises when the target hands
    it another number of states than its ``fc`` is sized for (``aux_count_from``).
``tree_drafts`` (engines)
    ``{"attention": "kv_by_slot"|"exact_ancestor"|null, "source": ...}``: which draft keys a tree node
    attends to (:data:`eagle_audit.accept.tree.TREE_ATTENTION`), or ``null`` when the engine drafts chains
    only. Absent: not declared.

A shift maps an id to a boundary: OUT-k pipelines (id k = output of layer k) shift by +1, IN-k
pipelines (id k = input of layer k) by 0.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import expr
from .draft_classes import DraftClass, SpeculatorsLoader, loader_json, parse_draft_classes, parse_loader
from .errors import AuditError, BadConvention, UnknownArchitecture, UnknownConvention, shown
from .jsonfile import read_json_object
from .states import State

SCHEMA = "eagle-audit/convention/1"

#: Where the draft's ids live, by place name: the keys to follow from the config's top level.
ID_PLACES: dict[str, tuple[str, ...]] = {
    "nested": ("eagle_config", "eagle_aux_hidden_state_layer_ids"),
    "top_level": ("eagle_aux_hidden_state_layer_ids",),
    "nested_layer_ids": ("eagle_config", "layer_ids"),
    "dflash_target_layer_ids": ("dflash_config", "target_layer_ids"),
    "dspark_target_layer_ids": ("dspark_target_layer_ids",),
    "target_layer_ids": ("target_layer_ids",),
    "dflash_layer_ids": ("dflash_config", "layer_ids"),
    "dspark_config_ids": ("dspark_config", "target_layer_ids"),
    "aux_hidden_state_layer_ids": ("aux_hidden_state_layer_ids",),  # speculators' DFlash / DSpark configs (IN-k)
}
#: The places that hold EAGLE-3 ids proper (a draft declaring ids in one an engine does not read: IDS_NOT_READ).
EAGLE_PLACES = ("nested", "top_level", "nested_layer_ids")
FLAG_PLACES = ("top_level", "nested")
DRAFT_FLAGS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")
NORM_OUTPUT_SEMANTICS = ("carried", "head")
ROPE_TYPES = ("linear", "llama3", "yarn", "dynamic", "mrope", "default")


def draft_layer_count(config: Mapping[str, Any]) -> int | None:
    """The draft's own decoder-layer count (``D`` in expressions): ``num_hidden_layers`` of its text config, as
    SGLang's DFlash reader takes it (``dflash_utils.py`` ``parse_dflash_draft_config``); None when absent."""
    node = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    v = node.get("num_hidden_layers")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def place_key(place: str) -> str:
    """The dotted config key of an id place, for messages and fixes."""
    return ".".join(ID_PLACES[place]) if place in ID_PLACES else place


def uses_aux(config: Mapping[str, Any]) -> bool:
    """False when the draft says ``eagle_config.use_aux_hidden_state: false`` (no fc, the last state only; read
    there by SGLang spec_aux_hidden_state.py:188-191, vLLM eagle3_utils.py:15-21 and llm_base_proposer.py:1674-1687,
    modelopt hf_eagle.py:488-494)."""
    nested = config.get("eagle_config")
    return not (isinstance(nested, Mapping) and nested.get("use_aux_hidden_state") is False)


def read_ids(config: Mapping[str, Any], place: str) -> tuple[int, ...] | None:
    node: Any = config
    for key in ID_PLACES[place]:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if node is None:
        return None
    if not isinstance(node, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in node):
        raise BadConvention(f"draft config: {place_key(place)} must be a list of integers, got {node!r}")
    return tuple(node)


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


TREE_ATTENTION_MODES = ("kv_by_slot", "exact_ancestor")  # = eagle_audit.accept.tree.TREE_ATTENTION (no torch here)


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


@dataclass(frozen=True)
class Convention:
    name: str
    kind: str
    title: str
    version: str
    source: str
    ids_from: tuple[str, ...]  # place names, in reading order (``id_reads`` says how each is read)
    order: str
    rules: Mapping[str, CaptureRule]
    architectures: Mapping[str, str]
    fallback_rule: str | None
    unsupported: Mapping[str, str] = field(default_factory=dict)
    aux_count_from: tuple[Any, ...] = ("num_aux_hidden_states", "nested", "top_level", 3)
    draft_flags: Mapping[str, FlagRule] = field(default_factory=dict)
    fc_skip_when_width_equals_hidden: bool = False
    notes: tuple[str, ...] = ()
    path: str = ""
    tree_drafts: TreeDrafts | None = None  # None: not declared
    id_reads: tuple[IdRead, ...] = ()  # how each place of ``ids_from`` is read (default: taken as given)
    empty_capture: EngineFailure | None = None
    draft_kinds: tuple[str, ...] = ("eagle3",)
    id_checks: tuple[IdCheck, ...] = ()
    width_check: EngineFailure | None = None

    def reads(self) -> tuple[IdRead, ...]:
        return self.id_reads or tuple(IdRead(p) for p in self.ids_from)

    def supported(self) -> str:
        """Which architectures this engine captures for, in words (for ENGINE_UNSUPPORTED)."""
        if self.fallback_rule is not None:
            others = f"; every other architecture by rule {self.fallback_rule}"
        else:
            others = ""
        names = sorted(self.architectures)
        return (f"{self.title} {self.version} captures for {len(names)} architecture(s): {', '.join(names)}{others}"
                if names else f"{self.title} {self.version}: every architecture by rule {self.fallback_rule}")
    rope_scaling: tuple[str, ...] = ("linear", "llama3", "yarn")
    captures_through: Mapping[str, str] | None = None
    draft_classes: tuple[DraftClass, ...] = ()  # eagle_audit.draft_classes (engines)
    draft_class_fallback: str | None = None
    speculators_loader: SpeculatorsLoader | None = None
    draft_class: DraftClass | None = None  # set by for_draft: the class this draft is served by
    draft_class_how: str = ""  # how it was picked, or why none was
    base: "Convention | None" = field(default=None, repr=False, compare=False)  # before for_draft
    no_aux: Mapping[str, str] | None = None  # reads use_aux_hidden_state: false -> the post-norm final state
    ids_accepted: EngineFailure | None = None  # trainers: explicit ids outside ``when`` are refused

    def view(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """The draft config as this side's draft class reads it (a speculators config through the engine's
        config loader; anything else as written)."""
        if self.speculators_loader is not None and config.get("speculators_model_type"):
            out, _ = self.speculators_loader.view(config)
            return out if out is not None else config
        return config

    def pick_draft_class(self, config: Mapping[str, Any]) -> tuple[DraftClass | None, str]:
        """The draft class this engine serves ``config`` with (None: it cannot load it), and how it was picked."""
        root = self.base or self
        if not root.draft_classes:
            return None, ""
        loaded = ""
        if root.speculators_loader is not None and config.get("speculators_model_type"):
            view, loaded = root.speculators_loader.view(config)
            if view is None:
                return None, f"{root.title} {root.version} cannot load this draft: {loaded}"
            config = view
        archs = config.get("architectures") or []
        arch = archs[0] if archs else None
        for c in root.draft_classes:
            if arch in c.architectures:
                how = f"{arch} -> {c.name}" + (f" (via {loaded})" if loaded else "")
                return c, f"{root.title} {root.version} serves it with {c.name} ({how}; {c.source})"
        fallback = next((c for c in root.draft_classes if c.name == root.draft_class_fallback), None)
        registered = sorted({a for c in root.draft_classes for a in c.architectures})
        if fallback is None:
            return None, (f"{root.title} {root.version} registers no EAGLE-3 draft class for architecture {arch!r} "
                          f"(it registers {', '.join(registered)})")
        return fallback, (f"architecture {arch!r} is not an EAGLE-3 draft class {root.title} {root.version} "
                          f"registers ({', '.join(registered)}): audited with its {fallback.name} class, as after "
                          f"editing architectures to {fallback.architectures[0]}")

    def for_draft(self, config: Mapping[str, Any]) -> "Convention":
        """This convention with its draft side replaced by that of the draft class serving ``config``."""
        from dataclasses import replace

        root = self.base or self
        if not root.draft_classes:
            return self
        cls, how = root.pick_draft_class(config)
        if cls is None:
            return replace(root, draft_class=None, draft_class_how=how, base=root)
        return replace(
            root, draft_class=cls, draft_class_how=how, base=root,
            aux_count_from=cls.aux_count_from if cls.aux_count_from is not None else root.aux_count_from,
            draft_flags=cls.draft_flags if cls.draft_flags is not None else root.draft_flags,
            fc_skip_when_width_equals_hidden=(cls.fc_skip_when_width_equals_hidden
                                              if cls.fc_skip_when_width_equals_hidden is not None
                                              else root.fc_skip_when_width_equals_hidden))

    def rule_for(self, architecture: str) -> CaptureRule:
        if architecture in self.unsupported:
            raise UnknownArchitecture(
                f"{self.title} {self.version} has no {self.capture_name} capture for {architecture}: "
                f"{self.unsupported[architecture]}")
        name = self.architectures.get(architecture, self.fallback_rule)
        if name is None:
            known = ", ".join(sorted(self.architectures)) or "none"
            raise UnknownArchitecture(
                f"{self.title} {self.version} ({self.path}) declares no capture rule for architecture {architecture}",
                hint=f"declared: {known}")
        return self.rules[name]

    def unsupported_reason(self, architecture: str) -> str | None:
        """Why this engine has no capture for ``architecture`` (None: it has one)."""
        if architecture in self.unsupported:
            return self.unsupported[architecture]
        if architecture not in self.architectures and self.fallback_rule is None:
            return (f"{self.path or self.name} declares no capture rule for it (not registered with {self.capture_name} "
                    "capture)")
        return None

    def read_draft_ids(self, draft_config: Mapping[str, Any]) -> tuple[tuple[int, ...] | None, str, int]:
        """(ids as written, the place they came from or "default", the shift that place adds)."""
        for r in self.reads():
            if r.skipped(draft_config):
                continue
            found = read_ids(draft_config, r.place)
            if found is None or (not found and r.empty == "absent"):
                continue
            shift = 0 if draft_config.get("model_type") in r.verbatim_model_types else r.shift
            return found, r.place, shift
        return None, "default", 0

    def resolve(self, draft_config: Mapping[str, Any], architecture: str, num_layers: int,
                override_ids: tuple[int, ...] | None = None) -> Wiring:
        """What this convention feeds. An architecture without capture gives a Wiring with no states and
        ``unsupported`` set (an engine that cannot feed the draft is a finding, not bad input)."""
        if self.no_aux is not None and not uses_aux(draft_config):  # no capture at all: no rule needed
            return Wiring(self.name, self.kind, self.version, "no_aux", None, "use_aux_hidden_state",
                          f"eagle_config.use_aux_hidden_state: false: {self.no_aux.get('what', '')}".rstrip(": "),
                          (), (State(num_layers, normed=True),))
        why = self.unsupported_reason(architecture) if self.kind == "engine" else None
        if why is not None:
            return Wiring(self.name, self.kind, self.version, "none", None, "default", "no capture", (), (),
                          unsupported=why)
        rule = self.rule_for(architecture)
        ids, source, place_shift = None, "default", 0
        if override_ids is not None:
            ids, source = tuple(override_ids), "override"
        else:
            ids, source, place_shift = self.read_draft_ids(draft_config)
        ignored = tuple(p for p in self.kind_places() if p not in self.ids_from
                        and read_ids(draft_config, p) is not None)
        setter_ids = None if ids is None else tuple(i + place_shift for i in ids)
        failure = None
        if setter_ids is not None:
            failure = next((f for c in self.id_checks if (f := c.fails(setter_ids, num_layers, source))), None)
        draft_layers = draft_layer_count(draft_config)
        shift = rule.draft_shift
        archs = draft_config.get("architectures") or ()
        extra = shift.shift if shift and isinstance(archs, list) and set(shift.architectures) & set(archs) else 0
        if extra and setter_ids is None and rule.default_explicit:
            setter_ids = tuple(int(v) for v in expr.evaluate(rule.default_ids, N=num_layers, D=draft_layers))
        if extra and setter_ids is not None:
            setter_ids = tuple(i + extra for i in setter_ids)
        if failure is None and setter_ids is not None:
            failure = next((f for c in rule.id_checks
                            if (f := c.fails(ids if c.as_read and ids is not None else setter_ids, num_layers, source))),
                           None)
        indices, case = rule.indices(setter_ids, num_layers, draft_layers)
        if extra:
            case = f"{extra:+d} for a {'/'.join(shift.architectures)} draft, then {case}"
        if place_shift:
            case = f"{place_key(source)} {place_shift:+d} as read, then {case}"
        if failure is None:
            failure = rule.failure_for(indices, num_layers)
        if failure is None and self.ids_accepted is not None:  # the trainer's own check, on its default too
            checked = (list(ids) if ids is not None
                       else [int(v) for v in expr.evaluate(rule.default_ids, N=num_layers, D=draft_layers)])
            if not expr.evaluate(self.ids_accepted.when, ids=checked, N=num_layers):
                failure = self.ids_accepted.format(ids=checked)
        lo, hi = rule.reachable(num_layers)
        placed = [num_layers + k if rule.wraps_negative and -num_layers <= k < 0 else k for k in indices]
        kept = [k for k in placed if lo <= k <= hi]
        dropped = tuple(k for k, p in zip(indices, placed) if not lo <= p <= hi)
        if self.order == "ascending":
            kept = sorted(set(kept))
        if failure is None and not kept and self.empty_capture is not None:
            failure = self.empty_capture
        if failure is None and rule.count_check is not None and kept and len(kept) != len(indices):
            failure = rule.count_check.format(captured=len(kept), expected=len(indices))
        width = self.aux_count(draft_config) if self.width_check is not None else None
        if failure is None and width is not None and kept and len(kept) != width:
            failure = self.width_check.format(captured=len(kept), expected=width)
        feeds = tuple((k, what) for k in kept if (what := rule.feed(k, num_layers)) is not None)
        return Wiring(self.name, self.kind, self.version, rule.name, ids, source, case, tuple(indices),
                      tuple(State(k, normed=rule.final_normed and k == num_layers) for k in kept), dropped, ignored,
                      failure, feeds)

    @property
    def capture_name(self) -> str:
        """The drafts this convention captures for, in words: "EAGLE-3", "DFlash", "DSpark", "DFlash / DSpark"."""
        if "eagle3" in self.draft_kinds:
            return "EAGLE-3"
        return " / ".join({"dflash": "DFlash", "dspark": "DSpark"}[k] for k in self.draft_kinds)

    def kind_places(self) -> tuple[str, ...]:
        """The places that hold ids of the drafts this convention describes (IDS_NOT_READ looks at these)."""
        if "eagle3" in self.draft_kinds:
            return EAGLE_PLACES
        return ("dflash_target_layer_ids", "target_layer_ids", "dspark_target_layer_ids", "dspark_config_ids")

    def aux_count(self, draft_config: Mapping[str, Any]) -> int:
        """How many aux states the engine's draft side sizes fc for."""
        zero_ok = self.draft_class is not None and self.draft_class.aux_count_empty == "zero"
        draft_config = self.view(draft_config)
        for item in self.aux_count_from:
            if isinstance(item, int):
                return item
            if item in ID_PLACES:
                ids = read_ids(draft_config, item)
                # `len(layer_ids) if layer_ids else 3`: an empty list counts as absent (llama_eagle3 of both
                # engines); kimi_k25_eagle3.py:55-59 tests `is None`, so an empty list sizes fc for 0
                if ids or (zero_ok and ids is not None):
                    return len(ids)
            elif draft_config.get(item) is not None:
                return int(draft_config[item])
        return 3

    def flag(self, name: str, draft_config: Mapping[str, Any]) -> Any:
        """The value of a draft flag as this convention uses it (None: not honoured -> off)."""
        rule = self.draft_flags.get(name)
        if rule is None or not rule.honoured:
            return False
        return rule.value(self.view(draft_config), name)

    def to_json(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "title": self.title, "version": self.version,
               "source": self.source, "path": self.path}
        if self.captures_through:
            out["captures_through"] = dict(self.captures_through)
        if self.draft_class is not None or self.draft_class_how:
            out["draft_class"] = self.draft_class.name if self.draft_class else None
            out["draft_class_how"] = self.draft_class_how
        return out


# ---------------------------------------------------------------------------- loading

def _req(data: Mapping, key: str, where: str) -> Any:
    if key not in data:
        raise BadConvention(f"{where}: missing key {key!r}")
    return data[key]


def _check_types(data: Mapping[str, Any], where: str) -> None:
    """Refuse wrong JSON types in a convention file before anything reads it (one line naming the key)."""

    def bad(key: str, want: str, value: Any) -> BadConvention:
        return BadConvention(f"{where}: {key} must be {want}, got {shown(value)}")

    def strings(key: str, value: Any) -> None:
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise bad(key, "a list of strings", value)

    for key in ("name", "kind", "title", "source", "fallback_rule", "order", "generated_by"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise bad(key, "a string", data[key])
    if data.get("version") is not None and not isinstance(data["version"], (str, int, float)):
        raise bad("version", "a string", data["version"])
    if "notes" in data:
        strings("notes", data["notes"])
    ids_from = data.get("ids_from", [])
    if not (isinstance(ids_from, list) and all(isinstance(e, (str, dict)) for e in ids_from)):
        raise bad("ids_from", "a list of place names or {place, ...} objects", ids_from)
    for i, entry in enumerate(ids_from):
        if isinstance(entry, dict) and not isinstance(entry.get("place"), str):
            raise bad(f"ids_from[{i}].place", "a place name", entry.get("place"))
    for key in ("rules", "architectures", "unsupported", "draft_flags"):
        if key in data and not isinstance(data[key], dict):
            raise bad(key, "a JSON object", data[key])
    for key in ("architectures", "unsupported"):
        for k, v in (data.get(key) or {}).items():
            if not isinstance(v, str):
                raise bad(f"{key}.{k}", "a string", v)
    for name, rule in (data.get("rules") or {}).items():
        rw = f"rules.{name}"
        if not isinstance(rule, dict):
            raise bad(rw, "a JSON object", rule)
        for key in ("default_ids", "min_capture", "max_capture", "source"):
            if key in rule and not isinstance(rule[key], str):
                raise bad(f"{rw}.{key}", "a string (an expression)" if key != "source" else "a string", rule[key])
        if "default_shift" in rule and not (isinstance(rule["default_shift"], int) and not isinstance(rule["default_shift"], bool)
                                            and abs(rule["default_shift"]) <= 1000):
            raise bad(f"{rw}.default_shift", "an integer", rule["default_shift"])
        cases = rule.get("explicit", [])
        if not isinstance(cases, list):
            raise bad(f"{rw}.explicit", "a list of cases", cases)
        for i, case in enumerate(cases):
            if not isinstance(case, dict):
                raise bad(f"{rw}.explicit[{i}]", "a JSON object", case)
            shift = case.get("shift", 0)
            if not (isinstance(shift, int) and not isinstance(shift, bool) and abs(shift) <= 1000):
                raise bad(f"{rw}.explicit[{i}].shift", "an integer", shift)
            for key in ("when", "source"):
                if case.get(key) is not None and not isinstance(case[key], str):
                    raise bad(f"{rw}.explicit[{i}].{key}", "a string", case[key])
    for name, flag in (data.get("draft_flags") or {}).items():
        if not isinstance(flag, dict):
            raise bad(f"draft_flags.{name}", "a JSON object", flag)
        if "honoured" in flag and not isinstance(flag["honoured"], bool):
            raise bad(f"draft_flags.{name}.honoured", "true or false", flag["honoured"])
    aux = data.get("aux_count_from")
    if aux is not None and not (isinstance(aux, list) and all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 64) for v in aux)):
        raise bad("aux_count_from", "a list of config keys, id places and a final integer", aux)
    if "fc_skip_when_width_equals_hidden" in data and not isinstance(data["fc_skip_when_width_equals_hidden"], bool):
        raise bad("fc_skip_when_width_equals_hidden", "true or false", data["fc_skip_when_width_equals_hidden"])


def parse_convention(data: Mapping[str, Any], path: str) -> Convention:
    where = path
    _check_types(data, where)
    if data.get("schema") != SCHEMA:
        raise BadConvention(f"{where}: 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    known = {"schema", "name", "kind", "title", "version", "source", "ids_from", "order", "rules", "architectures",
             "fallback_rule", "unsupported", "aux_count_from", "draft_flags", "fc_skip_when_width_equals_hidden",
             "notes", "generated_by", "tree_drafts", "empty_capture", "rope_scaling", "captures_through",
             "draft_classes", "draft_class_fallback", "speculators_loader", "no_aux", "ids_accepted",
             "draft_kinds", "id_checks", "width_check"}
    extra = set(data) - known
    if extra:
        raise BadConvention(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    kind = _req(data, "kind", where)
    if kind not in ("trainer", "engine"):
        raise BadConvention(f"{where}: kind must be 'trainer' or 'engine', got {kind!r}")
    id_reads = tuple(_id_read(entry, where) for entry in _req(data, "ids_from", where))
    ids_from = tuple(r.place for r in id_reads)
    order = data.get("order", "ascending")
    if order not in ("ascending", "config"):
        raise BadConvention(f"{where}: order must be 'ascending' or 'config', got {order!r}")
    rules = {}
    for name, r in _req(data, "rules", where).items():
        rw = f"{where}: rules.{name}"
        extra = set(r) - {"default_ids", "default_shift", "explicit", "min_capture", "max_capture", "source",
                          "index_failures", "wraps_negative", "count_check", "feeds", "default_explicit",
                          "id_checks", "draft_shift", "final_normed"}
        if extra:
            raise BadConvention(f"{rw}: unknown key(s) {', '.join(sorted(extra))}")
        cases = tuple(ExplicitCase(shift=int(c.get("shift", 0)), when=c.get("when"), source=c.get("source", ""))
                      for c in r.get("explicit", [{"shift": 0}]))
        feeds = []
        for f in r.get("feeds", []):
            if not isinstance(f, Mapping) or "when" not in f or "what" not in f:
                raise BadConvention(f"{rw}: feeds: each entry needs 'when' and 'what'")
            feeds.append(Feed(f["when"], f["what"], f.get("source", "")))
        rule = CaptureRule(name=name, default_ids=_req(r, "default_ids", rw), default_shift=int(r.get("default_shift", 0)),
                           explicit=cases, min_capture=str(r.get("min_capture", "0")),
                           max_capture=str(r.get("max_capture", "N")), source=r.get("source", ""),
                           index_failures=tuple(_failure(f, f"{rw}: index_failures", with_when=True)
                                                for f in r.get("index_failures", [])),
                           wraps_negative=bool(r.get("wraps_negative", False)),
                           count_check=_failure(r["count_check"], f"{rw}: count_check") if r.get("count_check") else None,
                           feeds=tuple(feeds), default_explicit=bool(r.get("default_explicit", False)),
                           id_checks=_id_checks(r.get("id_checks", []), f"{rw}: id_checks"),
                           draft_shift=_draft_shift(r.get("draft_shift"), f"{rw}: draft_shift"),
                           final_normed=bool(r.get("final_normed", False)))
        try:  # validate every expression once, at load time
            for probe_n in (30, 61):
                for d in (1, 3):
                    rule.indices(None, probe_n, d)
                for c in rule.id_checks:
                    c.fails((0, probe_n), probe_n, "")
                rule.reachable(probe_n)
                rule.indices((1, probe_n // 2, probe_n - 4), probe_n)
                rule.failure_for((0, -1, probe_n), probe_n)
                rule.feed(1, probe_n)
        except expr.ExprError as e:
            raise BadConvention(f"{rw}: {e}") from None
        except (TypeError, ValueError) as e:  # an expression of the wrong kind, e.g. default_ids giving an int
            raise BadConvention(f"{rw}: an expression gives a value of the wrong kind ({shown(str(e), 80)[1:-1]})") from None
        rules[name] = rule
    archs = dict(data.get("architectures", {}))
    fallback = data.get("fallback_rule")
    for arch, rname in list(archs.items()) + ([("fallback_rule", fallback)] if fallback else []):
        if rname not in rules:
            raise BadConvention(f"{where}: {arch} names rule {rname!r}, which is not in 'rules'")
    flags = _flag_rules(data.get("draft_flags", {}), where)
    rope = tuple(data.get("rope_scaling", ("linear", "llama3", "yarn")))
    if not set(rope) <= set(ROPE_TYPES):
        raise BadConvention(f"{where}: rope_scaling: known types are {', '.join(ROPE_TYPES)}, got {list(rope)}")
    through = data.get("captures_through")
    if through is not None and (not isinstance(through, Mapping) or not {"engine", "version"} <= set(through)):
        raise BadConvention(f"{where}: captures_through must be an object with 'engine' and 'version'")
    return Convention(tree_drafts=_tree_drafts(data.get("tree_drafts"), where),
        name=_req(data, "name", where), kind=kind, title=data.get("title", data["name"]),
        version=str(_req(data, "version", where)), source=_req(data, "source", where), ids_from=ids_from,
        order=order, rules=rules, architectures=archs, fallback_rule=fallback,
        unsupported=dict(data.get("unsupported", {})),
        aux_count_from=tuple(data.get("aux_count_from", ("num_aux_hidden_states", "nested", "top_level", 3))),
        draft_flags=flags, fc_skip_when_width_equals_hidden=bool(data.get("fc_skip_when_width_equals_hidden", False)),
        notes=tuple(data.get("notes", ())), path=path, id_reads=id_reads, rope_scaling=rope,
        captures_through=dict(through) if through else None,
        draft_classes=parse_draft_classes(data.get("draft_classes"), where, _flag_rules),
        draft_class_fallback=data.get("draft_class_fallback"),
        speculators_loader=parse_loader(data.get("speculators_loader"), where),
        no_aux=_no_aux(data.get("no_aux"), where),
        ids_accepted=(_failure(data["ids_accepted"], f"{where}: ids_accepted", with_when=True)
                      if data.get("ids_accepted") else None),
        empty_capture=_failure(data["empty_capture"], f"{where}: empty_capture") if data.get("empty_capture") else None,
        draft_kinds=_draft_kinds(data.get("draft_kinds", ["eagle3"]), where),
        id_checks=_id_checks(data.get("id_checks", []), f"{where}: id_checks"),
        width_check=_failure(data["width_check"], f"{where}: width_check") if data.get("width_check") else None)



def _flag_rules(data: Any, where: str) -> dict[str, FlagRule]:
    if not isinstance(data, Mapping):
        raise BadConvention(f"{where}: draft_flags must be a JSON object")
    flags = {}
    for fname, f in data.items():
        if fname not in DRAFT_FLAGS:
            raise BadConvention(f"{where}: draft_flags: unknown flag {fname!r} (known: {', '.join(DRAFT_FLAGS)})")
        if not isinstance(f, Mapping):
            raise BadConvention(f"{where}: draft_flags.{fname} must be a JSON object")
        semantics = f.get("semantics")
        if semantics is not None and (fname != "norm_output" or semantics not in NORM_OUTPUT_SEMANTICS):
            raise BadConvention(f"{where}: draft_flags.{fname}.semantics: only norm_output takes one of "
                                f"{', '.join(NORM_OUTPUT_SEMANTICS)}, got {semantics!r}")
        read = tuple(f.get("read", FLAG_PLACES))
        if not read or set(read) - set(FLAG_PLACES):
            raise BadConvention(f"{where}: draft_flags.{fname}.read: places are {', '.join(FLAG_PLACES)}, got {list(read)}")
        flags[fname] = FlagRule(honoured=bool(f.get("honoured", True)), default=f.get("default", False), read=read,
                                any_of=tuple(f.get("or", ())),
                                default_if_present=tuple(dict(f.get("default_if_present", {})).items()),
                                semantics=semantics)
    return flags

def _no_aux(data: Any, where: str) -> dict | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise BadConvention(f"{where}: no_aux must be an object of strings {{\"what\", \"source\"}}")
    return dict(data)


def _id_read(entry: Any, where: str) -> IdRead:
    if isinstance(entry, str):
        entry = {"place": entry}
    if not isinstance(entry, Mapping) or set(entry) - {"place", "shift", "empty", "verbatim_model_types", "unless_truthy",
                                                                 "only_with"}:
        raise BadConvention(f"{where}: ids_from: an entry is a place name or "
                            f"{{place, shift, empty, verbatim_model_types}}, got {entry!r}")
    place = entry.get("place")
    if place not in ID_PLACES:
        raise BadConvention(f"{where}: ids_from: unknown place {place!r} (known: {', '.join(ID_PLACES)})")
    empty = entry.get("empty", "read")
    if empty not in ("read", "absent"):
        raise BadConvention(f"{where}: ids_from: empty must be 'read' or 'absent', got {empty!r}")
    return IdRead(place, int(entry.get("shift", 0)), empty, tuple(entry.get("verbatim_model_types", ())),
                  entry.get("unless_truthy"), entry.get("only_with"))


def _failure(data: Any, where: str, with_when: bool = False) -> EngineFailure:
    keys = {"error", "message", "at"} | ({"when"} if with_when else set())
    if not isinstance(data, Mapping) or keys - set(data):
        raise BadConvention(f"{where}: needs {', '.join(sorted(keys))}")
    if data["at"] not in ("start-up", "first forward"):
        raise BadConvention(f"{where}: at must be 'start-up' or 'first forward', got {data['at']!r}")
    return EngineFailure(str(data["error"]), str(data["message"]), data["at"], data.get("source", ""),
                         data.get("when"))


DRAFT_KINDS = ("eagle3", "dflash", "dspark")


def _draft_kinds(data: Any, where: str) -> tuple[str, ...]:
    if not (isinstance(data, list) and data and all(k in DRAFT_KINDS for k in data)):
        raise BadConvention(f"{where}: draft_kinds must be a non-empty list of {', '.join(DRAFT_KINDS)}, got {shown(data)}")
    return tuple(data)


def _id_checks(data: Any, where: str) -> tuple[IdCheck, ...]:
    if not isinstance(data, list):
        raise BadConvention(f"{where}: a list of checks, got {shown(data)}")
    out = []
    for entry in data:
        failure = _failure(entry, where, with_when=True)
        places = entry.get("places", [])
        if not (isinstance(places, list) and all(p in ID_PLACES for p in places)):
            raise BadConvention(f"{where}: places must be a list of id places, got {shown(places)}")
        try:
            expr.parse(failure.when)
        except expr.ExprError as e:
            raise BadConvention(f"{where}: {e}") from None
        out.append(IdCheck(failure.when, failure, tuple(places), bool(entry.get("as_read", False))))
    return tuple(out)


def _draft_shift(data: Any, where: str) -> DraftShift | None:
    if data is None:
        return None
    if not (isinstance(data, Mapping) and isinstance(data.get("architectures"), list)
            and all(isinstance(a, str) for a in data["architectures"])
            and isinstance(data.get("shift"), int) and not isinstance(data.get("shift"), bool)
            and abs(data["shift"]) <= 1000):
        raise BadConvention(f"{where}: needs architectures (a list of strings) and shift (an integer)")
    return DraftShift(tuple(data["architectures"]), int(data["shift"]), str(data.get("source", "")))


def _tree_drafts(data: Any, where: str) -> TreeDrafts | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or set(data) - {"attention", "source"} or "attention" not in data:
        raise BadConvention(f"{where}: tree_drafts must be {{\"attention\": ..., \"source\": ...}}")
    mode = data["attention"]
    if mode is not None and mode not in TREE_ATTENTION_MODES:
        raise BadConvention(f"{where}: tree_drafts.attention: unknown mode {mode!r} "
                            f"(known: {', '.join(TREE_ATTENTION_MODES)}, or null for chains only)")
    return TreeDrafts(mode, str(data.get("source", "")))


def load_convention_file(path: str | os.PathLike) -> Convention:
    p = Path(path)
    if not p.is_file():
        raise UnknownConvention(f"{p}: no such convention file")
    data = read_json_object(p, BadConvention, "a convention file")
    try:
        return parse_convention(data, str(p))
    except AuditError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:  # a value of a type _check_types misses
        raise BadConvention(f"{p}: malformed convention file ({type(e).__name__}: {shown(str(e), 100)[1:-1]})") from None


def probes_dir() -> Path:
    """The built-in convention files: ``$EAGLE_AUDIT_PROBES``, the repo's ``probes/`` (checkout or
    editable install), or the copy a wheel installs under ``<prefix>/share/eagle-audit/probes``."""
    env = os.environ.get("EAGLE_AUDIT_PROBES")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parent.parent / "probes", Path(sys.prefix) / "share/eagle-audit/probes"]
    for c in candidates:
        if c.is_dir() and any(c.glob("*.json")):
            return c
    raise BadConvention("no built-in convention files found (looked in: " + ", ".join(map(str, candidates)) + ")")


def builtin_conventions(kind: str) -> dict[str, Convention]:
    """The registry of one kind ("trainer" or "engine"): name -> convention."""
    out = {}
    for f in sorted(probes_dir().glob("*.json")):
        c = load_convention_file(f)
        if c.kind == kind:
            out[c.name] = c
    return out


def get_convention(name_or_path: str, kind: str) -> Convention:
    """A convention by registry name, or from a file path (an in-house pipeline)."""
    if name_or_path.endswith(".json") or os.sep in name_or_path:
        conv = load_convention_file(name_or_path)
    else:
        registry = builtin_conventions(kind)
        conv = registry.get(name_or_path)
        if conv is None:
            valid = ", ".join(registry)
            raise UnknownConvention(f"unknown {kind} {name_or_path!r}", hint=f"known {kind}s: {valid}; or a path to a convention .json file")
    if conv.kind != kind:
        raise UnknownConvention(f"{name_or_path} is a {conv.kind}, not a {kind} ({conv.path})")
    return conv
