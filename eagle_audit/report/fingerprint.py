"""The fingerprint part of a report: the measured wiring, per-slot margins, the claims, and the figure of
per-slot agreement against every state (the inferred cell outlined)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import figures
from .acceptance import as_dict, number


@dataclass(frozen=True)
class FpSlotView:
    index: int
    text: str  # "B15" or "B15 or B16"
    runner_up: str
    margin: str  # log-prob margin with its interval
    top1_margin: str
    css: str  # "ok" (separated) | "warn" (ambiguous)


@dataclass(frozen=True)
class ClaimView:
    source: str
    states: str
    agrees: str  # "agrees" | "differs" | "not told" | "n/a"
    css: str
    note: str


@dataclass(frozen=True)
class FingerprintView:
    wiring: str  # "[B0, B3, B15 or B16]" or "none"
    confidence: str
    summary: str
    slots: list[FpSlotView]
    claims: list[ClaimView]
    figure: figures.Heatmap | None
    figure_note: str


def _iv(mean: Any, interval: Any, nd: int = 3) -> str:
    m = number(mean)
    if m is None:
        return "-"
    if isinstance(interval, list) and len(interval) == 2 and all(number(x) is not None for x in interval):
        return f"{m:+.{nd}f} [{number(interval[0]):+.{nd}f}, {number(interval[1]):+.{nd}f}]"
    return f"{m:+.{nd}f}"


def fingerprint_view(doc: Mapping[str, Any]) -> FingerprintView:
    inf = as_dict(doc.get("inferred"))
    raw_slots = [s for s in inf.get("slots") or [] if isinstance(s, Mapping)]
    confidence = str(inf.get("confidence") or "?")
    # confidence "none" (REPRESENTATION_MISMATCH): only the slots fc's weights name alone are in inferred.states
    trusted = bool(inf.get("states")) and confidence != "none"
    guarded = list(inf.get("states") or [])
    named = [i < len(guarded) and guarded[i] is not None for i in range(len(raw_slots))]
    slots = [FpSlotView(int(s.get("index", i)), str(s.get("text") or s.get("best") or "?")
                        if trusted or named[i] else "undetermined",
                        str(s.get("runner_up") or "-"), _iv(s.get("margin"), s.get("interval")),
                        _iv(s.get("top1_margin"), s.get("top1_interval")),
                        "muted" if not (trusted or named[i]) else ("warn" if s.get("ambiguous") else "ok"))
             for i, s in enumerate(raw_slots)]
    wiring = ("[" + ", ".join(s.text for s in slots) + "]" + ("" if trusted else " (fc's weights alone)")
              if trusted or any(named) else "none")
    top1, base = number(inf.get("top1")), number(as_dict(inf.get("baseline")).get("top1"))
    summary = f"trained wiring read off the weights: {wiring} (confidence {confidence})"
    if top1 is not None:
        summary += f" · top-1 agreement {top1:.3f}" + (f" (no target information: {base:.3f})" if base is not None else "")
    claims = []
    for c in doc.get("claims") or []:
        if not isinstance(c, Mapping):
            continue
        states = c.get("states")
        told = "not told" if states and trusted else "n/a"  # scored, but the weights cannot tell
        agrees = {True: ("agrees", "ok"), False: ("differs", "bad")}.get(c.get("agrees"), (told, "muted"))
        claims.append(ClaimView(str(c.get("source", "?")), "[" + ", ".join(map(str, states)) + "]" if states else "-",
                                agrees[0], agrees[1], str(c.get("note") or "")))
    figure, note = None, "No per-slot table in this result."
    agreement = as_dict(doc.get("agreement"))
    states = [str(s) for s in agreement.get("states") or []]
    rows = agreement.get("top1") or []
    if states and rows:
        declared = [str(s.get("label", s)) if isinstance(s, Mapping) else str(s)
                    for s in as_dict(doc.get("declared")).get("states") or []]
        row_slots = []
        for r, row in enumerate(rows):
            s = raw_slots[r] if r < len(raw_slots) else {}
            cands = [str(x) for x in ([s.get("best")] if s.get("undetermined") else s.get("candidates") or [s.get("best")])
                     if x]
            dec = declared[r] if r < len(declared) else None
            differs = dec is not None and dec not in cands and not s.get("undetermined")
            row_slots.append({"index": r, "trained": str(s.get("text") or s.get("best") or f"row {r}"),
                              "served": dec if differs else None, "verdict": "", "outlined": cands,
                              "note": (f"declared {dec}" if dec else "not declared") + (" · differs" if differs else ""),
                              "css": "bad" if differs else ("warn" if s.get("ambiguous") else "ok")})
        values = [[number(v) if number(v) is not None else float("nan") for v in row] for row in rows]
        figure = figures.heatmap(states, values, row_slots, value="top-1", keys=("from the weights", "declared instead"),
                                 verbs=("inferred", "declared"))
        note = ""
    return FingerprintView(wiring, confidence, summary, slots, claims, figure, note)
