"""`eagle-audit accept-rate` end to end against its floor, side by side in one run (issue 19, "Speed of
accept-rate"), on the Llama-3.1-8B-shaped bf16 target of ``bench/speed/gpu_8b.py`` (random weights, 8 prompts x 128
new tokens, one GPU).

The floor (``bench/speed/accept_floor.py``) is a bare process doing the same model work: import transformers, load
the target, generate the continuations batched, one teacher-forced pass with ``output_hidden_states``.
Every figure is one fresh process, wall clock. With ``--reps N`` each rep runs the plain runs back to back;
the result has the ratio of the best of each side (``ratio_ours_to_*``) and, per rep, the pair's ratio and
their median (``pair_ratios_ours_to_*``, ``median_pair_ratio_ours_to_*``).

    python -m bench.speed.accept_speed --work /root/w8b --tokenizer DIR --out DIR [--profile] [--reps 2]

``--profile``: each process also once under ``python -X importtime -m cProfile`` (the profile's
cumulative and own-time tables, the builtin ``compile`` calls, i.e. Python source compiled to bytecode
at import, and the import times summed by top-level package go into OUT). Also written: what the
interpreter does with bytecode here (``sys.flags.dont_write_bytecode``, ``PYTHONPYCACHEPREFIX``, whether
transformers' ``.pyc`` files exist and its folder is writable).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench._support import ROOT, record, write


def bytecode_facts() -> dict:
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    init = Path(spec.origin)
    pyc = Path(importlib.util.cache_from_source(str(init)))
    return {"python": sys.version.split()[0], "dont_write_bytecode": bool(sys.flags.dont_write_bytecode),
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
            "PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX"), "pycache_prefix": sys.pycache_prefix,
            "transformers_pyc": str(pyc), "transformers_pyc_exists": pyc.exists(),
            "transformers_dir_writable": os.access(init.parent, os.W_OK),
            "transformers_pycache_dirs": sum(1 for _ in init.parent.rglob("__pycache__"))}


def run(cmd: list[str], log: Path | None = None, env: dict | None = None) -> tuple[float, int, str, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, cwd=str(ROOT))
    dt = time.perf_counter() - t0
    if log is not None:
        log.write_text(p.stdout[-20000:] + "\n--- stderr ---\n" + p.stderr[-20000:])
    if p.returncode not in (0, 1):
        print(p.stderr[-3000:], flush=True)
    return round(dt, 2), p.returncode, p.stdout, p.stderr


def importtime_summary(stderr: str, top: int = 40) -> str:
    """`-X importtime` lines (self us, cumulative us, module) summed by top-level package, then the
    slowest modules by cumulative time."""
    rows = []
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)), m.group(4)))
    by_pkg: dict[str, int] = defaultdict(int)
    for self_us, _, _, mod in rows:
        by_pkg[mod.split(".")[0]] += self_us
    out = [f"modules imported: {len(rows)}; self time total {sum(r[0] for r in rows) / 1e6:.2f} s", "",
           "self time by top-level package (s):"]
    out += [f"  {v / 1e6:8.3f}  {k}" for k, v in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]]
    out += ["", "slowest top-level imports (cumulative s):"]
    firsts = [r for r in rows if r[2] <= 1]
    out += [f"  {c / 1e6:8.3f}  {m}" for _, c, _, m in sorted(firsts, key=lambda r: -r[1])[:top]]
    return "\n".join(out) + "\n"


def profile_summary(prof: Path) -> str:
    buf = io.StringIO()
    st = pstats.Stats(str(prof), stream=buf)
    total = st.total_tt
    compile_tt = sum(v[2] for k, v in st.stats.items() if k[2] in ("<built-in method builtins.compile>",))
    unmarshal = sum(v[2] for k, v in st.stats.items() if "marshal.loads" in k[2])
    buf.write(f"total {total:.2f} s; builtins.compile (source to bytecode) {compile_tt:.2f} s own time; "
              f"marshal.loads (reading .pyc) {unmarshal:.2f} s\n\n")
    st.sort_stats("cumulative").print_stats(70)
    st.sort_stats("tottime").print_stats(40)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/root/w8b")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--runs", default="floor,floor_no_cudnn,ours", help="which plain runs, in this order, per rep")
    ap.add_argument("--tiny", action="store_true", help="a small model on the CPU: a smoke test of this script")
    args = ap.parse_args()
    from bench.speed import gpu_8b

    if args.tiny:
        gpu_8b.DEV, gpu_8b.TINY = "cpu", True
    dev = gpu_8b.DEV
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    res: dict = record(bytecode=bytecode_facts())
    t0 = time.perf_counter()
    made = gpu_8b.make(work, Path(args.tokenizer)) if not (work / "made.json").exists() else \
        json.loads((work / "made.json").read_text())
    (work / "made.json").write_text(json.dumps(made))
    res["make"], res["make_s"] = made, round(time.perf_counter() - t0, 1)
    target, draft = made["target"], made["draft"]
    new = "16" if args.tiny else "128"
    py = [sys.executable]
    env = {"CUDA_VISIBLE_DEVICES": "0", "PYTHONPATH": str(ROOT)}
    floor = ["-m", "bench.speed.accept_floor", target, "--max-new-tokens", new, "--device", dev]
    ours = ["-m", "eagle_audit.cli.main", "accept-rate", "-t", target, "-d", draft, "--device", dev,
            "--max-new-tokens", new, "--max-prompts", "8", "--gen-batch", "8"]

    def save():
        (out / "accept_speed.json").write_text(json.dumps(res, indent=2) + "\n")

    if args.profile:
        for name, cmd in (("floor", floor), ("ours", ours + ["--json", os.devnull])):
            prof = work / f"{name}.prof"
            t, rc, stdout, stderr = run(py + ["-X", "importtime", "-m", "cProfile", "-o", str(prof)] + cmd, None, env)
            err_tail = "\n".join(line for line in stderr.splitlines() if not line.startswith("import time:"))[-800:]
            res[f"{name}_profiled"] = {"wall_s": t, "exit": rc, **_phases(stdout), "stdout_tail": stdout[-400:],
                                       "stderr_tail": err_tail}
            (out / f"{name}_importtime.txt").write_text(importtime_summary(stderr))
            if prof.exists():
                (out / f"{name}_profile.txt").write_text(profile_summary(prof))
            save()
    plain = {"floor": floor, "floor_no_cudnn": floor + ["--no-cudnn"], "ours": ours + ["--json", str(work / "ours.json")]}
    for i in range(args.reps):
        for name in args.runs.split(","):
            cmd = plain[name]
            t, rc, stdout, _ = run(py + cmd, work / f"{name}_{i}.txt", env)
            res.setdefault(name, []).append({"wall_s": t, "exit": rc, **_phases(stdout)})
            save()
    for name in [r for r in ("floor", "floor_no_cudnn") if r in res and "ours" in res]:
        best_floor = min(r["wall_s"] for r in res[name])
        res[f"ratio_ours_to_{name}"] = round(min(r["wall_s"] for r in res["ours"]) / best_floor, 3)
        # each rep's pair (run back to back), then the median of the pair ratios: what varies between reps
        # (page cache, clocks, the machine's neighbours) falls on both sides of a pair alike
        pairs = [round(o["wall_s"] / f["wall_s"], 3) for f, o in zip(res[name], res["ours"])]
        res[f"pair_ratios_ours_to_{name}"] = pairs
        res[f"median_pair_ratio_ours_to_{name}"] = statistics.median(pairs)
    write(res, out / "accept_speed.json")


def _phases(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and "imports_s" in line:
            return json.loads(line)
    return {}


if __name__ == "__main__":
    main()
