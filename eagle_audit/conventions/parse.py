"""Parse a convention file (``"schema": "eagle-audit/convention/1"``; the format is the package docstring,
:mod:`eagle_audit.conventions`) into a :class:`~.convention.Convention`, refusing wrong types, unknown keys and
bad expressions with one line that names the file and key."""

from __future__ import annotations

from typing import Any, Mapping

from .. import expr
from ..errors import BadConvention, shown
from .convention import Convention
from .draft_classes import parse_draft_classes, parse_loader, parse_rename
from .places import DRAFT_FLAGS, FLAG_PLACES, ID_PLACES
from .rules import (TREE_ATTENTION_MODES, CaptureRule, DraftRefusal, DraftShift, EngineFailure, ExplicitCase, Feed,
                    FlagRule, IdCheck, IdRead, TreeDrafts)

SCHEMA = "eagle-audit/convention/1"
NORM_OUTPUT_SEMANTICS = ("carried", "head")
ROPE_TYPES = ("linear", "llama3", "yarn", "dynamic", "mrope", "default")


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
             "draft_classes", "draft_class_fallback", "speculators_loader", "draft_architecture_rename", "no_aux", "ids_accepted",
             "draft_kinds", "id_checks", "width_check", "refuses", "draft_weights"}
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
        draft_architecture_rename=parse_rename(data.get("draft_architecture_rename"), where),
        no_aux=_no_aux(data.get("no_aux"), where),
        ids_accepted=(_failure(data["ids_accepted"], f"{where}: ids_accepted", with_when=True)
                      if data.get("ids_accepted") else None),
        empty_capture=_failure(data["empty_capture"], f"{where}: empty_capture") if data.get("empty_capture") else None,
        draft_kinds=_draft_kinds(data.get("draft_kinds", ["eagle3"]), where),
        id_checks=_id_checks(data.get("id_checks", []), f"{where}: id_checks"),
        width_check=_failure(data["width_check"], f"{where}: width_check") if data.get("width_check") else None,
        refuses=_refusals(data.get("refuses", []), f"{where}: refuses"),
        draft_weights=_draft_weights(data.get("draft_weights"), f"{where}: draft_weights"))



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


def _draft_kinds(data: Any, where: str) -> tuple[str, ...]:
    from ..kinds import KINDS as DRAFT_KINDS  # the one list of kinds (a kind registered later is known here too)

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


def _refusals(data: Any, where: str) -> tuple[DraftRefusal, ...]:
    from ..kinds import KINDS as DRAFT_KINDS

    if not isinstance(data, list):
        raise BadConvention(f"{where}: a list of refusals, got {shown(data)}")
    out = []
    for entry in data:
        failure = _failure(entry, where)
        extra = set(entry) - {"kinds", "architectures", "mixed_layer_types", "error", "message", "at", "source"}
        if extra:
            raise BadConvention(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        kinds, archs = entry.get("kinds", []), entry.get("architectures", [])
        mixed = entry.get("mixed_layer_types", False)
        if not isinstance(mixed, bool):
            raise BadConvention(f"{where}: mixed_layer_types must be true or false, got {shown(mixed)}")
        if not (isinstance(kinds, list) and all(k in DRAFT_KINDS for k in kinds)):
            raise BadConvention(f"{where}: kinds must be a list of {', '.join(DRAFT_KINDS)}, got {shown(kinds)}")
        if not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise BadConvention(f"{where}: architectures must be a list of strings, got {shown(archs)}")
        if not (kinds or archs or mixed):
            raise BadConvention(f"{where}: a refusal names kinds, architectures or mixed_layer_types")
        out.append(DraftRefusal(failure, tuple(kinds), tuple(archs), mixed))
    return tuple(out)


#: how an engine loads an EAGLE-3 draft's own embed_tokens / lm_head (vLLM before PR #28549: the target's)
WEIGHT_POLICIES = ("target", "target_if_same_shape", "own_if_in_checkpoint", "own")


def _draft_weights(data: Any, where: str) -> dict[str, dict[str, str]] | None:
    """``{"embed_tokens" | "lm_head": {"policy": one of WEIGHT_POLICIES, "source": "file:line: ..."}}``."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise BadConvention(f"{where}: a JSON object of embed_tokens / lm_head, got {shown(data)}")
    out = {}
    for weight, entry in data.items():
        if weight not in ("embed_tokens", "lm_head"):
            raise BadConvention(f"{where}: unknown weight {weight!r} (known: embed_tokens, lm_head)")
        if not isinstance(entry, Mapping) or set(entry) - {"policy", "source"} \
                or entry.get("policy") not in WEIGHT_POLICIES or not isinstance(entry.get("source", ""), str):
            raise BadConvention(f"{where}.{weight}: needs policy (one of {', '.join(WEIGHT_POLICIES)}) and a source "
                                f"string, got {shown(entry)}")
        out[weight] = {"policy": entry["policy"], "source": entry.get("source", "")}
    return out


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
