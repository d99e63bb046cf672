"""`eagle-audit fingerprint` on the demo (SmolLM2-135M GGUF + the shipped demo draft), end to end in a fresh process,
with the confirmation (issue 29 goal 4: within 60 s on the 2-core CPU box, with the same answers; issue 27: what the
confirmation's prompts cost).

Each configuration runs ``--runs`` times: wall time and the child's CPU time (user + sys, from ``resource``; on a
shared box wall time also measures other people's load), the 1-minute load average before and after, the answers
(guarded states, verdict, finding codes, the confirmation's accept lengths) and the stage seconds the result records.
Configurations: ``default`` (search 8 prompts, second round up to 8, confirmation 8) and ``no-confirmation``
(``--confirm-prompts 0``: what the run cost before the confirmation, whose findings from the weights then do not stand).

Run: python -m bench.speed.fingerprint_demo [--runs 1] [--only default] [--out bench/results/fingerprint_demo_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench._support import ROOT, record, write

CONFIGS = {"default": [], "no-confirmation": ["--confirm-prompts", "0"]}


def run_once(extra: list[str], env: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fp.json")
        cmd = [sys.executable, "-m", "eagle_audit.cli.main", "fingerprint", "--json", out, *extra]
        load0 = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode not in (0, 1) or not os.path.isfile(out):
            raise SystemExit(f"fingerprint exited {proc.returncode} (JSON written: {os.path.isfile(out)}): "
                             f"{proc.stderr[-2000:]}")
        data = json.load(open(out))
    conf = data.get("confirmation") or {}
    return {"wall_s": round(wall, 2), "cpu_s": round((after.ru_utime - before.ru_utime)
                                                      + (after.ru_stime - before.ru_stime), 2),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2), "exit": proc.returncode,
            "answer": {"states": data["inferred"]["states"], "verdict": data["verdict"],
                       "findings": [f"{f['code']}" + (f" slot {f['slot']}" if f.get("slot") is not None else "")
                                    for f in data["findings"]],
                       "fix": data["fix"]["resolved"] if data.get("fix") else None,
                       "confirmation": {"accept_length": {k: w["accept_length"] for k, w in
                                                          conf.get("wirings", {}).items()},
                                        "stands": conf.get("stands"), "slots": conf.get("slots"),
                                        "fix_gain": conf.get("fix_gain")} if conf else None},
            "seconds": {**data["search"].get("seconds", {}), "confirmation": conf.get("seconds")},
            "scored_tokens": data["inferred"]["scored_tokens"], "confirm_tokens": conf.get("scored_tokens")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", choices=sorted(CONFIGS), action="append")
    ap.add_argument("--out", default=None, help="write the record here")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    configs = {}
    for name in args.only or list(CONFIGS):
        runs = [run_once(CONFIGS[name], env) for _ in range(args.runs)]
        configs[name] = {"args": CONFIGS[name], "wall_s": statistics.median(r["wall_s"] for r in runs),
                         "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                         "same_answers": all(r["answer"] == runs[0]["answer"] for r in runs), "runs": runs}
        print(name, json.dumps(runs[-1]), file=sys.stderr, flush=True)
    write(record(bench="fingerprint_demo", runs=args.runs, configs=configs), args.out)


if __name__ == "__main__":
    main()
