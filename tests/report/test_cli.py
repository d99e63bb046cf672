"""`eagle-audit report`: files written, stdout for '-', one-line errors with exit 2."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from eagle_audit.cli.report import report


@pytest.fixture(scope="module")
def app():
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """eagle-audit (test app: the report command as main.py registers it)."""

    app.command("report")(report)
    return app


@pytest.fixture
def result_file(demo_result, tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(demo_result))
    return path


def _run(app, *args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


def test_html_and_md(app, result_file, tmp_path, demo_result):
    r = _run(app, result_file, "--html", tmp_path / "a.html", "--md", tmp_path / "a.md")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    assert "```json" in (tmp_path / "a.md").read_text()
    assert f"wrote {tmp_path / 'a.html'}" in r.stderr


def test_md_to_stdout(app, result_file):
    r = _run(app, result_file, "--md", "-")
    assert r.exit_code == 0
    assert r.stdout.startswith("### ❌ eagle-audit: **mismatch**")


def test_default_writes_into_reports(app, result_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _run(app, result_file)
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert names == [f"mismatch-smollm2-135m-instruct.q4_1-demo-draft-v2.{x}" for x in ("html", "json", "md")]


def test_merge_two_files(app, result_file, tmp_path, accept_result):
    acc = tmp_path / "accept.json"
    acc.write_text(json.dumps(accept_result))
    r = _run(app, result_file, acc, "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    written = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert written["schema"] == "eagle-audit/report/1" and written["accept_rate"] == accept_result


@pytest.mark.parametrize("case, message", [
    ("missing", "no such result file"),
    ("not-json", "not valid JSON"),
    ("schema", "unknown result schema"),
    ("other-target", "cannot merge: the layers result is for target"),
    ("three", "3 results given"),
])
def test_bad_input_is_one_line_exit_2(app, result_file, tmp_path, make_accept_rate, demo_result, case, message):
    bad = tmp_path / "bad.json"
    args = {"missing": [tmp_path / "nope.json"], "not-json": [bad], "schema": [bad], "other-target": [result_file, bad],
            "three": [result_file, result_file, result_file]}[case]
    if case == "not-json":
        bad.write_text("not json")
    elif case == "schema":
        bad.write_text(json.dumps({"schema": "eagle-audit/nothing/1"}))
    elif case == "other-target":
        bad.write_text(json.dumps(make_accept_rate(demo_result, target={"name": "other", "config_sha256": "0" * 64})))
    r = _run(app, *args, "--html", tmp_path / "x.html")
    assert r.exit_code == 2
    assert message in r.stderr
    assert r.stderr.startswith("error: ") and "Traceback" not in r.output
    assert len([line for line in r.stderr.splitlines() if not line.startswith("  hint:")]) == 1
    assert not (tmp_path / "x.html").exists()


def test_help_documents_every_option(app):
    r = CliRunner().invoke(app, ["report", "--help"], terminal_width=200)
    assert r.exit_code == 0
    for text in ("--html", "--md", "--out", "Examples", "eagle-audit report result.json"):
        assert text in r.output


@pytest.mark.usefixtures("one_thread")
def test_every_result_kind_the_tool_writes_is_rendered(app, tiny_targets, make_draft, tmp_path):
    """Issue 28.8: ``report fp.json`` said "a merged report holds neither 'layers' nor 'accept_rate'", naming
    neither the file nor the cause. A fingerprint and a check result render like a layers result."""
    import eagle_audit

    target, draft = tiny_targets["llama"].path, make_draft(nested_ids=[1, 3, 4])
    docs = {"fp": eagle_audit.fingerprint(target, draft, max_prompts=2, max_tokens=16, max_new_tokens=4,
                                          more_prompts=0, use_installed_engine=False),
            "check": eagle_audit.check(target, draft, static=True, use_installed_engine=False)}
    for name, result in docs.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(result.to_json(), default=str))
        res = _run(app, path, "--html", tmp_path / f"{name}.html", "--md", tmp_path / f"{name}.md")
        assert res.exit_code == 0, (name, res.output)
        assert "<html" in (tmp_path / f"{name}.html").read_text() and (tmp_path / f"{name}.md").read_text()
    assert "fingerprint" in (tmp_path / "fp.md").read_text()


@pytest.mark.parametrize("doc, says", [
    ({"out_dir": "c", "boundaries": [2], "first_token_accuracy": 0.5, "final_loss": 1.0}, "a train-canary record"),
    ({"schema": "eagle-audit/convention/1", "name": "x"}, "a convention file"),
])
def test_a_file_report_cannot_render_is_named_in_one_line(app, tmp_path, doc, says):
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    res = _run(app, path, "--md", "-")
    assert res.exit_code == 2 and res.stdout == ""
    line, = res.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: {says}") and "report renders layers, accept-rate, fingerprint and check" in line
