"""Where `eagle-audit accept-rate` spends its CPU time, phase by phase, in one process (issue 29).

Runs the CLI in this process (its arguments after ``--``) with CPU and wall timers around the library's phases:
the target's load (``target.load_target``), the batched greedy generation (``source/forwards.py``
``greedy_generate_batch``), the teacher-forced capture (``capture.capture_states``) and the draft simulations
(``simulate/wiring.py`` ``simulate``: chain, tree or block). ``imports_cpu_s`` is the CPU until the CLI runs (its modules; torch and
transformers come later, inside the load and the rest); ``rest_cpu_s`` the total less the phases and those
imports (torch's import, configs, the draft, conventions, rendering). Compare with ``accept_floor.py``'s phases
(its ``--dtype auto`` follows eagle-audit's: float32 on the CPU). The record is written when the CLI exits.

    OMP_NUM_THREADS=1 python -m bench.speed.accept_phases [--out FILE] [-- accept-rate options]
"""

from __future__ import annotations

import time

C0, W0 = time.process_time(), time.perf_counter()

import atexit  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402

PHASES = {"load": ("eagle_audit.target", "load_target"),
          "generate": ("eagle_audit.source.forwards", "greedy_generate_batch"),
          "capture": ("eagle_audit.capture", "capture_states"),
          "simulate": ("eagle_audit.simulate.wiring", "simulate")}  # chain, tree or block
#: modules that import a phase's function by name at their top: the timed one is put there too
USERS = {"simulate": ("eagle_audit.accept.run",)}
acc: dict[str, list[float]] = {}


def _timed(key: str, f):
    @functools.wraps(f)
    def g(*a, **k):
        c, w = time.process_time(), time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            s = acc.setdefault(key, [0.0, 0.0, 0])
            s[0] += time.process_time() - c
            s[1] += time.perf_counter() - w
            s[2] += 1
    return g


def main() -> None:
    args = sys.argv[1:]
    cli_args = args[args.index("--") + 1:] if "--" in args else []
    own = args[: args.index("--")] if "--" in args else args
    out = own[own.index("--out") + 1] if "--out" in own else None
    from eagle_audit.cli.main import main as cli

    for key, (mod, name) in PHASES.items():
        m = importlib.import_module(mod)
        g = _timed(key, getattr(m, name))
        setattr(m, name, g)
        for user in USERS.get(key, ()):
            setattr(importlib.import_module(user), name, g)
    imports = time.process_time() - C0

    def report() -> None:
        from bench._support import record, write

        total = time.process_time() - C0
        fields = {"imports_cpu_s": round(imports, 3)}
        for key, (cpu, wall, n) in acc.items():
            fields |= {f"{key}_cpu_s": round(cpu, 3), f"{key}_wall_s": round(wall, 3), f"{key}_calls": n}
        fields["rest_cpu_s"] = round(total - imports - sum(v[0] for v in acc.values()), 3)
        fields |= {"total_cpu_s": round(total, 3), "total_wall_s": round(time.perf_counter() - W0, 3)}
        write(record(**fields), out)

    atexit.register(report)
    sys.argv = ["eagle-audit", "accept-rate", *cli_args]
    cli()


if __name__ == "__main__":
    main()
