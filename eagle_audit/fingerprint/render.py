"""Render a FingerprintResult to the terminal (rich). Receives result objects only."""

from __future__ import annotations


from rich.console import Console
from rich.table import Table

from ..render import render_findings_and_fix
from .result import FingerprintResult


def _iv(mean, low, high, nd=3) -> str:
    return f"{mean:+.{nd}f} [{low:+.{nd}f}, {high:+.{nd}f}]"


def render_fingerprint(result: FingerprintResult, console: Console) -> None:
    t, d = result.target, result.draft
    console.print(f"[bold]target[/] {t['name']}  ({t['architecture']}, N={t['num_layers']}, hidden {t['hidden_size']})")
    console.print(f"[bold]draft[/]  {d['path']}  ({d['layout']} layout, fc {d['fc_in']}->{d['fc_out']})")
    line = (f"[bold]scored[/] {result.scored_tokens} tokens ({result.coverage:.0%} of positions have their target "
            f"token in the draft vocabulary)")
    if result.top1 is not None:
        line += (f"; best wiring: top-1 {result.top1:.3f}, mean log-prob {result.logprob:.3f}; fed no target "
                 f"information: top-1 {result.baseline_top1:.3f}")
    console.print(line, highlight=False)
    table = Table(title="per slot: best state, runner-up, margin (best - runner-up, 99% paired bootstrap interval)")
    for col in ("slot", "state", "runner-up", "log-prob margin", "top-1 margin", ""):
        table.add_column(col, justify="right" if col == "slot" else "left")
    for s in result.slots:
        lp = _iv(s.margin.mean, s.margin.low, s.margin.high) if s.margin else "-"
        t1 = _iv(s.top1_margin.mean, s.top1_margin.low, s.top1_margin.high) if s.top1_margin else "-"
        mark = "[yellow]not separated[/]" if s.ambiguous else "[green]separated[/]"
        table.add_row(str(s.index), s.text(), s.runner_up.label() if s.runner_up else "-", lp, t1, mark)
    console.print(table)
    if result.inferred is not None:
        wiring = "[" + ", ".join(s.text() for s in result.slots) + "]"
        console.print(f"[bold]trained wiring (from the weights)[/] {wiring}  confidence: {result.confidence}",
                      highlight=False)
    else:
        console.print("[bold red]no wiring can be read off the weights for this target[/]", highlight=False)
    for c in result.claims:
        states = "[" + ", ".join(s.label() for s in c.states) + "]" if c.states is not None else "-"
        agree = {True: "[green]agrees[/]", False: "[red]differs[/]", None: "[dim]n/a[/]"}[c.agrees]
        console.print(f"  {c.source:<20} {states:<28} {agree} {c.note}", highlight=False)
    render_findings_and_fix(result.findings, result.fix, console)
    color = "green" if result.verdict == "match" else "red"
    console.print(f"[bold {color}]verdict: {result.verdict}[/] ({len(result.errors)} error(s))")
