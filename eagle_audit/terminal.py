"""Terminal output designed for 80 columns first: a table is printed as a table only where its natural width
fits the console; else its rows become a list (one heading line per row, then its fields), so no cell is
squeezed into one word per line and no header is split mid-word. Every command's tables go through
:func:`print_table` (checked at 80 and 200 columns in tests/test_terminal.py)."""

from __future__ import annotations

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
