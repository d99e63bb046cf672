"""docs/ci.md's recipe: the pre-commit hook's exact entry (from .pre-commit-hooks.yaml) with the documented
args, run on a draft repository fixture (the draft's config and weights, the target's config.json only):
exit 0 when well wired, exit 1 when the config is mis-wired; the workflow in docs/ci.md runs the same."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--draft", ".", "--target", ".eagle-audit/target", "--trainer", "specforge", "--engine", "sglang"]


def _hook() -> dict:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return next(h for h in hooks if h["id"] == "eagle-audit-static")


def _repo(tmp_path: Path, draft: Path, target_config: Path) -> Path:
    repo = tmp_path / "draft-repo"
    shutil.copytree(draft, repo)
    (repo / ".eagle-audit" / "target").mkdir(parents=True)
    shutil.copy(target_config / "config.json", repo / ".eagle-audit" / "target" / "config.json")
    return repo


def _run(repo: Path) -> subprocess.CompletedProcess:
    """The hook's entry + args, as pre-commit runs it (in the repository root, no file names passed).
    ``eagle-audit`` is the console script of eagle_audit.cli.main:main; it runs as ``python -m`` here so
    that the checkout under test answers (not another installed copy)."""
    entry = shlex.split(_hook()["entry"])
    assert entry[0] == "eagle-audit"
    cmd = [sys.executable, "-m", "eagle_audit.cli.main", *entry[1:], *ARGS]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=300)


def test_hook_declaration_matches_the_docs():
    hook = _hook()
    assert hook["language"] == "system" and hook["pass_filenames"] is False
    assert re.search(hook["files"], "config.json") and re.search(hook["files"], "sub/config.json")
    assert not re.search(hook["files"], "generation_config.json.bak")
    doc = (ROOT / "docs" / "ci.md").read_text()
    assert f"args: [{', '.join(ARGS)}]" in doc and hook["entry"] in doc


@pytest.mark.parametrize("wiring, code", [("nested", 0), ("one_id_dropped", 1)])
def test_hook_command_on_a_draft_fixture(tmp_path, make_draft, config_only_target, wiring, code):
    target = config_only_target(num_layers=32)
    ids = [1, 3, 5] if wiring == "nested" else [1, 3]  # fc takes 3 states; an edit dropped one id
    repo = _repo(tmp_path, make_draft(n_aux=3, nested_ids=ids), target)
    res = _run(repo)
    assert res.returncode == code, res.stdout + res.stderr
    assert ("verdict: match" in res.stdout) == (code == 0)
    if code:
        assert "verdict: mismatch" in res.stdout


def test_workflow_in_the_docs_runs_the_same_command():
    doc = (ROOT / "docs" / "ci.md").read_text()
    assert "eagle-audit check --static --builtin-rules --draft . --target .eagle-audit/target" in doc
    assert json.loads(json.dumps(yaml.safe_load(doc.split("```yaml")[2].split("```")[0])))["jobs"]
