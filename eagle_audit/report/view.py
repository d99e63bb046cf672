"""The view of a report: result JSON reduced to what the templates show, in the order they show it.

Templates receive only a :class:`View` (plain strings, numbers and figure geometry); every decision
about wording, order and colour is made here, every piece of markup is in ``templates/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, Mapping

from ..provenance import engine_label
from ..version import __version__
from ..layers.result import CODES
from . import figures
from .acceptance import AcceptView, accept_view, as_dict, as_list, label, number
from .check import CheckView, check_view
from .fingerprint import FingerprintView, fingerprint_view
from .results import normalize

#: the note a layers finding carries when its fix is the config change shown once for all findings
_SEE_FIX = "see the fix below"


@dataclass(frozen=True)
class FindingView:
    code: str
    severity: str  # "error" | "warning"
    slot: int | None
    what: str
    why: str
    fix: str | None  # None: the config change (FixView) is the fix
    meaning: str  # the code's documented sentence


@dataclass(frozen=True)
class FixView:
    engine: str
    possible: bool
    explanation: str
    patch_json: str | None  # the JSON merge patch for the draft's config.json, pretty-printed
    key: str | None
    ids: list | None
    resolved: list[str]


@dataclass(frozen=True)
class SlotView:
    index: int
    trained: str
    served: str
    cosine: str
    nearest: str
    verdict: str
    css: str  # "ok" | "warn" | "bad"


@dataclass(frozen=True)
class WiringView:
    side: str  # "trained" | "served"
    convention: str
    version: str
    rule: str
    ids: str
    ids_source: str
    case: str
    states: str
    notes: list[str]


@dataclass(frozen=True)
class Row:
    name: str
    value: str
    code: bool = False  # monospace


@dataclass(frozen=True)
class ProvenanceView:
    title: str
    rows: list[Row]
    command: str | None
    notes: list[str]


@dataclass(frozen=True)
class View:
    title: str
    has_layers: bool  # a layers audit is in the report (findings, fix, slots, heatmap, wirings)
    verdict: str | None  # "match" | "mismatch": the layers verdict, else the accept-rate one; None if neither
    headline: str  # the verdict as the heading says it
    summary: str
    accept_line: str  # the accept lengths in one line, beside a layers summary
    target: str
    target_detail: str
    draft: str
    draft_detail: str
    engine: str | None
    findings: list[FindingView]
    errors: int
    warnings: int
    fix: FixView | None
    slots: list[SlotView]
    wiring: list[WiringView]
    heatmap: figures.Heatmap | None
    heatmap_note: str | None
    accept: AcceptView | None
    provenance: list[ProvenanceView]
    fingerprint: FingerprintView | None = None
    check: CheckView | None = None  # a check result: its verdict and a row per stage, above the rest
    generator: str = field(default=f"eagle-audit {__version__}")


def build_view(data: Mapping[str, Any]) -> View:
    doc = normalize(data)
    if doc.get("fingerprint") is not None:
        return _fingerprint_page(doc["fingerprint"])
    layers, accept = doc["layers"], doc["accept_rate"]
    subject = layers if layers is not None else accept
    target = as_dict(subject.get("target"))
    draft = as_dict(subject.get("draft"))
    tname, dname = short_name(target.get("name")), short_name(draft.get("path") or draft.get("name"))
    findings: list[FindingView] = []
    fix = None
    slots: list[SlotView] = []
    wiring: list[WiringView] = []
    heat, heat_note, engine, verdict = None, None, None, None
    if layers is not None:
        verdict = layers["verdict"]
        findings = _findings(layers["findings"])
        fix = _fix(layers.get("fix"))
        slots = [_slot(s, findings) for s in layers["slots"] if isinstance(s, Mapping)]
        wiring = [w for w in (_wiring("trained", layers.get("trained")), _wiring("served", layers.get("served"))) if w]
        heat, heat_note = _heatmap(layers, slots)
        rules = as_dict(as_dict(layers.get("provenance")).get("engine_rules"))
        served = as_dict(layers.get("served"))
        engine = (engine_label({"engine_rules": {**rules, "title": rules.get("title") or served.get("convention"),
                                                 "version": rules.get("version") or served.get("version")}})
                  if rules or served else None)  # 'SGLang 0.5.6 (given)': the release and how it was chosen
        if fix is not None and engine and fix.engine == served.get("convention"):
            fix = replace(fix, engine=engine)
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    acc_view = accept_view(accept) if accept is not None else None
    if layers is not None:
        summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
        if engine:
            summary += f" · served by {engine}"
        accept_line = acc_view.summary if acc_view is not None else ""
    else:
        verdict = acc_view.verdict
        summary = acc_view.summary or "no accept lengths in this result"
        accept_line = ""
    provenance = []
    if layers is not None:
        provenance.append(_provenance("layers audit", layers))
    if accept is not None:
        provenance.append(_provenance("accept-rate", accept))
    head = verdict if layers is not None else "accept rate" + (f": {verdict}" if verdict else "")
    view = View(
        title=f"eagle-audit: {head} · {tname} ← {dname}", has_layers=layers is not None, verdict=verdict,
        headline=head, summary=summary, accept_line=accept_line, target=tname, target_detail=_target_detail(target),
        draft=dname,
        draft_detail=_draft_detail(draft), engine=engine, findings=findings, errors=errors, warnings=warnings, fix=fix,
        slots=slots, wiring=wiring, heatmap=heat, heatmap_note=heat_note, accept=acc_view, provenance=provenance)
    if doc.get("check") is not None:
        cv = check_view(doc["check"])
        view = replace(view, check=cv, verdict=cv.status, headline=f"check: {cv.status}",
                       title=f"eagle-audit check: {cv.status} · {tname} ← {dname}")
    return view


def _fingerprint_page(fp: Mapping[str, Any]) -> View:
    target, draft = as_dict(fp.get("target")), as_dict(fp.get("draft"))
    tname, dname = short_name(target.get("name")), short_name(draft.get("path") or draft.get("name"))
    findings = _findings(fp["findings"])
    fix = _fix(fp.get("fix"))
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    fv = fingerprint_view(fp)
    head = f"fingerprint: {fp['verdict']}"
    summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    return View(title=f"eagle-audit: {head} · {tname} ← {dname}", has_layers=False, verdict=str(fp["verdict"]),
                headline=head, summary=summary, accept_line=fv.summary, target=tname,
                target_detail=_target_detail(target), draft=dname, draft_detail=_draft_detail(draft), engine=None,
                findings=findings, errors=errors, warnings=warnings, fix=fix, slots=[], wiring=[], heatmap=None,
                heatmap_note=None, accept=None, provenance=[_provenance("fingerprint", fp)], fingerprint=fv)


def short_name(name: Any) -> str:
    """The last part of a path or hub id, without a .gguf suffix: what a person calls the model."""
    if not name:
        return "?"
    base = PurePath(str(name).rstrip("/")).name or str(name)
    return base[: -len(".gguf")] if base.lower().endswith(".gguf") else base


def _verdict_css(verdict: str, severity: str | None = None) -> str:
    """A slot's mark: the severity of the findings about it (an ``error`` finding is ``bad``, the same 🔴 / ❌ as the
    findings list, a ``warning`` ``warn``), else its verdict (``ok``; an offset no finding names is ``warn``)."""
    if severity == "error":
        return "bad"
    if severity == "warning":
        return "warn"
    if verdict == "ok":
        return "ok"
    return "warn" if verdict.startswith("offset") else "bad"


def _slot_severity(index: Any, findings: list[FindingView]) -> str | None:
    sev = {f.severity for f in findings if f.slot == index and isinstance(index, int)}
    return "error" if "error" in sev else ("warning" if "warning" in sev else None)


def _findings(raw: list) -> list[FindingView]:
    out = []
    for f in raw:
        if not isinstance(f, Mapping):
            continue
        fix = f.get("fix")
        out.append(FindingView(code=str(f.get("code", "?")), severity=str(f.get("severity", "error")),
                               slot=f.get("slot"), what=str(f.get("what", "")), why=str(f.get("why", "")),
                               fix=None if not fix or fix == _SEE_FIX else str(fix),
                               meaning=CODES.get(str(f.get("code")), "")))
    return sorted(out, key=lambda f: f.severity != "error")  # errors first, otherwise as found


def _fix(raw: Any) -> FixView | None:
    if not isinstance(raw, Mapping):
        return None
    patch = raw.get("patch") or None
    return FixView(engine=str(raw.get("engine", "?")), possible=bool(raw.get("possible")),
                   explanation=str(raw.get("explanation", "")),
                   patch_json=pretty_json(patch) if patch else None, key=raw.get("key"),
                   ids=raw.get("ids"), resolved=[label(s) for s in as_list(raw.get("resolved"))])


def pretty_json(obj: Any, indent: int = 2, _level: int = 0, width: int = 100) -> str:
    """JSON for people: an object or list that fits in ``width`` columns on one line stays on one line (ids read
    as ids, a nested ``eagle_config`` whole); a longer object puts its one-line items side by side, filling lines
    of ``width``, and each longer item on lines of its own. Valid JSON, equal to ``obj`` when parsed."""
    pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
    flat = json.dumps(obj)
    if len(pad) + len(flat) <= width or not isinstance(obj, (Mapping, list)) or not obj:
        return flat
    if isinstance(obj, Mapping):
        items = [f"{json.dumps(str(k))}: {pretty_json(v, indent, _level + 1, width)}" for k, v in obj.items()]
    else:
        items = [pretty_json(x, indent, _level + 1, width) for x in obj]
    lines: list[str] = []
    for n, item in enumerate(items):
        text = item + ("," if n < len(items) - 1 else "")
        if "\n" not in item and lines and "\n" not in lines[-1] and len(lines[-1]) + 1 + len(text) <= width:
            lines[-1] += " " + text
        else:
            lines.append(inner + text)
    brackets = "{}" if isinstance(obj, Mapping) else "[]"
    return brackets[0] + "\n" + "\n".join(lines) + "\n" + pad + brackets[1]


def _slot(s: Mapping, findings: list[FindingView] = ()) -> SlotView:
    cos, ncos = number(s.get("cosine")), number(s.get("nearest_cosine"))
    nearest = label(s.get("nearest")) if s.get("nearest") is not None else "-"
    if nearest != "-" and ncos is not None:
        nearest += f" ({ncos:.3f})"
    verdict = str(s.get("verdict", "?"))
    index = s.get("index", 0)
    return SlotView(index=index if isinstance(index, int) and not isinstance(index, bool) else -1, trained=label(s.get("trained")), served=label(s.get("served")),
                    cosine=f"{cos:.3f}" if cos is not None else "-", nearest=nearest, verdict=verdict,
                    css=_verdict_css(verdict, _slot_severity(index, list(findings))))


def _wiring(side: str, raw: Any) -> WiringView | None:
    if not isinstance(raw, Mapping):
        return None
    ids = raw.get("ids")
    notes = []
    if raw.get("dropped"):
        notes.append(f"ids never captured (dropped): {raw['dropped']}")
    if as_list(raw.get("ignored_places")):
        notes.append(f"ids present but not read from: {', '.join(map(str, raw['ignored_places']))}")
    version = str(raw.get("version") or "")
    return WiringView(side=side, convention=str(raw.get("convention", "?")), version="" if version == "-" else version,
                      rule=str(raw.get("rule", "")), ids=str(ids) if ids is not None else "-",
                      ids_source=str(raw.get("ids_source", "")), case=str(raw.get("case", "")),
                      states=", ".join(label(s) for s in as_list(raw.get("states"))) or "-", notes=notes)


def _heatmap(layers: Mapping, slots: list[SlotView]) -> tuple[figures.Heatmap | None, str | None]:
    heat = layers.get("heatmap")
    if (not isinstance(heat, Mapping) or not as_list(heat.get("states")) or not as_list(heat.get("rows"))
            or not all(isinstance(row, list) for row in heat["rows"])):
        static = as_dict(layers.get("provenance")).get("static")
        why = "a static audit: no target weights were loaded" if static else "captured without the full scan"
        return None, f"No heatmap in this result ({why})."
    states = [str(s) for s in heat["states"]]
    rows = [[number(v) if number(v) is not None else float("nan") for v in row] for row in heat["rows"]]
    by_index = {s.index: s for s in slots}
    trained_states = [label(s) for s in as_list(as_dict(layers.get("trained")).get("states"))]
    row_slots = []
    for r in range(len(rows)):
        slot = by_index.get(r)
        trained = slot.trained if slot is not None and slot.trained != "-" else (
            trained_states[r] if r < len(trained_states) else f"row {r}")
        row_slots.append({"index": r, "trained": trained,
                          "served": slot.served if slot is not None and slot.served != "-" else None,
                          "verdict": slot.verdict if slot is not None else "?",
                          "css": slot.css if slot is not None else "muted"})
    return figures.heatmap(states, rows, row_slots), None


def _target_detail(t: Mapping) -> str:
    parts = [t.get("architecture"), f"N={t['num_layers']}" if t.get("num_layers") else None,
             f"hidden {t['hidden_size']}" if t.get("hidden_size") else None]
    return ", ".join(str(p) for p in parts if p)


def _draft_detail(d: Mapping) -> str:
    parts = [f"{d['kind']} draft" if d.get("kind") not in (None, "eagle3") else None,
             f"{d['layout']} layout" if d.get("layout") else None,
             f"fc {d['fc_in']}→{d['fc_out']}" if d.get("fc_in") and d.get("fc_out") else None]
    return ", ".join(str(p) for p in parts if p)


def _rules(r: Any) -> str | None:
    if not isinstance(r, Mapping):
        return None
    head = " ".join(str(x) for x in (r.get("title") or r.get("name"), r.get("version")) if x)
    return f"{head} — {r['source']}" if r.get("source") else head


def _provenance(title: str, doc: Mapping) -> ProvenanceView:
    p, t, d = as_dict(doc.get("provenance")), as_dict(doc.get("target")), as_dict(doc.get("draft"))
    rows = [Row("eagle-audit", str(p.get("eagle_audit", "?"))), Row("torch", str(p.get("torch", "?"))),
            Row("transformers", str(p.get("transformers", "?")))]
    if p.get("python"):
        rows.append(Row("python", str(p["python"])))
    for name, key in (("engine rules", "engine_rules"), ("trainer rules", "trainer_rules")):
        text = _rules(p.get(key))
        if text:
            rows.append(Row(name, text))
    if t:
        rows.append(Row("target", str(t.get("name", "?"))))
        if t.get("source") and t.get("source") != t.get("name"):
            rows.append(Row("target weights", str(t["source"]), code=True))
        if t.get("config_sha256"):
            rows.append(Row("target config sha256", str(t["config_sha256"]), code=True))
    if d:
        rows.append(Row("draft", str(d.get("path") or d.get("name") or "?")))
        if d.get("config_sha256"):
            rows.append(Row("draft config sha256", str(d["config_sha256"]), code=True))
    for name, key in (("device", "device"), ("dtype", "dtype"), ("prompts", "prompts"), ("prompts used", "num_prompts"),
                      ("tokens", "tokens")):
        if p.get(key) is not None:
            rows.append(Row(name, str(p[key])))
    if p.get("static"):
        rows.append(Row("mode", "static (config only, no weights loaded)"))
    known = {"eagle_audit", "torch", "transformers", "python", "engine_rules", "trainer_rules", "device", "dtype",
             "prompts", "num_prompts", "tokens", "static", "command", "notes"}
    for key, value in p.items():  # keys a later result adds are shown, not dropped
        if key not in known and value is not None and not isinstance(value, (dict, list)):
            rows.append(Row(key.replace("_", " "), str(value)))
    notes = [str(n) for n in as_list(p.get("notes")) if n]
    command = p.get("command")
    return ProvenanceView(title=title, rows=rows, command=str(command) if command is not None else None, notes=notes)
