"""Render a LayersResult to the terminal (rich). Receives result objects only."""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from ..terminal import print_table
from .result import LayersResult

_VERDICT_STYLE = {"ok": "green", "missing": "red", "extra": "red"}


def render_findings_and_fix(findings, fix, console: Console, brief: bool = False) -> None:
    """The findings, one per line with why and fix, then the fix panel (shared by layers and fingerprint);
    ``brief``: without the why."""
    for f in findings:
        color = "red" if f.severity == "error" else "yellow"
        where = f" slot {f.slot}" if f.slot is not None else ""
        console.print(f"[{color}]{f.code}[/]{where}: {f.what}", highlight=False)
        if not brief:
            console.print(f"   why: {f.why}", highlight=False, style="dim")
        if f.fix != "see the fix below":
            console.print(f"   fix: {f.fix}", highlight=False)
    if fix is not None:
        body = fix.explanation
        if fix.possible and fix.patch:
            body += "\n\nMerge into config.json:\n" + json.dumps(fix.patch)
        console.print(Panel(body, title=f"fix for {fix.engine}" if fix.possible else f"no config fix for {fix.engine}",
                            border_style="green" if fix.possible else "red"))


def render_layers(result: LayersResult, console: Console) -> None:
    t, d = result.target, result.draft
    n = t["num_layers"]
    console.print(f"[bold]target[/] {t['name']}  ({t['architecture']}, N={n}, hidden {t['hidden_size']})")
    console.print(f"[bold]draft[/]  {d['path']}  ({d['layout']} layout, fc {d['fc_in']}->{d['fc_out']})")
    tr, sv = result.trained, result.served
    console.print(f"[bold]trained[/] {tr.convention}: ids {list(tr.ids) if tr.ids is not None else '-'} "
                  f"({tr.ids_source}; {tr.case})")
    console.print(f"[bold]served[/]  {sv.convention} {sv.version}: ids {list(sv.ids) if sv.ids is not None else '-'} "
                  f"({sv.ids_source}; {sv.case}; rule {sv.rule})")
    table = Table(title="slots (B0 = embedding, Bk = output of layer k-1, B{N} pre-norm, +norm = post-norm)".replace("{N}", str(n)))
    for col in ("slot", "trained", "served", "cosine", "nearest servable", "verdict"):
        table.add_column(col, justify="right" if col in ("slot", "cosine") else "left")
    for s in result.slots:
        style = _VERDICT_STYLE.get(s.verdict, "yellow" if s.verdict.startswith("offset") else "red")
        near = f"{s.nearest.label()} ({s.nearest_cosine:.3f})" if s.nearest is not None else "-"
        table.add_row(str(s.index), s.trained.label() if s.trained else "-", s.served.label() if s.served else "-",
                      f"{s.cosine:.3f}" if s.cosine is not None else "-", near, f"[{style}]{s.verdict}[/]")
    print_table(console, table)
    render_findings_and_fix(result.findings, result.fix, console)
    # result.suggestions also travel in provenance notes ("suggestion: ..."), printed once below and in reports
    for note in result.provenance.get("notes") or ():
        console.print(f"note: {note}", highlight=False, style="dim")
    color = "green" if result.verdict == "match" else "red"
    console.print(f"[bold {color}]verdict: {result.verdict}[/] "
                  f"({len(result.errors)} error(s), {len(result.findings) - len(result.errors)} warning(s))")
