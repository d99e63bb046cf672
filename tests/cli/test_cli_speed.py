"""What the CLI costs before any model: `--help` and `layers --static` never import torch (checked in a
fresh interpreter, through sys.modules), and `--threads` / its default never oversubscribe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagle_audit.threads import default_threads, physical_cores, set_threads

NO_TORCH = """
import json, runpy, sys
sys.argv = ["eagle-audit", *json.loads(sys.argv[1])]
code = None
try:
    runpy.run_module("eagle_audit.cli.main", run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({"exit": code, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def _fresh(args: list[str], env: dict | None = None) -> dict:
    res = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(args)], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=300)
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["layers", "--help"], ["accept-rate", "--help"], ["check", "--help"]])
def test_help_does_not_import_torch(args):
    assert _fresh(args) == {"exit": 0, "torch": False, "transformers": False}


def test_static_layers_does_not_import_torch(tiny_targets, make_draft, tmp_path):
    target = tiny_targets["llama"]
    draft = make_draft(nested_ids=[1, 3, 5], draft_vocab=128)  # with d2t / t2d: the vocab map is read too
    out = _fresh(["layers", "-t", str(target), "-d", str(draft), "--static", "--json", str(tmp_path / "r.json")])
    assert out["torch"] is False and out["transformers"] is False and out["exit"] in (0, 1)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["provenance"]["static"] is True and data["provenance"]["torch"]  # version read from the metadata
    assert data["draft"]["vocab"]["has_d2t"] is True


def test_static_check_does_not_import_torch(tiny_targets, make_draft, tmp_path):
    """The CI recipe's command (docs/ci.md): `check --static` stays torch-free, as `layers --static` does."""
    draft = make_draft(nested_ids=[1, 3, 5])
    out = _fresh(["check", "-t", str(tiny_targets["llama"]), "-d", str(draft), "--static", "--builtin-rules",
                  "--json", str(tmp_path / "c.json")])
    assert out["torch"] is False and out["transformers"] is False and out["exit"] in (0, 1)
    stages = json.loads((tmp_path / "c.json").read_text())["stages"]
    assert [s["ran"] for s in stages] == [True, False, False, False, False]


def test_static_info_equals_loaded_info(tiny_targets, arch_key):
    """The config.json fast path and the transformers path agree, config hash included (results of a
    static and a full audit of one target can be merged into one report)."""
    from eagle_audit.target import load_target, target_info

    t = tiny_targets[arch_key]
    assert target_info(str(t)) == load_target(str(t)).info


def test_threads_default_respects_omp_and_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    n = default_threads()
    assert 1 <= n <= min(physical_cores(), len(os.sched_getaffinity(0)))
    import eagle_audit.threads as threads

    monkeypatch.setattr(os, "getloadavg", lambda: (1e6, 0.0, 0.0))
    monkeypatch.setattr(threads, "running_now", lambda: 1000)
    assert default_threads() == 1  # a busy machine: one thread
    # the load average still counts work that has just ended: with nothing else runnable now, every core
    monkeypatch.setattr(threads, "running_now", lambda: 0)
    assert default_threads() == min(physical_cores(), len(os.sched_getaffinity(0)))
    monkeypatch.setattr(threads, "running_now", lambda: None)  # no /proc/stat: the load average alone
    assert default_threads() == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # idle a minute: every core, whatever runs now
    monkeypatch.setattr(threads, "running_now", lambda: 1000)
    assert default_threads() == min(physical_cores(), len(os.sched_getaffinity(0)))


def test_running_now_reads_this_machine():
    """procs_running counts this process, so another busy process on the machine shows as 1 or more."""
    import subprocess
    import sys

    from eagle_audit.threads import running_now

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        import time

        time.sleep(0.3)
        assert running_now() >= 1
    finally:
        busy.kill()
        busy.wait()


def test_threads_applied_to_torch_when_imported_and_env_before():
    code = ("import os, sys; from eagle_audit.threads import set_threads; set_threads(2); "
            "env = os.environ['OMP_NUM_THREADS']; import torch; a = torch.get_num_threads(); "
            "set_threads(1); print(env, a, torch.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.stdout.split() == ["2", "2", "1"], res.stderr
    with pytest.raises(ValueError):
        set_threads(0)


def test_threads_option_on_every_torch_command():
    import typer

    from eagle_audit.cli.main import app

    commands = typer.main.get_command(app).commands
    for name in ("layers", "accept-rate", "train-canary"):
        assert any("--threads" in p.opts for p in commands[name].params), name
