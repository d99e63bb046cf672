"""Simulation vs live speculative decoding on SmolLM2 with a canary: same accept counts, and how much
faster the simulation is. The target-alone greedy generation (shared by both) is timed separately.

    python -m bench.speed.simulate_vs_live --draft DIR [--prompts 4] [--max-new-tokens 64] [--threads 2] [--out FILE]

DIR defaults to the canary bench/evidence/canary_cpu.py writes ($EAGLE_AUDIT_CACHE/bench-canary).
"""

from __future__ import annotations

import argparse
import time

import torch

from bench._support import record, write
from eagle_audit.accept.live import run_live
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, make_cases, simulate
from eagle_audit.draft.read import read_draft
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State
from eagle_audit.target import cache_dir, default_target, load_target


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draft", default=str(cache_dir() / "bench-canary"))
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the record there too")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    target = load_target(default_target())
    spec = read_draft(args.draft)
    states = tuple(State(b) for b in spec.config["eagle_audit_canary"]["trained_boundaries"])
    draft = load_draft_model(spec, target, flags_from_config(spec.config, spec.layout))
    ids = encode(load_prompts(None, args.prompts), target.tokenizer)
    cases, target_s = make_cases(target, ids, args.max_new_tokens)
    t0 = time.perf_counter()
    sim = simulate(draft, cases, capture_cases(target, cases, states), states, args.steps)
    sim_s = time.perf_counter() - t0
    live = run_live(target, draft, cases, states, args.steps, args.max_new_tokens, target_s)
    out = record(**{"accept_length_sim": sim.accept_length, "accept_length_live": live.stats.accept_length,
           "same_accept_counts": live.stats.gains == sim.gains, "lossless": live.lossless,
           "target_alone_s": target_s, "simulation_s": sim_s, "live_s": live.seconds,
           "live_over_simulation": live.seconds / sim_s, "live_speedup_vs_target": target_s / live.seconds,
           "tokens": live.tokens, "threads": args.threads})
    write(out, args.out)


if __name__ == "__main__":
    main()
