"""The view of a ``check`` result's own part: the one verdict and a row per stage (the layers and
accept-rate stages render below it as in their own reports)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .acceptance import as_dict

TITLES = {"static": "static audit (configs)", "captured": "captured comparison (layers)",
          "served": "served states (the running engine)",
          "fingerprint": "fingerprint (draft weights)", "accept_rate": "accept-rate cost"}


@dataclass(frozen=True)
class StageView:
    name: str
    title: str
    ran: bool
    verdict: str  # "match" | "mismatch" | "not run"
    detail: str  # why it did not run, or what it rests on
    css: str  # "ok" | "bad" | "warn"


@dataclass(frozen=True)
class CheckView:
    status: str
    summary: str
    problems: list[str]
    sure: str | None
    cost: str | None
    fix: str | None
    gate: list[str]
    stages: list[StageView]
    source: str | None


def check_view(doc: Mapping[str, Any]) -> CheckView:
    v = as_dict(doc.get("verdict"))
    fp = doc.get("fingerprint")
    stages = []
    for s in doc.get("stages") or []:
        s = as_dict(s)
        name = str(s.get("name"))
        ran = bool(s.get("ran"))
        verdict = str(s.get("verdict") or ("ran" if ran else "not run"))
        detail = str(s.get("evidence") or "") if ran else str(s.get("why") or "")
        if ran and name == "fingerprint" and isinstance(fp, Mapping):
            detail = f"trained wiring {fp.get('wiring')} (confidence {fp.get('confidence')}); {detail}"
        css = "warn" if not ran else ("ok" if verdict == "match" else "bad")
        stages.append(StageView(name, TITLES.get(name, name), ran, verdict, detail, css))
    problems = []
    for p in v.get("problems") or []:
        p = as_dict(p)
        where = f" slot {p.get('slot')}" if p.get("slot") is not None else ""
        problems.append(f"{p.get('code')}{where}: {p.get('what')} (shown by {', '.join(p.get('shown_by') or [])})")
    cost = as_dict(v.get("cost"))
    cost_line = None
    if cost.get("trained") is not None and cost.get("served") is not None:
        cost_line = (f"accept length {cost['trained']:.2f} trained, {cost['served']:.2f} served "
                     f"(loss {cost['trained'] - cost['served']:.2f})")
    fix = as_dict(v.get("fix"))
    fix_line = None
    if fix:
        fix_line = (f"{v.get('fix_from')}, {fix.get('engine')}: merge into config.json {json.dumps(fix.get('patch'))}"
                    if fix.get("possible") and fix.get("patch") else f"no config change for {fix.get('engine')}: "
                    f"{fix.get('explanation')}")
    src = as_dict(doc.get("source"))
    counts, spec = as_dict(src.get("counts")), as_dict(src.get("spec"))
    source = (f"{spec.get('origin')}: {counts.get('loads')} load, {counts.get('forwards')} teacher-forced forwards "
              f"({counts.get('memo_hits')} reused), {counts.get('generations')} prompts continued "
              f"({counts.get('generation_hits')} reused)") if src else None
    sure = (f"{v.get('grade')}: {v.get('grade_why')}" if v.get("grade") else  # the grade that follows the evidence
            f"{v.get('sure')}: {v.get('evidence')}" if v.get("sure") else None)
    return CheckView(str(v.get("status") or "?"), str(v.get("summary") or ""), problems, sure, cost_line, fix_line,
                     [str(g) for g in v.get("gate") or []], stages, source)
