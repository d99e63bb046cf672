"""Reading vLLM's saved states: eagle-audit's ``load_states`` against safetensors' own loader, on one file.

A file as vLLM 0.33.0's ``ExampleHiddenStatesConnector`` writes it (``{"hidden_states": [T, K, H] bf16,
"token_ids": [T] int64}``, ``safetensors.torch.save_file``), Llama-3.1-8B-shaped (K = 3, H = 4096). Each reader
runs in a fresh process with torch already imported (as in an eagle-audit run), in turn, several times:

* ``safetensors``: ``safetensors.torch.load_file`` (what vLLM's ``load_hidden_states`` calls), ``.float()``, a
  finiteness check: the yardstick;
* ``read``: what eagle-audit did before (the tensor's bytes read into a ``bytearray``, ``torch.frombuffer``,
  ``.float()``, a finiteness check);
* ``load_states``: :func:`eagle_audit.engines.vllm.states.load_states` (header and token checks included).

Per run: CPU seconds (``time.process_time``) and wall seconds of the load alone, the first in the process and a
second one (a run reads one file per prompt), and how far the first load raised the process's peak resident
memory (``VmHWM`` after minus before, MiB; mapped file pages count in it).
Medians per reader, and each reader's ratio to the yardstick pair by pair.

    python -m bench.speed.served_load [--tokens 2048] [--runs 5] [--out bench/results/served_load_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._support import ROOT, record, write

CHILD = [sys.executable, "-m", "bench.speed.served_load"]

H, K = 4096, 3
MODES = ("safetensors", "read", "load_states")
KEYS = ("first_cpu_s", "first_wall_s", "second_cpu_s", "second_wall_s")


def make(path: Path, tokens: int) -> None:
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    save_file({"hidden_states": torch.randn(tokens, K, H, generator=g).bfloat16(),
               "token_ids": torch.arange(tokens, dtype=torch.int64)}, str(path))


def _hwm_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(mode: str, path: Path, tokens: int) -> dict:
    import numpy as np
    import torch

    from eagle_audit.engines.launch import Capture  # noqa: F401 - imported before timing, as in a run
    from eagle_audit.engines.vllm.states import load_states
    from eagle_audit.states import State

    capture = Capture("vllm", tuple(State(k) for k in (2, 17, 30)), H)
    def load():
        if mode == "safetensors":
            from safetensors.torch import load_file

            x = load_file(str(path))["hidden_states"].float().numpy()
            assert np.isfinite(x).all()
        elif mode == "read":
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                head = json.loads(f.read(n))
                b0, b1 = head["hidden_states"]["data_offsets"]
                f.seek(8 + n + b0)
                raw = bytearray(f.read(b1 - b0))
            x = torch.frombuffer(raw, dtype=torch.bfloat16).reshape(head["hidden_states"]["shape"]).float().numpy()
            assert np.isfinite(x).all()
        else:
            x = load_states(path, capture, list(range(tokens)))
        return x

    out = {"mode": mode}
    for which in ("first", "second"):  # a run reads one file per prompt: the first in a process, then the rest
        before = _hwm_mib()
        c0, w0 = time.process_time(), time.perf_counter()
        x = load()
        out[f"{which}_cpu_s"], out[f"{which}_wall_s"] = time.process_time() - c0, time.perf_counter() - w0
        if which == "first":
            out["peak_rise_mib"] = _hwm_mib() - before
        out["sum"] = float(x.sum(dtype=np.float64))
        del x
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run(a.child[0], Path(a.child[1]), a.tokens)))
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "req.safetensors"
        make(path, a.tokens)
        out = {"tokens": a.tokens, "slots": K, "hidden": H, "file_mib": path.stat().st_size / 2**20,
               "states_array_mib": a.tokens * K * H * 4 / 2**20, "runs": []}
        for rep in range(a.runs + 1):  # the first round warms the page cache and is not counted
            for mode in MODES:
                p = subprocess.run(CHILD + ["--tokens", str(a.tokens), "--child", mode, str(path)],
                                   capture_output=True, text=True, check=True, env=os.environ, cwd=ROOT)
                if rep:
                    out["runs"].append(json.loads(p.stdout))
    runs = out["runs"]
    assert len({r["sum"] for r in runs}) == 1, "the readers disagree"
    out["median"] = {m: {k: statistics.median(r[k] for r in runs if r["mode"] == m)
                         for k in KEYS + ("peak_rise_mib",)} for m in MODES}
    base = [r for r in runs if r["mode"] == "safetensors"]
    out["ratio_to_safetensors"] = {m: {k: statistics.median(r[k] / b[k] for r, b in zip(
        (r for r in runs if r["mode"] == m), base)) for k in KEYS} for m in MODES[1:]}
    write(record(**out), a.out)


if __name__ == "__main__":
    main()
