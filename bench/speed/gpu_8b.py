"""GPU benchmark on a Llama-3.1-8B-shaped bf16 target (random weights): `layers` end to end against
(load + forward + interpreter start), `accept-rate` with batched against one-at-a-time generation,
and the target split over several GPUs with ``--device-map auto``.

Random weights give arbitrary EOS-free continuations: fine for timing, meaningless for acceptance.
Every CLI run is a fresh process (``python -m eagle_audit.cli.main``), timed by wall clock, as a user
would see it; ``--old-code DIR`` also times the same commands with another checkout on PYTHONPATH
(the code before this change).

Steps (``--steps``, comma-separated):

* ``make``: write the target (config of Llama-3.1-8B, 32 layers, bf16 safetensors, a tokenizer from
  ``--tokenizer``) and a random 3-slot EAGLE-3 draft for it (hidden 4096, draft vocab 32000, bf16) into
  ``--work``.
* ``layers``: interpreter start, target load alone, the audit's forward alone (the full scan over the
  prompts), then ``eagle-audit layers`` end to end (new code, and old code with ``--old-code``).
* ``accept``: ``eagle-audit accept-rate --max-new-tokens 128`` end to end over 8 prompts, batched
  (``--gen-batch 8``) and one at a time (``--gen-batch 1``; and old code with ``--old-code``), and the
  generation step alone both ways in one process.
* ``devmap``: with all visible GPUs: capture of every state with ``device_map="auto"`` compared with
  one GPU (bit for bit), and `layers` / `accept-rate` end to end with ``--device-map auto``.

Run: python -m bench.speed.gpu_8b --work /root/w8b --tokenizer DIR --out results.json [--old-code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench._support import ROOT, record, write

LOGS = "/tmp"
DEV = "cuda"  # --tiny: "cpu" (a smoke test of this script on a small model)
TINY = False


def sync() -> None:
    import torch

    if DEV == "cuda":
        torch.cuda.synchronize()


def sh(cmd: list[str], env_path: str, log: Path | None = None, extra_env: dict | None = None) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": env_path, **(extra_env or {})}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")  # not the checkout: -m puts cwd first
    dt = time.perf_counter() - t0
    if log is not None:
        log.write_text(p.stdout[-20000:] + "\n--- stderr ---\n" + p.stderr[-20000:])
    if p.returncode not in (0, 1):
        print(p.stderr[-3000:], flush=True)
    return round(dt, 2), p.returncode


def make(work: Path, tokenizer: Path) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle_audit.draft.write import draft_config, random_weights, write_draft

    target, draft = work / "llama-8b-random", work / "eagle3-8b-random"
    H, I, N, V = (64, 128, 6, 49152) if TINY else (4096, 14336, 32, 128256)
    cfg = LlamaConfig(hidden_size=H, intermediate_size=I, num_hidden_layers=N, num_attention_heads=32 if H > 64 else 4,
                      num_key_value_heads=8 if H > 64 else 2, vocab_size=V, max_position_embeddings=131072, rope_theta=500000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=128000, eos_token_id=[128001, 128009],
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      architectures=["LlamaForCausalLM"])
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(DEV):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    model.save_pretrained(target)
    del model
    for f in tokenizer.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, target / f.name)
    t_target = time.perf_counter() - t0
    dc = draft_config(hidden_size=H, target_hidden_size=H, num_aux=3, vocab_size=V, draft_vocab_size=min(V, 32000),
                      num_heads=cfg.num_attention_heads, num_kv_heads=cfg.num_key_value_heads, intermediate_size=I,
                      nested_ids=[1, N // 2, N - 3],
                      rope_theta=500000.0, extra={"torch_dtype": "bfloat16"})
    sd = random_weights(dc, num_aux=3, seed=0)
    write_draft(draft, dc, {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in sd.items()})
    return {"target": str(target), "draft": str(draft), "make_target_s": round(t_target, 1),
            "target_bytes": sum(f.stat().st_size for f in target.glob("*.safetensors"))}


def in_process_layers(target_dir: str) -> dict:
    """Load alone and the audit's forward alone (the same scan `layers` runs), in one process."""
    import torch

    from eagle_audit.layers.run import measure
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.source import as_source
    from eagle_audit.states import State
    from eagle_audit.target import load_target

    sync()
    t0 = time.perf_counter()
    tgt = load_target(target_dir, device=DEV)
    sync()
    load_s = time.perf_counter() - t0
    ids = encode(load_prompts(None, 8), tgt.tokenizer, 256)
    n = tgt.info.num_layers
    trained = (State(1), State(n // 2), State(n - 3))
    served = (State(2), State(n // 2), State(n - 3))
    measure(tgt, ids[:1], trained, served, (0, n - 1), True)  # warm-up (CUDA kernels, cuBLAS)
    as_source(tgt).forget()  # the source memoises forwards: time them, not the memo
    sync()
    t0 = time.perf_counter()
    measure(tgt, ids, trained, served, (0, n - 1), True)
    sync()
    fwd_s = time.perf_counter() - t0
    del tgt
    return {"load_s": round(load_s, 2), "forward_scan_s": round(fwd_s, 3), "prompts": len(ids),
            "tokens": sum(len(i) for i in ids)}


def in_process_generation(target_dir: str, device_map: str | None = None) -> dict:
    import torch

    from eagle_audit.simulate.accept import make_cases
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.source import as_source
    from eagle_audit.target import load_target

    tgt = load_target(target_dir, device=DEV, device_map=device_map)
    ids = encode(load_prompts(None, 8), tgt.tokenizer, 256)
    make_cases(tgt, ids[:1], 4, batch=1)  # warm-up of both paths
    make_cases(tgt, ids, 4, batch=8)
    out = {}
    for batch, key in ((1, "batch1"), (8, "batch8"), (8, "batch8_again")):
        as_source(tgt).forget()  # the source memoises continuations: time the generation, not the memo
        sync()
        t0 = time.perf_counter()
        cases, _ = make_cases(tgt, ids, 16 if TINY else 128, batch=batch)
        sync()
        out[f"generate_{key}_s"] = round(time.perf_counter() - t0, 2)
        out[f"generated_tokens_{key}"] = sum(len(c.continuation) for c in cases)
        out[f"continuations_{key}"] = [list(c.continuation[:16]) for c in cases]
    # reference: transformers' own generate, batched the same way (timing only)
    from eagle_audit.source.forwards import eos_ids

    pad = min(eos_ids(tgt) or {0})
    w = max(map(len, ids))
    x = torch.tensor([[pad] * (w - len(p)) + p for p in ids], device=tgt.input_device)
    m = torch.tensor([[0] * (w - len(p)) + [1] * len(p) for p in ids], device=tgt.input_device)
    sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        tgt.model.generate(input_ids=x, attention_mask=m, max_new_tokens=16 if TINY else 128, min_new_tokens=16 if TINY else 128,
                           do_sample=False, pad_token_id=pad)
    sync()
    out["hf_generate_batch8_s"] = round(time.perf_counter() - t0, 2)
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    as_source(tgt).forget()
    with profile(activities=acts) as prof:
        make_cases(tgt, ids, 8, batch=8)
        sync()
    Path(LOGS, "generate_batch8_profile.txt").write_text(
        prof.key_averages().table(sort_by="cpu_time_total", row_limit=30) + "\n\n"
        + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    out["continuations_batch8"] = out.pop("continuations_batch8_again")
    same = sum(a == b for a, b in zip(out["continuations_batch8"], out["continuations_batch1"]))
    out["first16_equal_rows"] = f"{same}/{len(cases)}"
    for k in ("continuations_batch8", "continuations_batch1"):
        del out[k]
    del tgt
    return out


def devmap_capture(target_dir: str) -> dict:
    import torch

    from eagle_audit.capture import capture_states
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import all_states
    from eagle_audit.target import load_target

    one = load_target(target_dir, device="cuda:0")
    ids = torch.tensor([encode(load_prompts(None, 1), one.tokenizer, 256)[0]])
    states = all_states(one.info.num_layers)
    ref = {s: t.cpu() for s, t in capture_states(one, ids, states).items()}
    del one
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    split = load_target(target_dir, device="cuda", device_map="auto")
    load_s = time.perf_counter() - t0
    devices = sorted({str(p.device) for p in split.model.parameters()})
    layer_dev = [str(next(layer.parameters()).device) for layer in split.stack.layers]
    caps = capture_states(split, ids, states)
    equal = all(torch.equal(ref[s], caps[s].cpu()) for s in states)
    return {"gpus": torch.cuda.device_count(), "devices": devices, "load_auto_s": round(load_s, 2),
            "layers_per_device": {d: layer_dev.count(d) for d in sorted(set(layer_dev))},
            "capture_equal_to_one_gpu": equal, "states": len(states), "tokens": int(ids.shape[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/root/w8b")
    ap.add_argument("--tokenizer", required=True, help="a folder with tokenizer files (any tokenizer works)")
    ap.add_argument("--out", default="gpu_8b.json")
    ap.add_argument("--logs", default=None, help="folder for the CLI runs' output")
    ap.add_argument("--old-code", default=None, help="a checkout of the code before, to time the same commands")
    ap.add_argument("--steps", default="make,layers,accept,devmap")
    ap.add_argument("--tiny", action="store_true", help="a small model on the CPU: a smoke test of this script")
    args = ap.parse_args()
    import torch

    global DEV, TINY, LOGS
    LOGS = args.logs or args.work
    if args.tiny:
        DEV, TINY = "cpu", True

    steps = args.steps.split(",")
    work, logs = Path(args.work), Path(args.logs or args.work)
    work.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    new = str(ROOT)
    res: dict = record()
    if os.path.exists(work / "made.json"):
        res["make"] = json.loads((work / "made.json").read_text())
    if "make" in steps and "make" not in res:
        res["make"] = make(work, Path(args.tokenizer))
        (work / "made.json").write_text(json.dumps(res["make"]))
    T, D = res["make"]["target"], res["make"]["draft"]
    py = [sys.executable]
    cli = py + ["-m", "eagle_audit.cli.main"]

    def save():
        write(res, args.out)

    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    if "layers" in steps:
        r: dict = {"interpreter_start_s": sh(py + ["-c", "pass"], new)[0]}
        r.update(in_process_layers(T))
        cmd = cli + ["layers", "-t", T, "-d", D, "--device", DEV, "--json", os.devnull]
        r["cli_new_s"], r["cli_new_exit"] = sh(cmd, new, logs / "layers_new.txt", one_gpu)
        prof = logs / "layers_new.prof"
        sh(py + ["-m", "cProfile", "-o", str(prof)] + cmd[1:], new, None, one_gpu)
        if prof.exists():
            import io
            import pstats

            buf = io.StringIO()
            pstats.Stats(str(prof), stream=buf).sort_stats("cumulative").print_stats(40)
            (logs / "layers_new_profile.txt").write_text(buf.getvalue())
        if args.old_code:
            r["cli_old_s"], r["cli_old_exit"] = sh(cmd, args.old_code, logs / "layers_old.txt", one_gpu)
        r["budget_s"] = round(2 * (r["load_s"] + r["forward_scan_s"] + r["interpreter_start_s"]), 2)
        res["layers"] = r
        save()
    if "accept" in steps:
        r = {}
        base = cli + ["accept-rate", "-t", T, "-d", D, "--device", DEV, "--max-new-tokens", "16" if TINY else "128",
                      "--max-prompts", "8"]
        r["cli_batched_s"], r["cli_batched_exit"] = sh(base + ["--gen-batch", "8", "--json", str(logs / "accept_b8.json")],
                                                       new, logs / "accept_b8.txt", one_gpu)
        r.update(in_process_generation(T))
        if args.old_code:
            r["cli_old_s"], r["cli_old_exit"] = sh(base, args.old_code, logs / "accept_old.txt", one_gpu)
        res["accept"] = r
        save()
    if "devmap" in steps and torch.cuda.device_count() > 1:
        r = devmap_capture(T)
        cmd = cli + ["layers", "-t", T, "-d", D, "--device", "cuda", "--device-map", "auto",
                     "--json", str(logs / "layers_auto.json")]
        r["cli_layers_auto_s"], r["cli_layers_auto_exit"] = sh(cmd, new, logs / "layers_auto.txt")
        cmd = cli + ["accept-rate", "-t", T, "-d", D, "--device", "cuda", "--device-map", "auto", "--max-new-tokens",
                     "128", "--max-prompts", "8", "--json", str(logs / "accept_auto.json")]
        r["cli_accept_auto_s"], r["cli_accept_auto_exit"] = sh(cmd, new, logs / "accept_auto.txt")
        try:
            a, b = (json.loads((logs / f).read_text()) for f in ("accept_auto.json", "accept_b8.json"))
            r["accept_auto_equals_one_gpu"] = a["accept_length"] == b["accept_length"]
            r["accept_length_auto"] = a["accept_length"]
        except (OSError, ValueError, KeyError) as e:
            r["accept_compare_error"] = repr(e)
        res["devmap"] = r
        save()
    save()


if __name__ == "__main__":
    main()
