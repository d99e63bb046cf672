"""Render a CheckResult to the terminal (rich): a section per stage (each the command's own rendering),
then the one verdict. Receives result objects only."""

from __future__ import annotations

from rich.console import Console
from rich.rule import Rule

from .result import EVIDENCE, CheckResult

TITLES = {"static": "static audit (configs)", "captured": "captured comparison (layers)",
          "served": "served states (the running engine)",
          "fingerprint": "fingerprint (draft weights)", "accept_rate": "accept-rate cost"}


def _renderer(name: str):
    if name in ("static", "captured"):
        from ..layers.render import render_layers

        return render_layers
    if name == "served":
        return render_served
    if name == "fingerprint":
        from ..fingerprint.render import render_fingerprint

        return render_fingerprint
    from ..accept.render import render_accept

    return render_accept


def render_served(result, console: Console) -> None:
    from rich.table import Table

    from ..layers.render import render_findings_and_fix
    from ..terminal import print_table

    console.print(f"[bold]server[/] {result.kind} {result.url}: {result.requests} requests, {result.tokens} tokens",
                  highlight=False)
    console.print(f"[bold]compared with[/] {result.launch}", highlight=False)
    table = Table(title="each served slot against the local capture of every boundary")
    for col in ("slot", "rules say", "served equals", "cosine", "min cosine", "rel. error", "verdict"):
        table.add_column(col)
    for m in result.matches:
        table.add_row(str(m.slot), m.expected.label(), m.matched.label() if m.matched else f"none (nearest "
                      f"{m.nearest.label()} {m.nearest_cosine:.4f})", f"{m.cosine:.4f}", f"{m.min_cosine:.4f}",
                      f"{m.rel_error:.4f}", m.verdict)
    print_table(console, table)
    render_findings_and_fix(result.findings, None, console)
    for n in result.notes:
        console.print(f"note: {n}", style="dim", highlight=False)
    console.print(f"verdict: {result.verdict} ({len(result.errors)} error(s))", highlight=False)


def render_check(result: CheckResult, console: Console, verbose: bool = False) -> None:
    for st in result.stages:
        console.print(Rule(f"stage {st.name}: {TITLES[st.name]}", style="dim"))
        if not st.ran:
            console.print(f"not run: {st.why}", highlight=False)
            continue
        if st.name == "static" and result.stage("captured").ran:
            console.print(f"verdict: {st.verdict} ({len(st.result.errors)} error(s)); the captured comparison below "
                          "measures the same wiring", highlight=False)
            continue
        if st.name == "fingerprint":
            _renderer(st.name)(st.result, console, verbose=verbose)
        else:
            _renderer(st.name)(st.result, console)
    console.print(Rule("check", style="bold"))
    v = result.verdict
    color = "green" if v.status == "match" and not v.gate else "red"
    for p in v.problems:
        where = f" slot {p.slot}" if p.slot is not None else ""
        console.print(f"[red]{p.code}[/]{where}: {p.what} [dim](shown by {', '.join(p.shown_by)})[/]",
                      highlight=False)
    if v.sure:
        console.print(f"how sure: {v.sure}, {EVIDENCE[v.sure]}", highlight=False)
    if v.cost:
        c = v.cost
        tr = "-" if c["trained"] is None else f"{c['trained']:.2f}"
        sv = "-" if c["served"] is None else f"{c['served']:.2f}"
        loss = "" if c["loss"] is None else f" (loss {c['loss']:.2f})"
        console.print(f"cost: accept length {tr} trained, {sv} served{loss}", highlight=False)
    if v.fix is not None and v.fix.possible and v.fix.patch:
        import json

        console.print(f"fix for {v.fix.engine} (stage {v.fix_from}): merge into config.json {json.dumps(v.fix.patch)}",
                      highlight=False)
    elif v.fix is not None:
        console.print(f"fix for {v.fix.engine} (stage {v.fix_from}): no config change fixes it: {v.fix.explanation}",
                      highlight=False)
    if result.source:
        c = result.source["counts"]
        console.print(f"[dim]source {result.source['spec']['origin']}: {c['loads']} load, {c['forwards']} "
                      f"teacher-forced forwards ({c['memo_hits']} reused), {c['generations']} prompts continued "
                      f"({c['generation_hits']} reused)[/]", highlight=False)
    console.print(f"[bold {color}]verdict: {v.summary()}[/]", highlight=False)
