"""How long ``eagle-audit train-canary`` takes with its defaults (the README's example): one run of
``eagle-audit train-canary --boundaries 2,15,27 --out DIR --json FILE`` in a fresh process on the demo target
(SmolLM2 GGUF, its safetensors cache warm), wall time and the process's own CPU time (user + sys, robust on a
shared machine), the load average before and after, and the canary's own ``train_seconds``.

Run: python -m bench.speed.train_canary_cli [--threads N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._support import record, write


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="--threads for the command (default: its own choice)")
    ap.add_argument("--out", "--json", dest="out", default=None, help="write the record there too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out, record = Path(tmp) / "canary", Path(tmp) / "canary.json"
        cmd = [sys.executable, "-m", "eagle_audit.cli.main", "train-canary", "--boundaries", "2,15,27", "--out",
               str(out), "--json", str(record)] + (["--threads", str(args.threads)] if args.threads else [])
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"train-canary exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
        canary = json.loads(record.read_text())
    write(record(run="eagle-audit train-canary --boundaries 2,15,27 --out DIR" +
                     (f" --threads {args.threads}" if args.threads else ""),
                 wall_s=round(wall, 1), cpu_s=round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
                 train_s=round(canary.get("train_seconds", 0), 1), sequences=canary.get("sequences"),
                 tokens=canary.get("tokens"), first_token_accuracy=canary.get("first_token_accuracy"),
                 load_before=[round(x, 2) for x in load_before], load_after=[round(x, 2) for x in os.getloadavg()]),
          args.out)

if __name__ == "__main__":
    main()
