"""Render an AcceptResult to the terminal (rich). Receives result objects only."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..terminal import print_table
from .run import AcceptResult


def _fmt(v: float | None, nd: int = 3) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def render_accept(result: AcceptResult, console: Console, verbose: bool = False, seen: set | None = None) -> None:
    """The accept lengths; not ``verbose``: paths by name, each note on one line (all of it: ``-v``, JSON, the
    reports). ``seen``: notes already printed (``check -v``), left out."""
    from pathlib import Path

    from ..terminal import print_notes

    t, s = result.target, result.settings
    name = (lambda p: str(p)) if verbose else (lambda p: Path(str(p)).name)  # noqa: E731
    console.print(f"[bold]target[/] {name(t['name'])}  ({t['architecture']}, N={t['num_layers']})", soft_wrap=True)
    console.print(f"[bold]draft[/]  {name(result.draft['path'])}  ({result.draft['layout']} layout)", soft_wrap=True)
    src = result.provenance.get("prompts") or "built-in chat set"
    console.print(f"[bold]prompts[/] {result.provenance.get('num_prompts', '?')} of the "
                  f"{src if src == 'built-in chat set' else name(src)}", highlight=False, soft_wrap=True)
    src = result.provenance.get("source") or {}
    if src.get("backend") == "server":
        console.print(Text.assemble(("states", "bold"), f" target states and greedy continuations from the "
                                    f"{src['origin']}; the draft runs here"), highlight=False)
    why = " (topk 1 forces num_steps + 1)" if s.mode == "chain" else ""
    console.print(f"[bold]mode[/]   {s.mode}, num_steps {s.num_steps}, topk {s.topk}, num_draft_tokens "
                  f"{s.num_draft_tokens}{why}, max_new_tokens {s.max_new_tokens}", highlight=False)
    table = Table(title="accept length (tokens per verify = accepted drafts + 1; greedy, simulated)")
    for col in ("wiring", "states", "accept length", "per-position acceptance", "histogram (0..k accepted)"):
        table.add_column(col, justify="right" if col == "accept length" else "left")
    rows = [("trained", result.trained.states, result.stats.get("trained")),
            ("served", result.served.states, result.stats.get("served"))]
    for name, states, st in rows:
        labels = ", ".join(x.label() for x in states)
        if st is None:
            table.add_row(name, labels, "[red]fails[/]", result.failures.get(name, ""), "")
        else:
            table.add_row(name, labels, _fmt(st.accept_length), " ".join(f"{p:.2f}" for p in st.per_position),
                          " ".join(map(str, st.histogram)))
    for a in result.attribution:
        table.add_row(f"served, slot {a.slot} fixed", f"{a.served.label()} -> {a.trained.label()}",
                      _fmt(a.accept_length), "", "")
    print_table(console, table)
    if result.live is not None:
        lj = result.live.to_json()
        console.print(f"[bold]live[/] accept length {_fmt(lj['accept_length'])}, {_fmt(lj['tokens_per_s'], 1)} tok/s vs "
                      f"target alone {_fmt(lj['target_alone_tokens_per_s'], 1)} tok/s (speedup {_fmt(lj['speedup'], 2)}x), "
                      f"lossless: {lj['lossless']}", highlight=False)
    if result.server is not None:
        sv = result.server
        steps = f", {sv.verify_steps} verifies" if sv.verify_steps is not None else ""
        console.print(Text.assemble(("server", "bold"), f" {sv.kind} {sv.url}: accept length {_fmt(sv.accept_length)} "
                      f"over the {sv.requests} audited requests{steps}"
                      + (f", per-request mean {_fmt(sv.request_accept_length)}" if sv.request_accept_length is not None else "")
                      + f" (simulated served: {_fmt(result.al('served'))})"), highlight=False)
        if sv.per_position:
            console.print("  per-position acceptance " + " ".join(f"{p:.2f}" for p in sv.per_position),
                          highlight=False, markup=False)
        if sv.continuations_equal is not None:
            console.print(f"  {sv.continuations_equal} of {sv.requests} served outputs equal the target's greedy "
                          "continuation here", highlight=False, markup=False)
        if sv.lifetime_accept_length:
            ranks = ", ".join(f"rank {i}: {_fmt(v)}" for i, v in enumerate(sv.lifetime_accept_length))
            console.print(f"  server lifetime figure (/server_info, all traffic since start): {ranks}",
                          highlight=False, markup=False)
        for note in sv.notes:
            if not note.startswith("lifetime:"):
                console.print(f"  note: {note}", highlight=False, markup=False)
    if result.arbiter is not None:
        _render_arbiter(result, console)
    notes = [n for n in result.provenance.get("notes") or () if seen is None or n not in seen]
    print_notes(console, notes, verbose)
    if seen is not None:
        seen.update(notes)
    color = "green" if result.verdict == "match" else "red"
    tr, sv_al = result.al("trained"), result.al("served")
    arb = result.arbiter
    if arb is not None and arb.decides:
        basis = {"server_failed": "the live server failed on the audited requests",
                 "unmatched": f"the live server's own accept length {_fmt(result.server.accept_length) if result.server else '-'}"
                 }.get(arb.status, f"the live server's wiring: {arb.chosen}")
        console.print(f"[bold {color}]verdict: {result.verdict}[/] (from {basis}; trained {_fmt(tr)}; tolerance "
                      f"{result.tolerance}{_on(result)})", highlight=False)
        return
    loss = f"{tr - sv_al:+.3f}" if tr is not None and sv_al is not None else "n/a"
    console.print(f"[bold {color}]verdict: {result.verdict}[/] (trained - served = {loss}; tolerance {result.tolerance}{_on(result)})",
                  highlight=False)


def _render_arbiter(result: AcceptResult, console: Console) -> None:
    arb = result.arbiter
    console.print(Text.assemble(("arbiter", "bold"), f" {arb.status}: {arb.message}"), highlight=False)
    if arb.tolerance is not None and arb.status != "agrees":
        console.print(f"  match tolerance: {arb.tolerance.why}", highlight=False, markup=False)
    if arb.status not in ("agrees", "not_comparable") and arb.candidates:
        table = Table(title="candidate wirings on the audited requests (simulated) against the live server")
        for col in ("candidate", "states", "accept length", "per-position acceptance", "matches server"):
            table.add_column(col, justify="right" if col == "accept length" else "left")
        for sc in arb.candidates:
            c = sc.candidate
            states = ", ".join(x.label() for x in c.states)
            if sc.accept_length is None:
                table.add_row(c.label, states, "[red]fails[/]" if c.failure else "-", c.failure or "", "")
            else:
                table.add_row(c.label, states, _fmt(sc.accept_length), " ".join(f"{p:.2f}" for p in sc.per_position),
                              "[green]yes[/]" if sc.matches else "no")
        print_table(console, table)
    for line in arb.predicted:
        console.print(f"  static prediction: {line}", highlight=False, markup=False)
    for note in arb.notes:
        console.print(f"  note: {note}", highlight=False, markup=False)


def _on(result) -> str:
    """'; on SGLang 0.5.6 (given)': the engine release the verdict speaks for (empty where none is recorded)."""
    from ..provenance import engine_label

    label = engine_label(result.provenance or {})
    return f"; on {label}" if label else ""
