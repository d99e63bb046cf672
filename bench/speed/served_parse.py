"""Parsing served SGLang states: eagle-audit's streaming reader against ``json.loads`` on the same bytes.

A ``/generate`` reply of a Llama-3.1-8B-shaped capture (hidden 4096, 3 slots: 12,288 floats per token), bf16
values as SGLang's ``.tolist()`` then orjson write them (shortest round-trip decimal), written to a file;
each reader runs in a fresh process that reads the file in 1 MiB pieces (as the socket delivers them):
``json`` joins the pieces and calls ``json.loads`` (what a client that keeps the body does), ``stream`` feeds
:class:`eagle_audit.engines.sglang.stream.StatesReader`. Wall time and peak RSS (``ru_maxrss``, dominated by the interpreter's
imports) of each, its CPU seconds (the ratio of medians is ``cpu_speed_vs_json_loads``: on a shared machine
wall time also measures the others' load), and in separate runs the peak of memory allocated while parsing (``tracemalloc``: Python
objects and numpy buffers), which is what "bounded by one request" is about.

    python -m bench.speed.served_parse [--tokens 512] [--out bench/results/served_parse.json]
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
import tracemalloc
from pathlib import Path

from bench._support import ROOT, record, write

H, K = 4096, 3
CHILD = [sys.executable, "-m", "bench.speed.served_parse"]


def make(path: Path, tokens: int) -> None:
    import numpy as np
    import torch

    g = torch.Generator().manual_seed(0)
    rows = (torch.randn(tokens, K * H, generator=g) * 0.5).bfloat16().float()
    with open(path, "w") as f:  # written row by row: the maker itself stays small
        f.write('{"text": "", "output_ids": [1], "meta_info": {"id": "a", "finish_reason": {"type": "length"}, '
                f'"prompt_tokens": {tokens}, "completion_tokens": 1, "cached_tokens": 0, "hidden_states": [[')
        for t in range(tokens):
            f.write(("," if t else "") + json.dumps(rows[t].tolist(), separators=(",", ":")))
        f.write("]]}}")
    del np


def run(mode: str, path: Path, tokens: int) -> dict:
    traced = mode.endswith("-mem")
    mode = mode.removesuffix("-mem")
    if traced:  # Python objects and numpy buffers (numpy reports its allocations to tracemalloc)
        import numpy  # noqa: F401 - imported before tracing starts, as the stream reader needs it

        from eagle_audit.engines.sglang import stream

        tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    with open(path, "rb") as f:
        if mode == "json":
            parts = []
            while chunk := f.read(1 << 20):
                parts.append(chunk)
            body = b"".join(parts)
            del parts
            obj = json.loads(body)
            n = len(obj["meta_info"]["hidden_states"][0])
        else:
            from eagle_audit.engines.sglang.stream import StatesReader

            r = StatesReader(tokens, K * H)
            while chunk := f.read(1 << 20):
                r.feed(chunk)
            _, rows, _ = r.finish()
            n = rows.shape[0]
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"mode": mode, "seconds": dt, "cpu_seconds": cpu, "rows": n, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if traced:
        out = {"mode": mode, "peak_heap_mb": tracemalloc.get_traced_memory()[1] / 2**20}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run(a.child[0], Path(a.child[1]), a.tokens)))
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "reply.json"
        make(path, a.tokens)
        size = path.stat().st_size
        # a baseline process: the interpreter with numpy and eagle_audit.served imported, no reply
        base = subprocess.run([sys.executable, "-c", "import resource, numpy, eagle_audit.engines.sglang.stream; "
                               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"],
                              capture_output=True, text=True, check=True, env=os.environ)
        out = {"tokens": a.tokens, "floats_per_token": K * H, "reply_mb": size / 2**20,
               "states_array_mb": a.tokens * K * H * 4 / 2**20, "baseline_rss_mb": float(base.stdout), "runs": []}
        for rep in range(3):
            for mode in ("json", "stream"):
                p = subprocess.run(CHILD + ["--tokens", str(a.tokens), "--child", mode, str(path)],
                                   capture_output=True, text=True, check=True, env=os.environ, cwd=ROOT)
                out["runs"].append(json.loads(p.stdout))
        out["heap"] = []
        for mode in ("json-mem", "stream-mem"):
            p = subprocess.run(CHILD + ["--tokens", str(a.tokens), "--child", mode, str(path)],
                               capture_output=True, text=True, check=True, env=os.environ, cwd=ROOT)
            out["heap"].append(json.loads(p.stdout))
    best = {m: min((r for r in out["runs"] if r["mode"] == m), key=lambda r: r["seconds"]) for m in ("json", "stream")}
    out["speed_vs_json_loads"] = best["json"]["seconds"] / best["stream"]["seconds"]
    # CPU seconds (user + sys of the parse): on a shared machine wall time also measures the others' load
    cpu = {m: sorted(r["cpu_seconds"] for r in out["runs"] if r["mode"] == m) for m in ("json", "stream")}
    out["cpu_speed_vs_json_loads"] = cpu["json"][len(cpu["json"]) // 2] / cpu["stream"][len(cpu["stream"]) // 2]
    out["best"] = best
    write(record(**out), a.out)


if __name__ == "__main__":
    main()
