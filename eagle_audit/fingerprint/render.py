"""Render a FingerprintResult to the terminal (rich). Receives result objects only."""

from __future__ import annotations


from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import param
from ..layers.render import render_findings_and_fix
from ..terminal import print_table
from .result import FingerprintResult


def _iv(mean, low, high, nd=3) -> str:
    return f"{mean:+.{nd}f} [{low:+.{nd}f}, {high:+.{nd}f}]"


def _labels(states) -> str:
    return "[" + ", ".join(s.label() for s in states) + "]"


def _evidence(s) -> str:
    """A slot's evidence in one short clause (the whole of it: ``SlotInference.needs``, --verbose, JSON)."""
    if s.lines == "disagree":
        return f"the function reads {s.function}, fc's weights {s.weights}"
    if s.lines == "weights":
        return "fc's weights separate it inside the function's interval"
    if s.uninformed:
        return "the draft does not use this slot's information on this text"
    if s.unused:
        return "the draft does not use this slot on this text"
    if s.confirmed is False:
        added = " or ".join(x.label() for x in s.confirm_added)
        return f"{added} not separated on the confirmation's prompts"
    if s.undetermined or len(s.candidates) > 1:
        want = s.name_tokens if s.undetermined else s.separate_tokens
        more = f"; about {want} scored tokens would {'name at most 3' if s.undetermined else 'separate it'}" \
            if want else "; more text of this kind is not expected to tell"
        return f"{len(s.candidates)} states not separated{more}"
    again = (", and again on the confirmation's prompts" if s.confirmed else
             ", and by fc's weights" if s.lines == "both" and s.weights_state == s.best else "")
    return f"separated on {s.scored_tokens} tokens{again}"


def _weights_alone(result: FingerprintResult, console: Console) -> None:
    """No wiring makes the draft's function agree with the target: say so, and what fc's weights still read."""
    alone = {s.index: s for s in result.weights_alone}
    if not alone:
        console.print("[bold red]no wiring can be read off the weights for this target[/]", highlight=False)
        return
    console.print("[bold]trained wiring[/], read off fc's weights alone (the draft's function agrees with the target "
                  "under no wiring: REPRESENTATION_MISMATCH; no claim is judged against it):", highlight=False)
    for s in result.slots:
        state = escape(s.text()) if s.index in alone else "undetermined"
        console.print(f"  slot {s.index}  [{'green' if s.index in alone else 'yellow'}]{state}[/]", highlight=False)


def _brief(result: FingerprintResult, console: Console) -> None:
    """The fingerprint at 80 columns: the trained wiring per slot, the verdict against the declared and served
    wirings, the accept length the confirmation measured, the findings and the fix. The rest: --verbose, JSON."""
    e = lambda v: escape(str(v))  # noqa: E731
    t, d = result.target, result.draft
    from pathlib import Path

    console.print(f"[bold]target[/] {e(Path(str(t['name'])).name)} ({e(t['architecture'])}, N={e(t['num_layers'])})",
                  highlight=False)
    console.print(f"[bold]draft[/]  {e(Path(str(d['path'])).name)} ({e(d['layout'])} layout)", highlight=False)
    if result.top1 is not None:
        console.print(f"scored {result.scored_tokens} tokens: top-1 {result.top1:.3f} with the best wiring, "
                      f"{result.baseline_top1:.3f} fed no target information", highlight=False)
    if result.inferred is None:
        _weights_alone(result, console)
    else:
        console.print(f"[bold]trained wiring[/], read off the weights (confidence {e(result.confidence)}):",
                      highlight=False)
        for s in result.slots:
            state = s.text() if not s.undetermined else f"undetermined (best {s.best.label()})"
            style = "yellow" if s.undetermined or s.ambiguous else "green"
            console.print(f"  slot {s.index}  [{style}]{e(state)}[/]: {e(_evidence(s))}", highlight=False)
    shown = [c for c in result.claims if c.source in ("declared", "engine") and c.states is not None]
    agree = sorted(c.source for c in result.claims if c.agrees and c.source not in ("declared", "engine"))
    for c in shown:
        word = {True: "[green]agrees[/]", False: "[red]differs[/]", None: "[dim]not told[/]"}[c.agrees]
        who = "declared" if c.source == "declared" else "served"
        console.print(f"  {who:<8} {e(_labels(c.states))} {word}: {e(c.note.split('; ')[0])}", highlight=False)
    if agree:
        console.print(f"  trainers whose default agrees: {e(', '.join(agree))}", highlight=False)
    conf = result.confirmation
    if conf is not None:
        acc = ", ".join(f"{k} {w.accept_length:.2f}" for k, w in conf.wirings.items() if w.accept_length is not None)
        console.print(f"[bold]accept length[/] on {e(held_out(result, brief=True))} ({conf.steps} draft tokens): "
                      f"{e(acc)}"
                      + (f"; the fix gains {e(conf.fix_gain.text().split(' (')[0])}" if conf.fix_gain else ""),
                      highlight=False)
    undecided = [s for s in result.slots if s.undetermined and s.lines != "disagree"]
    if undecided:
        want = [s.name_tokens for s in undecided if s.name_tokens]
        console.print(f"[dim]to decide slot {', '.join(str(s.index) for s in undecided)}: "
                      + (f"about {max(want)} scored tokens of text like the draft's training data "
                         f"({param('prompts')}, {param('max_prompts')})" if want
                         else f"text like the draft's training data ({param('prompts')})") + "[/]",
                      highlight=False)
    render_findings_and_fix(result.findings, result.fix, console, brief=True, verbose=False, write_hint=False,
                            folder=str(Path(str(d["path"])).parent).rstrip("/") + "/")
    color = "green" if result.verdict == "match" else "red"
    console.print(f"[bold {color}]verdict: {result.verdict}[/] ({len(result.errors)} error(s){_on(result)}; the evidence: "
                  f"{param('verbose')}, {param('json_out')}, {param('report')})", highlight=False)


def held_out(result: FingerprintResult, brief: bool = False) -> str:
    """Which prompts the confirmation measured its accept lengths on, in words: held out from the search, after
    its prompts (and the second round's) in the prompts source, so not the first ``num_prompts`` accept-rate and
    check cost the wiring on: its figures differ from theirs."""
    p, conf = result.provenance, result.confirmation
    if brief:
        return f"{conf.prompts} held-out prompts (not accept-rate's)"
    src = p.get("prompts") or "built-in chat set"
    src = f"the {src}" if src == "built-in chat set" else src.rsplit("/", 1)[-1]
    return (f"{conf.prompts} held-out prompts of {src}, after the search's (accept-rate and check cost the wiring "
            f"on the first {p.get('num_prompts', '?')})")


def render_fingerprint(result: FingerprintResult, console: Console, verbose: bool = False, seen: set | None = None,
                       fixes: list | None = None) -> None:
    if not verbose:
        return _brief(result, console)
    t, d = result.target, result.draft
    e = lambda v: escape(str(v))  # noqa: E731 - every value is text, never markup (a "[...]" is eaten otherwise)
    console.print(f"[bold]target[/] {e(t['name'])}  ({e(t['architecture'])}, N={e(t['num_layers'])}, "
                  f"hidden {e(t['hidden_size'])})", highlight=False, soft_wrap=True)  # a path: never wrapped
    console.print(f"[bold]draft[/]  {e(d['path'])}  ({e(d['layout'])} layout, fc {e(d['fc_in'])}->{e(d['fc_out'])})",
                  highlight=False, soft_wrap=True)
    line = (f"[bold]scored[/] {result.scored_tokens} tokens ({result.coverage:.0%} of positions have their target "
            f"token in the draft vocabulary)")
    if result.top1 is not None:
        line += (f"; best wiring: top-1 {result.top1:.3f}, mean log-prob {result.logprob:.3f}; fed no target "
                 f"information: top-1 {result.baseline_top1:.3f}")
    console.print(line, highlight=False)
    table = Table(title="per slot: best state, runner-up, margin (best - runner-up; 99% interval, one unit per prompt)")
    for col in ("slot", "state", "runner-up", "log-prob margin", "top-1 margin", "", "evidence"):
        table.add_column(col, justify="right" if col == "slot" else "left")
    for s in result.slots:
        lp = _iv(s.margin.mean, s.margin.low, s.margin.high) if s.margin else "-"
        t1 = _iv(s.top1_margin.mean, s.top1_margin.low, s.top1_margin.high) if s.top1_margin else "-"
        mark = ("[yellow]undetermined[/]" if s.undetermined else "[yellow]not separated[/]" if len(s.candidates) > 1
                else "[yellow]beside a state not searched[/]" if s.unsearched else "[green]separated[/]")
        table.add_row(str(s.index), e(s.text()), e(s.runner_up.label()) if s.runner_up else "-", e(lp), e(t1), mark,
                      e(s.needs()))
    print_table(console, table)
    if result.inferred is not None:
        wiring = "[" + ", ".join(s.text() for s in result.slots) + "]"
        console.print(f"[bold]trained wiring (from the weights)[/] {e(wiring)}  confidence: {e(result.confidence)}",
                      highlight=False)
    else:
        _weights_alone(result, console)
    for c in result.claims:
        states = "[" + ", ".join(s.label() for s in c.states) + "]" if c.states is not None else "-"
        agree = {True: "[green]agrees[/]", False: "[red]differs[/]",
                 None: "[dim]n/a[/]" if c.states is None or not result.inferred else "[yellow]not told[/]"}[c.agrees]
        console.print(f"  {e(f'{c.source:<20}')} {e(f'{states:<28}')} {agree} {e(c.note)}", highlight=False)
    conf = result.confirmation
    if conf is not None:
        acc = ", ".join(f"{k} {_labels(w.states)} {w.accept_length:.3f}" for k, w in conf.wirings.items()
                        if w.accept_length is not None)
        console.print(f"[bold]confirmation[/] on {e(held_out(result))}, {conf.scored_tokens} tokens: simulated "
                      f"accept length ({conf.steps} draft tokens a verify) {e(acc)}", highlight=False)
        for i, said in enumerate(conf.slots):
            console.print(f"  slot {i}: {e(said)}", highlight=False)
        if conf.gain is not None:
            word = "[red]stands[/]" if conf.stands else "[green]does not stand[/]"
            console.print(f"  measured - declared: {e(conf.gain.text())}: the weights' finding {word}", highlight=False)
        if conf.fix_gain is not None:
            console.print(f"  the fix gains {e(conf.fix_gain.text())} over what the engine feeds", highlight=False)
    render_findings_and_fix(result.findings, result.fix, console, fixes=fixes, write_hint=False)
    color = "green" if result.verdict == "match" else "red"
    console.print(f"[bold {color}]verdict: {result.verdict}[/] ({len(result.errors)} error(s){_on(result)})")


def _on(result) -> str:
    """', on SGLang 0.5.6 (given)': the engine release the verdict speaks for (empty where none is recorded)."""
    from ..provenance import engine_label

    label = engine_label(getattr(result, "provenance", None) or {})
    return f", on {label}" if label else ""
