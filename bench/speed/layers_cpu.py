"""CPU benchmark: the SmolLM2 `eagle-audit layers` demo end to end, after the first cache.

Runs the CLI as a user would (a fresh process each time: imports, target load from the safetensors
cache, 8 built-in prompts, a full scan of all 32 states, diagnosis, rendering) and reports the
median wall time over --runs runs. The first, uncounted run builds the GGUF cache.

Run: python -m bench.speed.layers_cpu [--runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench._support import record, write


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the record there too")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "eagle_audit.cli.main", "layers", "--json", os.devnull]
    subprocess.run(cmd, capture_output=True)  # warm the GGUF cache and the demo draft
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, capture_output=True).returncode
        times.append(time.perf_counter() - t0)
        assert rc == 1, f"the demo should report a mismatch (exit 1), got {rc}"
    write(record(runs_s=[round(t, 2) for t in times], median_s=round(statistics.median(times), 2)), args.out)


if __name__ == "__main__":
    main()
