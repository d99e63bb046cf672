"""README.md and docs/ against the code: the generated reference pages equal what the code generates now,
every finding code and result key is documented, every link resolves, CI runs README's test command, and
README's command examples run with the exit codes they state."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eagle_audit import __version__
from eagle_audit.cli import docgen
from eagle_audit.cli.main import app
from eagle_audit.layers.result import CODES

from tests.docs_keys import assert_documented

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_generated_docs_equal_the_committed_ones():
    assert docgen.stale() == [], "stale generated docs: run python -m eagle_audit.cli.docgen and commit docs/"


def test_a_stale_page_is_detected(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    text = (docs / "cli.md").read_text()
    (docs / "cli.md").write_text(text.replace("`--max-prompts`", "`--max-prompt`", 1))
    (docs / "findings.md").unlink()
    assert docgen.stale(docs) == ["cli.md", "findings.md"]
    assert docgen.main(["--check"]) == 0  # the committed docs/ (run from the checkout)


def test_every_option_and_code_has_a_row():
    import typer.main

    cli_md = (DOCS / "cli.md").read_text()
    for name, command in typer.main.get_command(app).commands.items():
        assert f"## eagle-audit {name}" in cli_md
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert f"| `{opt}`" in cli_md, f"{name} {opt}"
    findings_md = (DOCS / "findings.md").read_text()
    assert set(docgen.FINDING_DETAILS) == set(CODES)
    assert [c for c in CODES if f"| `{c}` |" not in findings_md] == []


def test_layers_result_keys_are_documented(audit, tiny_targets, make_draft):
    data = audit(tiny_targets["llama"], make_draft(), trained_boundaries="0,3,6").to_json()
    assert data["verdict"] == "mismatch" and data["fix"] is not None  # so slots, findings and fix are filled
    assert_documented(data, ("target", "draft", "trained", "slots", "findings", "fix", "heatmap", "provenance"))


def _links(path: Path) -> list[str]:
    text = path.read_text()
    found = re.findall(r"\]\(([^)#\s]+)", text) + re.findall(r"`((?:docs|bench|reports)/[\w./-]+)`", text)
    return [f for f in found if "://" not in f]


@pytest.mark.parametrize("page", ["README.md", "bench/README.md",
                                  *sorted(p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md"))])
def test_links_resolve(page):
    # a link resolves from the repository root (how the pages name files) or from the page's folder
    missing = [f for f in _links(ROOT / page) if not (ROOT / f).exists() and not (ROOT / page).parent.joinpath(f).exists()]
    assert missing == [], f"{page} links to missing files: {missing}"
    assert "shared/reference" not in (ROOT / page).read_text(), "a clone has no shared/reference"


def test_bench_index_names_every_script_and_no_script_sets_sys_path():
    # bench/README.md is the index (script -> question -> result file -> doc): a script missing from it, or one
    # that sets sys.path itself instead of asking bench/_support.py, fails here
    index = (ROOT / "bench" / "README.md").read_text()
    scripts = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "bench").glob("*/*")
                     if p.suffix in (".py", ".sh") and p.name != "__init__.py")
    assert len(scripts) >= 17
    loose = sorted(p.name for p in (ROOT / "bench").iterdir()
                   if p.suffix in (".py", ".sh") and p.name not in ("__init__.py", "_support.py"))
    assert loose == [], f"bench/{loose}: a script goes in bench/speed/, bench/evidence/ or bench/tools/"
    assert [s for s in scripts if f"`{s}`" not in index] == []
    assert [s for s in scripts if re.search(r"sys\.path\s*(\[|\.insert|\.append|=)", (ROOT / s).read_text())] == []


def test_readme_opens_with_the_two_setup_commands_and_ci_runs_the_second_verbatim():
    first = _bash_blocks(README)[0]
    commands = [line for line in first.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    install, test = commands
    assert install.startswith("pip install") and install.endswith("eagle-audit layers")
    assert "python -m pytest" in test and "--full" in test
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci, ".ci/run must run README's test command verbatim"


def _examples() -> list[tuple[str, int]]:
    """README's command examples that state their exit code (``# exit N``), in order."""
    out = []
    for block in _bash_blocks(README[README.index("## Commands"):]):
        for line in block.splitlines():
            m = re.match(r"(eagle-audit .*?)\s+# exit (\d)\s*$", line)
            if m:
                out.append((m.group(1), int(m.group(2))))
    return out


def _run_examples(commands: set[str], cwd: Path) -> None:
    runner = CliRunner()
    for cmd, code in _examples():
        if cmd.split()[1] in commands:
            res = runner.invoke(app, shlex.split(cmd)[1:])
            assert res.exit_code == code, (cmd, res.output)


def test_readme_examples_run_with_their_exit_codes(audit_cache, tmp_path, monkeypatch):
    assert [cmd.split()[1] for cmd, _ in _examples()] == ["layers", "report", "accept-rate", "check"]
    monkeypatch.chdir(tmp_path)
    _run_examples({"layers", "report"}, tmp_path)
    assert json.loads((tmp_path / "result.json").read_text())["verdict"] == "mismatch"
    assert (tmp_path / "demo-fixed" / "config.json").is_file()
    assert (tmp_path / "audit.html").is_file() and (tmp_path / "audit.md").is_file()


@pytest.mark.full  # SmolLM2 generates 8 continuations of 64 tokens: about a minute on 2 cores
def test_readme_accept_rate_example(audit_cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _run_examples({"accept-rate"}, tmp_path)


@pytest.mark.full  # every stage on SmolLM2, the fingerprint's search included: about a minute on 2 cores
def test_readme_check_example_and_its_output(audit_cache, tmp_path, monkeypatch):
    """The README's check example exits as it says, and the lines it quotes are the real output's."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    (cmd, code), = [(c, k) for c, k in _examples() if c.split()[1] == "check"]
    res = CliRunner().invoke(app, shlex.split(cmd)[1:])
    assert res.exit_code == code, res.output
    quoted = README.split("eagle-audit check --json check.json")[1].split("```\n", 2)[2].split("```")[0]
    words = lambda text: " ".join(text.split())  # noqa: E731 (the terminal wraps where it likes)
    for line in quoted.splitlines()[1:]:
        assert words(line) in words(res.stdout), line
    assert json.loads((tmp_path / "check.json").read_text())["verdict"]["status"] == "mismatch"


def test_version():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"eagle-audit {__version__}"


def test_accept_rate_help_names_tree_drafts():
    import typer.main

    help_text = typer.main.get_command(app).commands["accept-rate"].help
    assert "tree drafts" in help_text and "chain drafts" in help_text


def test_readme_is_short_and_tells_what_a_newcomer_needs():
    """Issue 28.10: README ran 203 lines, never said where the probe example's wheel comes from, put train-canary
    at "about 10 minutes" (it takes about 3), and its exit-code table lacked 3 and 130."""
    import typer.main

    from eagle_audit.errors import EXIT_MEANINGS

    lines = README.splitlines()
    assert len(lines) <= 150, len(lines)
    commands = README[README.index("## Commands"):README.index("## Python")]
    for name in typer.main.get_command(app).commands:  # one example per command
        assert len(re.findall(rf"^eagle-audit {name}\b", commands, re.M)) == 1, name
    probe = commands[:commands.index("eagle-audit probe")].rsplit("```bash", 1)[1]
    assert "pip download --no-deps sglang==0.5.23" in probe  # where the example's wheel comes from
    table = README[README.index("## Exit codes"):]
    assert [int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)] == sorted(EXIT_MEANINGS)
    measured = json.loads((ROOT / "bench" / "results" / "train_canary_cli.json").read_text())
    minutes = re.search(r"about (\d+) minutes? on 2 CPU cores", commands[commands.index("eagle-audit train-canary"):])
    assert minutes and int(minutes.group(1)) == round(measured["cpu_s"] / 60), (minutes, measured["cpu_s"])


def test_layers_example_prints_the_legend_and_notes_as_the_code_does():
    """docs/layers.md's example output in step with the renderer (issue 43): the legend under the slot table as it
    wraps at 80 columns, and each note's one-line form (eagle_audit.terminal.note_line)."""
    import io

    from rich.console import Console

    from eagle_audit.layers.render import LEGEND
    from eagle_audit.terminal import note_line

    example = (DOCS / "layers.md").read_text().split("## Example", 1)[1].split("```", 2)[1]
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(LEGEND.replace("{N}", "30"), highlight=False)
    for line in buf.getvalue().splitlines():
        assert line.rstrip() in example, line
    said = {"note: " + note_line(n, 80).replace("`trainer`", "--trainer").replace("`trainer='fingerprint'`",
                                                                                 "--trainer fingerprint")
            for n in ("the speculators layout is also what a conversion writes: ...",
                      "suggestion: the trainer was not given, so ...")}
    assert said <= set(example.splitlines()), said
    assert "/work/" not in example and "/home/" not in example  # no machine path in a published output
