"""CPU benchmark of the CLI's fixed costs on the demo (SmolLM2 GGUF, its safetensors cache warm):
interpreter start, ``--help``, ``layers --static``, and ``layers`` end to end against (target load +
the audit's forward + interpreter start) measured in one process.

Each command runs ``--runs`` times in a fresh process; wall time and the process's own CPU time
(user + sys, from ``resource``: robust on a shared machine where wall time mostly measures other
people's load) are reported as medians, with the load average before and after.

Run: python -m bench.speed.cli_cpu [--runs 5] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from bench._support import record, write


def timed(cmd: list[str], env: dict) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, capture_output=True, env=env).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), rc


def median_of(cmd: list[str], runs: int, env: dict) -> dict:
    walls, cpus, rcs = [], [], set()
    for _ in range(runs):
        w, c, rc = timed(cmd, env)
        walls.append(w)
        cpus.append(c)
        rcs.add(rc)
    return {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
            "exit": sorted(rcs)}


def in_process(threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from eagle_audit.layers.run import measure
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target

    c0, t0 = time.process_time(), time.perf_counter()
    tgt = load_target(default_target())
    load = (time.perf_counter() - t0, time.process_time() - c0)
    ids = encode(load_prompts(None, 8), tgt.tokenizer, 256)
    trained, served = (State(0), State(3), State(16)), (State(2), State(15), State(27))
    c0, t0 = time.process_time(), time.perf_counter()
    measure(tgt, ids, trained, served, (0, 29), True)
    fwd = (time.perf_counter() - t0, time.process_time() - c0)
    return {"load_wall_s": round(load[0], 3), "load_cpu_s": round(load[1], 3), "forward_wall_s": round(fwd[0], 3),
            "forward_cpu_s": round(fwd[1], 3), "tokens": sum(map(len, ids))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", "--json", dest="out", default=None, help="write the record there too")
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    cli = [sys.executable, "-m", "eagle_audit.cli.main"]
    subprocess.run(cli + ["layers", "--json", os.devnull], capture_output=True, env=env)  # warm the GGUF cache
    res: dict = {"threads": args.threads, "runs": args.runs, "loadavg_before": os.getloadavg()}
    res["interpreter_start"] = median_of([sys.executable, "-c", "pass"], args.runs, env)
    res["help"] = median_of(cli + ["--help"], args.runs, env)
    res["layers_help"] = median_of(cli + ["layers", "--help"], args.runs, env)
    res["layers_static"] = median_of(cli + ["layers", "--static", "--json", os.devnull], args.runs, env)
    res["layers"] = median_of(cli + ["layers", "--json", os.devnull], max(1, args.runs // 2), env)
    res["in_process"] = in_process(args.threads)
    ip, start = res["in_process"], res["interpreter_start"]
    res["layers_budget_wall_s"] = round(2 * (ip["load_wall_s"] + ip["forward_wall_s"] + start["wall_s"]), 3)
    res["layers_budget_cpu_s"] = round(2 * (ip["load_cpu_s"] + ip["forward_cpu_s"] + start["cpu_s"]), 3)
    res["static_beyond_start"] = {k: round(res["layers_static"][k] - start[k], 3) for k in ("wall_s", "cpu_s")}
    res["loadavg_after"] = os.getloadavg()
    write(record(**res), args.out)


if __name__ == "__main__":
    main()
