"""Render a CheckResult to the terminal (rich): a section per stage (each the command's own rendering),
then the one verdict. Receives result objects only."""

from __future__ import annotations

from pathlib import Path

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
    """The check in one screen (:func:`render_brief`); ``verbose``: every stage as its own command renders it
    (the fingerprint's evidence in full), then the verdict. The reports keep everything either way."""
    if not verbose:
        return render_brief(result, console)
    seen: set[str] = set()
    fixes: list = []
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
            _renderer(st.name)(st.result, console, verbose=True, seen=seen, fixes=fixes)
        elif st.name in ("static", "captured"):
            _renderer(st.name)(st.result, console, verbose=True, seen=seen, fixes=fixes)
        elif st.name == "accept_rate":
            _renderer(st.name)(st.result, console, verbose=True, seen=seen)
        else:
            _renderer(st.name)(st.result, console)
    console.print(Rule("check", style="bold"))
    _verdict(result, console, verbose=True)


def _stages_line(result: CheckResult) -> str:
    words = []
    for st in result.stages:
        if not st.ran:
            words.append(f"{st.name} [dim]not run[/]")
        elif st.name == "fingerprint":
            words.append(f"fingerprint {st.result.verdict} (wiring read: {st.result.confidence})")
        else:
            words.append(f"{st.name} {st.verdict}")
    return "stages: " + ", ".join(words)


def _brief_what(text: str, draft: str | None) -> str:
    """A problem's words for the one screen: engine source references left out, the draft's folder named
    relative to its parent (the whole: -v, JSON, reports), cut at the first ``; ``."""
    import re

    from ..terminal import strip_sources

    if draft:
        parent = str(Path(draft).parent).rstrip("/") + "/"
        text = text.replace(parent, "")
    text = strip_sources(text)
    return re.split(r"(?<=[a-z)\]0-9'])[;] ", text, maxsplit=1)[0]


def render_brief(result: CheckResult, console: Console) -> None:
    """The check at 80 columns: the inputs, the stages, the slots as the target's states show them, what is
    wrong, what it costs, the fix (and ``--write-fixed-config``), how sure, the verdict."""
    from rich.markup import escape
    from rich.table import Table

    from ..terminal import print_copyable, print_table

    v = result.verdict
    layers = next((s for s in (result.stage("captured"), result.stage("static")) if s.ran), None)
    draft = None
    if layers is not None:
        r = layers.result
        t, d = r.target, r.draft
        draft = str(d["path"])
        from ..layers.render import engine_label

        console.print(f"[bold]target[/] {escape(Path(str(t['name'])).name)} ({t['architecture']}, N={t['num_layers']})",
                      highlight=False)
        console.print(f"[bold]draft[/]  {escape(Path(draft).name)} ({d['layout']} layout), trained by "
                      f"{r.trained.convention}{' (assumed)' if r.suggestions else ''}, served by "
                      f"{escape(engine_label(r))}", highlight=False)
    console.print(_stages_line(result), highlight=False)
    if layers is not None and layers.result.slots:
        r = layers.result
        measured = any(sl.cosine is not None for sl in r.slots)  # the static stage alone measures no cosine
        table = Table()
        for col in ("slot", "trained", "served", "cosine", "verdict") if measured else ("slot", "trained", "served",
                                                                                        "verdict"):
            table.add_column(col, justify="right" if col in ("slot", "cosine") else "left")
        for sl in r.slots:
            cells = [str(sl.index), sl.trained.label() if sl.trained else "-", sl.served.label() if sl.served else "-"]
            if measured:
                cells.append(f"{sl.cosine:.3f}" if sl.cosine is not None else "-")
            table.add_row(*cells, f"[{'green' if sl.verdict == 'ok' else 'red'}]{sl.verdict}[/]")
        print_table(console, table)
        console.print(f"[dim]Bk: the state entering layer k (B0 the embedding, B{r.target['num_layers']} the last "
                      "layer's output)" + ("; cosine: trained vs served state, token mean" if measured else "")
                      + "[/]", highlight=False)
    if v.problems:
        console.print("[bold]what is wrong[/]", highlight=False)
        for p in v.problems:
            where = f" slot {p.slot}" if p.slot is not None else ""
            console.print(f"  [red]{p.code}[/]{where}: {escape(_brief_what(p.what, draft))} "
                          f"[dim]({', '.join(p.shown_by)})[/]", highlight=False)
    if v.cost:
        c = v.cost
        acc = result.stage("accept_rate").result
        tr = "-" if c["trained"] is None else f"{c['trained']:.2f}"
        sv = "-" if c["served"] is None else f"{c['served']:.2f}"
        loss = "" if c["loss"] is None else f", loss {c['loss']:.2f}"
        console.print(f"[bold]cost[/] accept length {tr} trained, {sv} served{loss} (simulated on the first "
                      f"{_prompts(acc)})", highlight=False)
        alone = [a for a in c.get("attribution") or () if a.get("accept_length") is not None]
        if alone:
            console.print("  served with one slot fixed: " + ", ".join(
                f"slot {a['slot']} {a['accept_length']:.2f}" for a in alone), highlight=False)
    if v.fix is not None:
        import json

        where = f"[bold]fix[/] for {escape(_fix_engine(result, v))} (from the {v.fix_from} stage)"
        if v.fix.possible and v.fix.patch:
            console.print(f"{where}: merge into the draft's config.json, or write a fixed copy with "
                          "`write_fixed_config`:", highlight=False)
            print_copyable(console, json.dumps(v.fix.patch))
        else:
            console.print(f"{where}: no config change fixes it: {escape(_brief_what(v.fix.explanation, draft))}",
                          highlight=False)
    _verdict(result, console, verbose=False)


def _prompts(acc) -> str:
    """``8 prompts of the built-in chat set`` / ``of FILE``: the prompts a cost was measured on."""
    p = acc.provenance
    src = p.get("prompts") or "built-in chat set"
    return f"{p.get('num_prompts', '?')} prompts of the {src}" if src == "built-in chat set" else \
        f"{p.get('num_prompts', '?')} prompts of {Path(str(src)).name}"


def _fix_engine(result: CheckResult, v) -> str:
    layers = result.stage("captured") if result.stage("captured").ran else result.stage("static")
    if layers.ran and v.fix.engine == layers.result.served.convention:
        from ..layers.render import engine_label

        return engine_label(layers.result)
    return v.fix.engine


def _verdict(result: CheckResult, console: Console, verbose: bool) -> None:
    from rich.markup import escape

    v = result.verdict
    color = "green" if v.status == "match" and not v.gate else "red"
    if verbose:
        for p in v.problems:
            where = f" slot {p.slot}" if p.slot is not None else ""
            console.print(f"[red]{p.code}[/]{where}: {escape(p.what)} [dim](shown by {', '.join(p.shown_by)})[/]",
                          highlight=False)
        if result.source:
            c = result.source["counts"]
            console.print(f"[dim]source {result.source['spec']['origin']}: {c['loads']} load, {c['forwards']} "
                          f"teacher-forced forwards ({c['memo_hits']} reused), {c['generations']} prompts continued "
                          f"({c['generation_hits']} reused)[/]", highlight=False)
    if v.grade:
        console.print(f"[bold]how sure[/] {v.grade}: {escape(v.grade_why)}", highlight=False)
    console.print(f"[bold {color}]verdict: {escape(v.summary())}[/]", highlight=False)
    if not verbose:
        console.print(f"[dim]every stage in full: `verbose`; everything: `json_out`, `report`[/]", highlight=False)
