"""Render a LayersResult to the terminal (rich). Receives result objects only."""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from ..conventions.convention import release_label
from ..errors import param
from ..terminal import print_table
from .result import LayersResult

_VERDICT_STYLE = {"ok": "green", "missing": "red", "extra": "red"}


def engine_label(result) -> str:
    """'SGLang 0.5.6 (given)': the engine release the result's served side speaks for, and how it was chosen
    (from its provenance's engine rules)."""
    from ..provenance import engine_label as label

    return label(result.provenance) or release_label(result.served.convention, result.served.version)


def verdict_lines(result, own: str, counts: str) -> list[str]:
    """The verdict, naming the engine release it speaks for and how it was chosen; where the result holds the
    verdict on other engines (none named) or other releases (a range), one line each after the first, whose
    verdict is the worst. ``own``: this engine release's verdict, ``counts``: its findings in words."""
    label = engine_label(result)
    color = lambda v: "green" if v == "match" else "red"  # noqa: E731
    if not result.engines:
        return [f"[bold {color(own)}]verdict: {own}[/] on {label}: {counts}"]
    rules = result.provenance.get("engine_rules") or {}
    how = (rules.get("release") or {}).get("how") or ""
    if how == "assumed":
        lines = [f"[bold {color(result.verdict)}]verdict: {result.verdict}[/] (no engine named: each engine at its "
                 "newest release; the worst counts)",
                 f"  {label}: [{color(own)}]{own}[/], {counts} (above)"]
        for e in result.engines:
            lines.append(f"  {e.label}: [{color(e.verdict)}]{e.verdict}[/]" + _codes(e)
                         + (f" ({param('engine', e.engine)}: its slots and fix)" if e.verdict == "mismatch" else ""))
        return lines
    rows = sorted([(rules.get("version"), own, tuple(f.code for f in result.errors), "")]
                  + [(e.version, e.verdict, e.errors, e.refused) for e in result.engines], key=lambda r: _key(r[0]))
    groups: list[list] = []
    for v, verdict, codes, refused in rows:
        if groups and groups[-1][1:] == [verdict, tuple(dict.fromkeys(codes)), refused]:
            groups[-1][0].append(v)
        else:
            groups.append([[v], verdict, tuple(dict.fromkeys(codes)), refused])
    head = label.split(" ", 1)[0]
    right = [g for g in groups if g[1] == "match"]
    if not right:
        summary = "wired right on none of them"
    elif len(right) == len(groups):
        summary = "wired right on every one"
    elif groups[-1] is right[-1] and len(right) == 1:
        summary = f"wired right on {head} {right[0][0][0]} and later"
    else:
        summary = "wired right on " + ", ".join(_span(g[0]) for g in right)
    lines = [f"[bold {color(result.verdict)}]verdict: {result.verdict}[/] on {head} {rows[0][0]}..{rows[-1][0]} "
             f"({len(rows)} known releases; {how}): {summary}"]
    for versions, verdict, codes, refused in reversed(groups):
        lines.append(f"  {head} {_span(versions)}: [{color(verdict)}]{verdict}[/]"
                     + (f": {', '.join(codes)}" if codes else "") + (f": {refused}" if refused else ""))
    return lines


def _codes(e) -> str:
    return f": {', '.join(e.errors)}" if e.errors else (f": {e.refused}" if e.refused else "")


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]}-{versions[-1]}"


def _key(v: str):
    from ..conventions.releases import version_key

    return version_key(v or "")


def render_findings_and_fix(findings, fix, console: Console, brief: bool = False, label: str | None = None,
                            verbose: bool = True, fixes: list | None = None, write_hint: bool = True,
                            folder: str | None = None) -> None:
    """The findings, one per line with why and fix, then the fix panel (shared by layers and fingerprint);
    ``brief``: without the why; not ``verbose``: without the why and the engine source references. The patch is
    printed whole under the panel (a line to copy: never wrapped). ``fixes``: the fixes already printed (``check
    -v``): the same one again is one line. ``folder``: the draft's parent folder, left out of paths in the summary
    (the draft by name, as the summary names it)."""
    from ..terminal import print_copyable, strip_sources

    for f in findings:
        color = "red" if f.severity == "error" else "yellow"
        where = f" slot {f.slot}" if f.slot is not None else ""
        what = f.what if verbose else strip_sources(f.what.replace(folder, "") if folder else f.what)
        console.print(f"[{color}]{f.code}[/]{where}: {what}", highlight=False)
        if not brief and verbose:
            console.print(f"   why: {f.why}", highlight=False, style="dim")
        if f.fix != "see the fix below":
            console.print(f"   fix: {f.fix}", highlight=False)
    if fix is None:
        return
    who = label or fix.engine
    key = (fix.engine, json.dumps(fix.patch), fix.explanation)
    if fixes is not None:
        if key in fixes:
            console.print(f"fix for {who}: the one above", highlight=False)
            return
        fixes.append(key)
    console.print(Panel(fix.explanation if verbose else strip_sources(fix.explanation),
                        title=f"fix for {who}" if fix.possible else f"no config fix for {who}",
                        border_style="green" if fix.possible else "red"))
    if fix.possible and fix.patch:
        console.print("Merge into the draft's config.json" + (f" (or {param('write_fixed_config')} DIR writes a fixed "
                                                                "copy)" if write_hint else "") + ":", highlight=False)
        print_copyable(console, json.dumps(fix.patch))


#: what the layers table's columns and the served line's words mean (printed under the table; docs/layers.md)
LEGEND = ("Bk: the state entering layer k (B0 embedding, B{N} last layer's output, +norm post-norm); cosine: trained "
          "vs served, token mean; nearest servable: the capturable state closest to the trained one; rule: the "
          "engine's capture rule")


def render_layers(result: LayersResult, console: Console, verbose: bool = False, seen: set | None = None,
                  fixes: list | None = None) -> None:
    """The layers audit; not ``verbose``: paths by name, each note on one line, no finding's why, no engine source
    reference (all in ``-v``, JSON and the reports). ``seen``: notes already printed (``check -v``), left out."""
    from pathlib import Path

    from ..terminal import print_notes

    t, d = result.target, result.draft
    n = t["num_layers"]
    name = (lambda p: str(p)) if verbose else (lambda p: Path(str(p)).name)  # noqa: E731
    console.print(f"[bold]target[/] {name(t['name'])}  ({t['architecture']}, N={n}, hidden {t['hidden_size']})",
                  highlight=False, soft_wrap=True)
    console.print(f"[bold]draft[/]  {name(d['path'])}  ({d['layout']} layout, fc {d['fc_in']}->{d['fc_out']})",
                  highlight=False, soft_wrap=True)
    tr, sv = result.trained, result.served
    console.print(f"[bold]trained[/] {tr.convention}: ids {list(tr.ids) if tr.ids is not None else '-'} "
                  f"({tr.ids_source}; {tr.case})")
    console.print(f"[bold]served[/]  {engine_label(result)}: ids {list(sv.ids) if sv.ids is not None else '-'} "
                  f"({sv.ids_source}; {sv.case}; rule {sv.rule})")
    table = Table()
    for col in ("slot", "trained", "served", "cosine", "nearest servable", "verdict"):
        table.add_column(col, justify="right" if col in ("slot", "cosine") else "left")
    for s in result.slots:
        style = _VERDICT_STYLE.get(s.verdict, "yellow" if s.verdict.startswith("offset") else "red")
        near = f"{s.nearest.label()} ({s.nearest_cosine:.3f})" if s.nearest is not None else "-"
        table.add_row(str(s.index), s.trained.label() if s.trained else "-", s.served.label() if s.served else "-",
                      f"{s.cosine:.3f}" if s.cosine is not None else "-", near, f"[{style}]{s.verdict}[/]")
    print_table(console, table)
    console.print(LEGEND.replace("{N}", str(n)), style="dim", highlight=False)
    label = engine_label(result)
    render_findings_and_fix(result.findings, result.fix, console, verbose=verbose, fixes=fixes,
                            folder=str(Path(str(d["path"])).parent).rstrip("/") + "/",
                            label=label if result.fix is not None and result.fix.engine == sv.convention else None)
    # result.suggestions also travel in provenance notes ("suggestion: ..."), printed once below and in reports
    notes = [n for n in result.provenance.get("notes") or () if seen is None or n not in seen]
    print_notes(console, notes, verbose)
    if seen is not None:
        seen.update(notes)
    own = "mismatch" if result.errors else "match"
    for line in verdict_lines(result, own, f"{len(result.errors)} error(s), "
                                           f"{len(result.findings) - len(result.errors)} warning(s)"):
        console.print(line, highlight=False)
