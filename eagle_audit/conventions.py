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
    ``eagle_aux_hidden_state_layer_ids``, ``nested_layer_ids`` = ``eagle_config.layer_ids``.
    Empty: the ids are hard-coded and nothing is read.
``order``
    ``"ascending"`` (capture-loop order; duplicates collapse) or ``"config"`` (as listed).
``rules``
    named capture rules: ``default_ids`` (expression in N), ``default_shift``, ``explicit`` (ordered
    cases ``{"when": expr over ids and N, "shift": int}``; the first whose ``when`` holds applies),
    ``min_capture`` / ``max_capture`` (expressions: capture indices outside are silently never
    captured), ``source``.
``architectures``
    target architecture -> rule name; ``fallback_rule`` for the rest (``null``: unsupported);
    ``unsupported``: architecture -> why.
``aux_count_from``
    how the draft side sizes ``fc``: keys tried in order, then an int default.
``draft_flags``
    per draft flag: ``{"honoured": bool, "default": value when absent}``.
``fc_skip_when_width_equals_hidden``
    the engine runs ``fc`` only when the incoming width differs from the draft hidden size.
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
from .errors import BadConvention, UnknownArchitecture, UnknownConvention
from .jsonfile import read_json_object
from .states import State

SCHEMA = "eagle-audit/convention/1"

#: Where the draft's ids live, by place name: the keys to follow from the config's top level.
ID_PLACES: dict[str, tuple[str, ...]] = {
    "nested": ("eagle_config", "eagle_aux_hidden_state_layer_ids"),
    "top_level": ("eagle_aux_hidden_state_layer_ids",),
    "nested_layer_ids": ("eagle_config", "layer_ids"),
}
DRAFT_FLAGS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")


def place_key(place: str) -> str:
    """The dotted config key of an id place, for messages and fixes."""
    return ".".join(ID_PLACES[place]) if place in ID_PLACES else place


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

    def indices(self, ids: tuple[int, ...] | None, num_layers: int) -> tuple[tuple[int, ...], str]:
        """Capture indices (= boundaries) for ``ids`` (None: the default), and which case applied."""
        if ids is None:
            base = [int(v) for v in expr.evaluate(self.default_ids, N=num_layers)]
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

    def to_json(self) -> dict:
        return {
            "convention": self.convention, "kind": self.kind, "version": self.version, "rule": self.rule,
            "ids": list(self.ids) if self.ids is not None else None, "ids_source": self.ids_source,
            "case": self.case, "capture_indices": list(self.capture_indices),
            "states": [s.to_json() for s in self.states], "dropped": list(self.dropped),
            "ignored_places": list(self.ignored_places),
        }


@dataclass(frozen=True)
class Convention:
    name: str
    kind: str
    title: str
    version: str
    source: str
    ids_from: tuple[str, ...]
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

    def rule_for(self, architecture: str) -> CaptureRule:
        if architecture in self.unsupported:
            raise UnknownArchitecture(
                f"{self.title} {self.version} has no EAGLE-3 capture for {architecture}: {self.unsupported[architecture]}")
        name = self.architectures.get(architecture, self.fallback_rule)
        if name is None:
            known = ", ".join(sorted(self.architectures)) or "none"
            raise UnknownArchitecture(
                f"{self.title} {self.version} ({self.path}) declares no capture rule for architecture {architecture}",
                hint=f"declared: {known}")
        return self.rules[name]

    def resolve(self, draft_config: Mapping[str, Any], architecture: str, num_layers: int,
                override_ids: tuple[int, ...] | None = None) -> Wiring:
        rule = self.rule_for(architecture)
        ids, source = None, "default"
        if override_ids is not None:
            ids, source = tuple(override_ids), "override"
        else:
            for place in self.ids_from:
                found = read_ids(draft_config, place)
                if found is not None:
                    ids, source = found, place
                    break
        ignored = tuple(p for p in ID_PLACES if p not in self.ids_from and read_ids(draft_config, p) is not None)
        indices, case = rule.indices(ids, num_layers)
        lo, hi = rule.reachable(num_layers)
        kept = [k for k in indices if lo <= k <= hi]
        dropped = tuple(k for k in indices if not lo <= k <= hi)
        if self.order == "ascending":
            kept = sorted(set(kept))
        return Wiring(self.name, self.kind, self.version, rule.name, ids, source, case, tuple(indices),
                      tuple(State(k) for k in kept), dropped, ignored)

    def aux_count(self, draft_config: Mapping[str, Any]) -> int:
        """How many aux states the engine's draft side sizes fc for."""
        for item in self.aux_count_from:
            if isinstance(item, int):
                return item
            if item in ID_PLACES:
                ids = read_ids(draft_config, item)
                if ids is not None:
                    return len(ids)
            elif draft_config.get(item) is not None:
                return int(draft_config[item])
        return 3

    def flag(self, name: str, draft_config: Mapping[str, Any]) -> Any:
        """The value of a draft flag as this convention uses it (None: not honoured -> off)."""
        rule = self.draft_flags.get(name)
        if rule is None or not rule.honoured:
            return False
        value = _lookup_flag(draft_config, name)
        return rule.default if value is None else value

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "title": self.title, "version": self.version,
                "source": self.source, "path": self.path}


def _lookup_flag(config: Mapping[str, Any], name: str) -> Any:
    if name in config:
        return config[name]
    nested = config.get("eagle_config")
    if isinstance(nested, Mapping) and name in nested:
        return nested[name]
    return None


# ---------------------------------------------------------------------------- loading

def _req(data: Mapping, key: str, where: str) -> Any:
    if key not in data:
        raise BadConvention(f"{where}: missing key {key!r}")
    return data[key]


def parse_convention(data: Mapping[str, Any], path: str) -> Convention:
    where = path
    if data.get("schema") != SCHEMA:
        raise BadConvention(f"{where}: 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    known = {"schema", "name", "kind", "title", "version", "source", "ids_from", "order", "rules", "architectures",
             "fallback_rule", "unsupported", "aux_count_from", "draft_flags", "fc_skip_when_width_equals_hidden",
             "notes", "generated_by", "tree_drafts"}
    extra = set(data) - known
    if extra:
        raise BadConvention(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    kind = _req(data, "kind", where)
    if kind not in ("trainer", "engine"):
        raise BadConvention(f"{where}: kind must be 'trainer' or 'engine', got {kind!r}")
    ids_from = tuple(_req(data, "ids_from", where))
    for place in ids_from:
        if place not in ID_PLACES:
            raise BadConvention(f"{where}: ids_from: unknown place {place!r} (known: {', '.join(ID_PLACES)})")
    order = data.get("order", "ascending")
    if order not in ("ascending", "config"):
        raise BadConvention(f"{where}: order must be 'ascending' or 'config', got {order!r}")
    rules = {}
    for name, r in _req(data, "rules", where).items():
        rw = f"{where}: rules.{name}"
        extra = set(r) - {"default_ids", "default_shift", "explicit", "min_capture", "max_capture", "source"}
        if extra:
            raise BadConvention(f"{rw}: unknown key(s) {', '.join(sorted(extra))}")
        cases = tuple(ExplicitCase(shift=int(c.get("shift", 0)), when=c.get("when"), source=c.get("source", ""))
                      for c in r.get("explicit", [{"shift": 0}]))
        rule = CaptureRule(name=name, default_ids=_req(r, "default_ids", rw), default_shift=int(r.get("default_shift", 0)),
                           explicit=cases, min_capture=str(r.get("min_capture", "0")),
                           max_capture=str(r.get("max_capture", "N")), source=r.get("source", ""))
        try:  # validate every expression once, at load time
            for probe_n in (30, 61):
                rule.indices(None, probe_n)
                rule.reachable(probe_n)
                rule.indices((1, probe_n // 2, probe_n - 4), probe_n)
        except expr.ExprError as e:
            raise BadConvention(f"{rw}: {e}") from None
        rules[name] = rule
    archs = dict(data.get("architectures", {}))
    fallback = data.get("fallback_rule")
    for arch, rname in list(archs.items()) + ([("fallback_rule", fallback)] if fallback else []):
        if rname not in rules:
            raise BadConvention(f"{where}: {arch} names rule {rname!r}, which is not in 'rules'")
    flags = {}
    for fname, f in data.get("draft_flags", {}).items():
        if fname not in DRAFT_FLAGS:
            raise BadConvention(f"{where}: draft_flags: unknown flag {fname!r} (known: {', '.join(DRAFT_FLAGS)})")
        flags[fname] = FlagRule(honoured=bool(f.get("honoured", True)), default=f.get("default", False))
    return Convention(tree_drafts=_tree_drafts(data.get("tree_drafts"), where),
        name=_req(data, "name", where), kind=kind, title=data.get("title", data["name"]),
        version=str(_req(data, "version", where)), source=_req(data, "source", where), ids_from=ids_from,
        order=order, rules=rules, architectures=archs, fallback_rule=fallback,
        unsupported=dict(data.get("unsupported", {})),
        aux_count_from=tuple(data.get("aux_count_from", ("num_aux_hidden_states", "nested", "top_level", 3))),
        draft_flags=flags, fc_skip_when_width_equals_hidden=bool(data.get("fc_skip_when_width_equals_hidden", False)),
        notes=tuple(data.get("notes", ())), path=path)


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
    return parse_convention(read_json_object(p, BadConvention, "a convention file"), str(p))


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
