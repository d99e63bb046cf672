"""What every bench script shares: where the repository, its data and its results are, the test helpers a script
borrows, and the one record format of a result.

Run a script as a module from the repository root, ``python -m bench.speed.gpu_8b ...``: the root is then on
``sys.path`` as the working directory, so ``eagle_audit`` is this checkout's (not an installed copy) and
``bench`` is this package, with no path set-up in the script.

The test helpers (``tests/fingerprint/fp_canaries.py``, ``tests/served/sglang_server.py``,
``tests/trainers/real_drafts.py``, ``tests/wheels.py``, ...) are imported by their package paths, as the tests
import them (``from tests.fingerprint.fp_canaries import CANARIES``): ``tests/`` is a package, found from the
repository root like ``bench`` and ``eagle_audit``.

A result is one JSON object (:func:`record`): ``machine`` (one key: the GPUs, the CPU cores and the
architecture; the label in ``EAGLE_AUDIT_BENCH_MACHINE``, for instance the lent kind ``nvidia-h200``, first
when set), ``versions`` (:func:`eagle_audit.provenance.versions`: eagle-audit, torch, transformers, Python),
``command`` (the exact command line), ``load_average`` (the 1-minute load when the record was made: CPU figures
on a shared machine depend on it), then the script's own fields. Older files in ``bench/results/`` name the
machine under ``machine``, ``device`` or ``host``, as the script of their day wrote it.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
DATA = BENCH / "data"
RESULTS = BENCH / "results"
TESTS = ROOT / "tests"

#: 207 hand-written chat prompts: the demo draft's and the canaries' training text; the last 40 are the
#: trainer fixtures' held-out prompts (bench/evidence/trainer_fixtures.py trains on the first 167)
CANARY_PROMPTS = DATA / "canary_prompts.jsonl"
#: 109 chat prompts written for bench/evidence/fingerprint_growth.py, none equal to a canary prompt
HELDOUT_PROMPTS = DATA / "heldout_prompts.jsonl"
#: the CLI's built-in prompts (shipped in the package)
BUILTIN_PROMPTS = ROOT / "eagle_audit" / "data" / "chat_prompts.jsonl"

def machine() -> str:
    """One line naming the machine: ``[label, ]GPUs, CPU cores, architecture``. The GPUs are torch's view
    (torch is imported here if it is installed; a script that times a torch-free process calls this in its
    parent, after the timing)."""
    parts = [os.environ["EAGLE_AUDIT_BENCH_MACHINE"]] if os.environ.get("EAGLE_AUDIT_BENCH_MACHINE") else []
    try:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        n = 0
    if n:
        names = [torch.cuda.get_device_name(i) for i in range(n)]
        parts.append(", ".join(f"{names.count(g)}x {g}" for g in dict.fromkeys(names)))
    else:
        parts.append("no GPU")
    parts.append(f"{os.cpu_count()} CPU cores")
    parts.append(platform.machine())
    return ", ".join(parts)


def record(**fields: Any) -> dict[str, Any]:
    """A result in the one bench format: machine, versions, command, load average, then ``fields``."""
    from eagle_audit.provenance import versions

    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return {"machine": machine(), "versions": versions(),
            "command": shlex.join([Path(argv[0]).name, *argv[1:]]),
            "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None, **fields}


def write(rec: dict[str, Any], out: str | os.PathLike | None) -> None:
    """Print ``rec`` as JSON on stdout and, when ``out`` is given, write it there (parent folders made)."""
    text = json.dumps(rec, indent=1, default=str)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
