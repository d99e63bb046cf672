"""`eagle-audit probe`: the table, the convention file it writes, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from eagle_audit.cli.probe import probe
from eagle_audit.conventions import load_convention_file
from tests.probe.probe_tree import write_tree

REPO = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command()(probe)
    return app


def test_table_and_convention_file(tmp_path: Path):
    tree = write_tree(tmp_path / "src")
    out = tmp_path / "sglang-probed.json"
    result = CliRunner().invoke(_app(), ["sglang", "--source", str(tree), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "sglang 9.9.9" in text
    for arch in ("BaseForCausalLM", "MoeForCausalLM", "WrappedDerived"):
        assert arch in text
    assert "min(ids) == 0" in text and "OddForCausalLM" in text and "unrecognised" in text
    assert "Without EAGLE-3 capture (1" in text and "Plain" in text
    conv = load_convention_file(out)
    assert conv.version == "9.9.9" and "MoeForCausalLM" in conv.architectures
    assert json.loads(out.read_text())["generated_by"].startswith("eagle-audit")


def test_convention_to_stdout(tmp_path: Path):
    tree = write_tree(tmp_path / "src")
    result = CliRunner().invoke(_app(), ["sglang", "--source", str(tree), "--out", "-"])
    assert result.exit_code == 0
    assert json.loads(result.output)["schema"] == "eagle-audit/convention/1"


def test_missing_source_is_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "eagle_audit.cli.main", "probe", "sglang", "--source", "/missing"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "/missing" in lines[0] and "sglang/srt/models" in lines[0]
