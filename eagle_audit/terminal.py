"""Terminal output designed for 80 columns first: a table is printed as a table only where its natural width
fits the console; else its rows become a list (one heading line per row, then its fields), so no cell is
squeezed into one word per line and no header is split mid-word. Every command's tables go through
:func:`print_table` (checked at 80 and 200 columns in tests/test_terminal.py)."""

from __future__ import annotations

import re

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: the indent of a row's fields under its heading, in list form
INDENT = 2


#: a console at least this wide keeps a table whose longest words fit, its cells wrapped onto a few lines (at
#: 160 columns a table of 5-7 columns gives each 20 or more); a narrower one keeps only a table that fits whole
WIDE = 160


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` prints as a table on ``console``: at its natural width (no cell wrapped), or, on a
    console of :data:`WIDE` columns or more, with no word split."""
    m = Measurement.get(console, console.options.update(max_width=1_000_000), table)
    return m.maximum <= console.width or (console.width >= WIDE and m.minimum <= console.width)


def _text(cell) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def _field(console: Console, label: str, value: Text, width: int) -> None:
    """``  label  value``, the value wrapped under itself (no trailing spaces)."""
    pad = " " * INDENT
    room = max(console.width - INDENT - width - 2, 20)
    lines = value.wrap(console, room, overflow="fold")
    for i, line in enumerate(lines):
        line.rstrip()
        lead = f"{pad}{label:<{width}}  " if i == 0 else " " * (INDENT + width + 2)
        console.print(Text.assemble((lead, "dim" if i == 0 else ""), line), highlight=False, soft_wrap=True)


def print_table(console: Console, table: Table) -> None:
    """``table`` on ``console`` when it fits (:func:`fits`), else as a list: the title, then per row its first
    column's header and value as a heading and the other columns as ``header  value`` lines (a value wraps
    under itself), then the caption. Empty cells are left out."""
    if fits(console, table):
        console.print(table)
        return
    if table.title:
        console.print(_text(table.title), style="italic", highlight=False)
    columns = table.columns
    headers = [_text(c.header).plain for c in columns]
    cells = [list(c.cells) for c in columns]
    width = max((len(h) for h in headers[1:]), default=0)
    for r in range(table.row_count):
        head = Text.assemble((f"{headers[0]} " if headers[0] else "", "bold"), _text(cells[0][r]))
        console.print(head, highlight=False)
        for h, col in zip(headers[1:], cells[1:]):
            value = _text(col[r])
            if value.plain.strip():
                _field(console, h, value, width)
    if table.caption:
        console.print(_text(table.caption), style="dim", highlight=False)


#: notes whose content can change a figure or a verdict: printed as ``warning:`` (the rest ``note:``), each with
#: the consequence its text states
WARNING_NOTES = ("draft semantics differ", "approximated", "rope_scaling", "the server's release was not read",
                 "the cost of the draft-semantics difference was not measured", "other traffic moved the counters",
                 "trainer streams")
#: an engine source reference: "srt/models/llama_eagle3.py:387", ":156-161", "config.py:228-233" (in -v, JSON, HTML)
_SOURCE_REF = re.compile(r"\s*\((?:[^()]*\([^()]*\))*[^()]*(?:\.py|\.json)?:\d[^()]*\)|\s*\b[\w./-]+\.py:\d+(?:-\d+)?\b"
                         r"|;? ?\b[\w ]*:\d+(?:-\d+)?\b")


def note_kind(note: str) -> str:
    """``warning`` for a note that can change a figure or a verdict (:data:`WARNING_NOTES`), else ``note``."""
    return "warning" if note.startswith(WARNING_NOTES) else "note"


def strip_sources(text: str) -> str:
    """``text`` without engine source references (file:line), kept for ``-v``, JSON and HTML."""
    return re.sub(r"\s+", " ", _SOURCE_REF.sub("", text)).strip()


#: one line for a note the first clause would leave without its way out (its start -> the line; -v: the whole)
SHORT_NOTES = (
    (re.compile(r"the (\S+) layout is also what a conversion writes"),
     "a converted draft keeps its source trainer's wiring: `trainer` names it"),
    (re.compile(r"suggestion: the trainer was not given"),
     "suggestion: measure the trained wiring: `trainer='fingerprint'`"),
    (re.compile(r"trainer streams:"),
     "trainer streams: unknown which stream fc saw: pin `trained_boundaries`"),
    (re.compile(r"draft semantics differ"),
     "draft semantics differ: it counts in the served figure (-v: how)"),
)


def note_line(note: str, width: int) -> str:
    """One line for ``note`` at ``width`` columns, after its ``note: `` / ``warning: `` lead: its short form
    (:data:`SHORT_NOTES`), else its first clause (up to the first ``; `` or sentence end; a clause still too long
    up to its own ``: ``), source references left out, cut at a word with ``…`` if still too long. The whole
    text: ``-v``, JSON, HTML."""
    for pattern, short in SHORT_NOTES:
        m = pattern.match(note)
        if m:
            return m.expand(short)
    room = width - len(note_kind(note)) - 2
    text = strip_sources(note)
    head, sep, body = text.partition(": ")
    first = re.split(r"(?<=[a-z)\]0-9'`])[;.] ", body, maxsplit=1)[0] if sep else text
    if sep and len(head) + 2 + len(first) > room and ": " in first:
        first = first.split(": ", 1)[0]
    line = f"{head}: {first}" if sep else first
    if len(line) > room:
        line = line[:room - 1].rsplit(" ", 1)[0].rstrip(",;:( ") + "…"
    return line


def print_notes(console: Console, notes, verbose: bool = False, indent: str = "") -> None:
    """Each note on one line (:func:`note_line`; ``verbose``: the whole text, wrapped), ``warning:`` (yellow) for
    those that can change a figure, ``note:`` dimmed."""
    from rich.markup import escape

    for n in notes:
        kind = note_kind(n)
        text = escape(n if verbose else note_line(n, console.width - len(indent)))
        line = f"{indent}[yellow]{kind}:[/] {text}" if kind == "warning" else f"[dim]{indent}{kind}: {text}[/]"
        if verbose:
            console.print(line, highlight=False)
        else:
            console.print(line, highlight=False, no_wrap=True, overflow="ellipsis")


def print_copyable(console: Console, line: str, style: str | None = None) -> None:
    """A line a user copies (a path, a command, a patch) printed whole: never wrapped nor cut, whatever the width."""
    from rich.markup import escape

    console.print(f"[{style}]{escape(line)}[/]" if style else escape(line), highlight=False, soft_wrap=True)
