"""eagle_audit/terminal.py: a table that does not fit the terminal becomes a list (issue 28.3), checked at 80 and
at 200 columns: no line longer than the console, no word split across lines, every value shown."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from eagle_audit.terminal import print_table

from tests.probe.probe_tree import write_tree

EVIDENCE = ("nothing on text like this: its best state scores as well shuffled over the positions of each text, so "
            "the draft does not use what the slot carries here (prompts like the draft's training data may change that)")


def _fingerprint_like() -> Table:
    """The shape of fingerprint's per-slot table: seven columns, one header empty, one long evidence text."""
    table = Table(title="per slot: best state, runner-up, margin")
    for col in ("slot", "state", "runner-up", "log-prob margin", "top-1 margin", "", "evidence"):
        table.add_column(col)
    table.add_row("0", "undetermined (the draft does not use its information; best B0)", "B30+norm",
                  "+0.242 [+0.144, +0.339]", "+0.074 [+0.036, +0.113]", "[yellow]undetermined[/]", EVIDENCE)
    table.add_row("2", "B16", "B15", "+0.163 [+0.061, +0.266]", "+0.039 [+0.005, +0.074]", "[green]separated[/]",
                  "separated on 659 scored tokens")
    return table


def _render(table: Table, width: int) -> str:
    buf = io.StringIO()
    print_table(Console(file=buf, width=width, color_system=None), table)
    return buf.getvalue()


def _words(text: str) -> list[str]:
    return re.sub(r"[│┃┏┓┗┛┡┩└┘━─┳┻╇╈┼┬┴]", " ", text).split()


@pytest.mark.parametrize("width", [80, 200])
def test_a_wide_table_fits_the_terminal_with_no_word_split(width):
    text = _render(_fingerprint_like(), width)
    assert max(len(line) for line in text.splitlines()) <= width
    words = set(_words(text))
    for word in _words(EVIDENCE) + ["undetermined", "B30+norm", "+0.242", "[+0.036,", "separated"]:
        assert word in words, (word, text)  # a split word ("informat…", "undeterm…") fails here
    assert bool(re.search(r"^  evidence +nothing on text like this", text, re.M)) == (width == 80)  # the list at 80, the table at 200
    assert ("┃ slot" in text) == (width == 200)


def test_a_table_that_fits_stays_a_table():
    table = Table()
    table.add_column("slot")
    table.add_column("verdict")
    table.add_row("0", "offset +12")
    assert "┃ slot ┃" in _render(table, 80)


@pytest.mark.parametrize("width", [80, 200])
def test_probe_output_fits_the_terminal_when_piped(tmp_path, monkeypatch, width):
    """``probe`` printed 160 columns when piped and split its headers mid-word on an 80-column terminal."""
    from eagle_audit.cli.main import app

    monkeypatch.setenv("COLUMNS", str(width))
    res = CliRunner().invoke(app, ["probe", "sglang", "--source", str(write_tree(tmp_path / "src"))])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    words = set(_words(res.stdout))
    for word in ("architecture", "default", "file:line", "MoeForCausalLM", "delegating-unresolved", "unrecognised"):
        assert word in words, (word, res.stdout)
