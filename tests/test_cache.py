"""The cache under concurrency and kills (eagle_audit/cache.py), on the real SmolLM2 GGUF conversion in a
private, cold cache: a run killed during the conversion leaves no entry and no files inside one, and the
next run builds a correct entry and removes the leftovers; two cold runs at once both succeed with one
entry built once. Plus the lock and cleanup rules on a toy entry (fast)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eagle_audit.cache import build_entry

REPO = Path(__file__).resolve().parent.parent


def _complete(p: Path) -> bool:
    return (p / "done").is_file()


def test_entry_appears_whole_and_is_built_once(tmp_path):
    entry = tmp_path / "gguf" / "x"
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "part").write_text("1")
        time.sleep(0.3)  # the other thread waits on the lock meanwhile
        (tmp / "done").write_text("1")

    threads = [threading.Thread(target=build_entry, args=(entry, _complete, build)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and _complete(entry)
    assert sorted(p.name for p in entry.parent.iterdir()) == [".x.lock", "x"]


def test_leftovers_of_a_killed_build_are_removed_and_a_failed_build_leaves_nothing(tmp_path):
    entry = tmp_path / "x"
    (tmp_path / ".x.abc.tmp").mkdir()  # what a killed run leaves
    (tmp_path / ".x.abc.tmp" / "model.safetensors").write_bytes(b"half")
    entry.mkdir()  # an entry an older eagle-audit built in place and never finished
    (entry / "model.safetensors.tmp").write_bytes(b"half")

    def fail(tmp: Path) -> None:
        (tmp / "part").write_text("1")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError):
        build_entry(entry, _complete, fail)
    assert not list(tmp_path.glob(".x.*.tmp"))
    build_entry(entry, _complete, lambda tmp: (tmp / "done").write_text("1"))
    assert sorted(p.name for p in entry.iterdir()) == ["done"]


# ---------------------------------------------------------------------------- the real conversion (full tier)

CONVERT = ("import sys; from eagle_audit.target import default_target, materialise; "
           "print(materialise(default_target()))")


def _env(cache: Path) -> dict:
    return {**os.environ, "EAGLE_AUDIT_CACHE": str(cache), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _check_entry(cache: Path) -> Path:
    """The one complete entry, no temporary or half-written data anywhere in the cache."""
    from eagle_audit.draft.read import read_safetensors_header

    entries = [p for p in (cache / "gguf").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 1, entries
    entry = entries[0]
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")], "temporary data left"
    config = json.loads((entry / "config.json").read_text())
    assert config["num_hidden_layers"] == 30 and config["hidden_size"] == 576
    (weights,) = entry.glob("*.safetensors")
    header = read_safetensors_header(weights)  # validates every entry against the file size
    assert "model.embed_tokens.weight" in header and len(header) > 200
    return entry


@pytest.mark.full
def test_a_conversion_killed_midway_leaves_nothing_and_the_rerun_is_correct(tmp_path):
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-c", CONVERT], env=_env(cache), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if list((cache / "gguf").glob(".*.tmp")) if (cache / "gguf").exists() else []:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    time.sleep(3)  # well into the conversion (it takes ~20 s)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not [p for p in (cache / "gguf").iterdir() if p.is_dir() and not p.name.startswith(".")], \
        "a killed conversion left an entry"
    assert list((cache / "gguf").glob(".*.tmp")), "the killed run's temporary directory (to be cleaned)"
    rerun = subprocess.run([sys.executable, "-c", CONVERT], env=_env(cache), capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "de-quantizing" not in rerun.stderr  # no progress bar when stderr is not a terminal
    entry = _check_entry(cache)
    assert rerun.stdout.strip() == str(entry)


@pytest.mark.full
def test_two_cold_runs_at_once(tmp_path, without_timings):
    """Two audits on a cold cache at the same time: both exit as a single one does, with the same JSON
    (timings aside), and the conversion is built once, with no garbage left."""
    cache = tmp_path / "cache"
    cmd = [sys.executable, "-m", "eagle_audit.cli.main", "layers", "--max-prompts", "1", "--max-tokens", "16",
           "--threads", "1", "--json"]
    procs = [subprocess.Popen(cmd + [str(tmp_path / f"r{i}.json")], env=_env(cache), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 1, err[-2000:]  # the demo draft is mis-wired: exit 1, never a crash
        assert "Traceback" not in err
    _check_entry(cache)
    a, b = (json.loads((tmp_path / f"r{i}.json").read_text()) for i in range(2))
    assert without_timings(a) == without_timings(b)
