"""How many CPU threads torch may use, chosen so that a busy machine is not oversubscribed.

The default (:func:`default_threads`): ``OMP_NUM_THREADS`` when it is set (the user's word wins);
else the physical cores this process may run on (``os.sched_getaffinity`` intersected with
``/proc/cpuinfo``'s core ids; hyper-threads share a core's floating-point units), less the other work
that competes for them, at least 1. That work is the smaller of the 1-minute load average (rounded
down) and the other processes runnable now (:func:`running_now`: ``/proc/stat``'s ``procs_running``,
the most of a few samples over about 40 ms, less this process): the load average alone still counts,
for about a minute, a command that has just ended, so a run right after another on an idle 2-core box
took one thread while a core stood free (docs/performance.md has the measurement); the runnable count alone is an instant and can miss work
that is about to run again. Assumptions: a Linux ``/proc/cpuinfo`` and ``/proc/stat`` (elsewhere the
logical CPU count and the load average alone are used) and that runnable work competes for those
cores (OpenMP threads that wait for a busy core spin, which makes every step slower than one thread
would be).

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


def running_now(samples: int = 5, gap: float = 0.01) -> int | None:
    """Other processes runnable now: the most of ``samples`` reads of ``/proc/stat``'s ``procs_running``
    (``gap`` s apart), less this one. None where ``/proc/stat`` cannot be read."""
    import time

    seen = []
    for k in range(samples):
        try:
            with open("/proc/stat") as f:
                seen.extend(int(line.split()[1]) for line in f if line.startswith("procs_running"))
        except (OSError, ValueError, IndexError):
            return None
        if k + 1 < samples:
            time.sleep(gap)
    return max(0, max(seen) - 1) if seen else None


def default_threads() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    n = min(physical_cores(), len(_affinity()))
    try:
        busy = int(os.getloadavg()[0])
    except OSError:
        busy = 0
    now = running_now() if busy else None
    if now is not None:
        busy = min(busy, now)
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
