"""How many CPU threads torch may use, chosen so that a busy machine is not oversubscribed.

The default (:func:`default_threads`): ``OMP_NUM_THREADS`` when it is set (the user's word wins);
else the physical cores this process may run on (``os.sched_getaffinity`` intersected with
``/proc/cpuinfo``'s core ids; hyper-threads share a core's floating-point units), less the 1-minute
load average of other work (rounded down), at least 1. Assumptions: a Linux ``/proc/cpuinfo``
(elsewhere the logical CPU count is used) and that the load average counts runnable work that
competes for those cores (OpenMP threads that wait for a busy core spin, which makes every step slower
than one thread would be).

:func:`set_threads` applies a count without importing torch: if torch is already imported it calls
``torch.set_num_threads``, else it sets ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads
when it is first imported.
"""

from __future__ import annotations

import os
import sys


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def physical_cores(cpus: set[int] | None = None) -> int:
    """Distinct (package, core) pairs among ``cpus`` (default: this process's affinity)."""
    cpus = _affinity() if cpus is None else cpus
    cores: set[tuple[str, str]] = set()
    try:
        with open("/proc/cpuinfo") as f:
            block: dict[str, str] = {}
            for line in list(f) + ["\n"]:
                if line.strip():
                    key, _, value = line.partition(":")
                    block[key.strip()] = value.strip()
                    continue
                if "processor" in block and int(block["processor"]) in cpus:
                    cores.add((block.get("physical id", "0"), block.get("core id", block["processor"])))
                block = {}
    except (OSError, ValueError):
        cores = set()
    return len(cores) or len(cpus) or 1


def default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    n = min(physical_cores(), len(_affinity()))
    try:
        busy = int(os.getloadavg()[0])
    except OSError:
        busy = 0
    return max(1, n - busy)


def set_threads(n: int | None = None) -> int:
    """Use ``n`` threads (None: :func:`default_threads`); returns the count applied."""
    n = default_threads() if n is None else n
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    else:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(n)
    return n
