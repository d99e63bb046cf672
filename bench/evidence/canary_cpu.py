"""Train a SmolLM2 canary on the CPU and measure its acceptance under the trained wiring and under the
seed mis-wiring.

The canary is trained on the target's own greedy continuations of bench/data/canary_prompts.jsonl
(207 hand-written prompts, disjoint from the built-in chat set; batched generation with the states
captured on the way) within ``--budget-s`` (default 600 s: data generation + training; the cosine
schedule is fitted to the time the data leaves; model loading and evaluation are outside it and
reported) and evaluated on held-out prompts (the first 8 of the built-in chat set, which training
never sees), chain mode, 3 draft steps, under its trained wiring and under a mis-wiring. The two
wirings are the project's seed pair, SGLang's default [2, 15, 27] and [0, 3, 16] (embedding output,
outputs of layers 2 and 15):

* default (``--trained 2,15,27 --served 0,3,16``): a canary trained on the SGLang default and fed
  [0, 3, 16] (what vLLM feeds when a config carries those ids verbatim at the top level);
* ``--trained 0,3,16 --served 2,15,27``: the demo's failure (trained on [0, 3, 16], served SGLang's
  default because SGLang ignores top-level ids). Its trained AL is lower: [0, 3, 16] carries no late
  state, so the canary predicts worse under its own wiring.

Usage:

    python -m bench.evidence.canary_cpu [--trained 2,15,27] [--served 0,3,16] [--budget-s 600] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from bench._support import CANARY_PROMPTS, record, write
from eagle_audit.accept.canary import CanaryOptions, train_canary
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, make_cases, simulate
from eagle_audit.draft.read import read_draft
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State
from eagle_audit.target import cache_dir, default_target, load_target


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="default: $EAGLE_AUDIT_CACHE/bench-canary-<trained>")
    ap.add_argument("--trained", default="2,15,27")
    ap.add_argument("--served", default="0,3,16")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--budget-s", type=float, default=600.0, help="data generation + training seconds")
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--val-fraction", type=float, default=0.0)
    ap.add_argument("--head-lr-scale", type=float, default=0.0)
    ap.add_argument("--init", default="target", choices=["target", "random"])
    ap.add_argument("--batch-size", type=int, default=None, help="sequences per optimizer step (default: CanaryOptions')")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--json", default=None, help="also write the JSON here")
    ap.add_argument("--eval-prompts", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2,
                    help="torch threads; on a contended 2-core machine 1 thread is often much faster (OpenMP spinning)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    TRAINED = tuple(int(x) for x in args.trained.split(","))
    SERVED = tuple(int(x) for x in args.served.split(","))
    args.out = args.out or str(cache_dir() / ("bench-canary-" + "-".join(map(str, TRAINED))))
    t_all = time.perf_counter()
    target = load_target(default_target())
    train_ids = encode(load_prompts(str(CANARY_PROMPTS)), target.tokenizer)
    load0 = os.getloadavg()
    res = train_canary(target, train_ids, CanaryOptions(boundaries=TRAINED, epochs=args.epochs,
                                                        max_new_tokens=args.max_new_tokens, total_budget_s=args.budget_s,
                                                        gen_batch=args.gen_batch, val_fraction=args.val_fraction,
                                                        head_lr_scale=args.head_lr_scale, init=args.init,
                                                        **({"batch_size": args.batch_size} if args.batch_size else {}),
                                                        **({"lr": args.lr} if args.lr else {})),
                       args.out, log=lambda m: print(f"  [{time.perf_counter() - t_all:5.0f}s] {m}", flush=True))
    load1 = os.getloadavg()
    spec = read_draft(args.out)
    draft = load_draft_model(spec, target, flags_from_config(spec.config, spec.layout))
    t_eval = time.perf_counter()
    held = encode(load_prompts(None, args.eval_prompts), target.tokenizer)
    cases, _ = make_cases(target, held, 64)
    trained, served = tuple(map(State, TRAINED)), tuple(map(State, SERVED))
    caps = capture_cases(target, cases, trained + served)
    st = simulate(draft, cases, caps, trained, args.steps)
    sv = simulate(draft, cases, caps, served, args.steps)
    total = time.perf_counter() - t_all
    out = record(**{"trained_wiring": [s.label() for s in trained], "served_wiring": [s.label() for s in served],
           "accept_length_trained": st.accept_length, "accept_length_served": sv.accept_length,
           "per_position_trained": st.per_position, "per_position_served": sv.per_position,
           "canary": res.to_json(), "eval_seconds": time.perf_counter() - t_eval, "total_seconds": total,
           "num_steps": args.steps, "eval_prompts": len(held), "threads": torch.get_num_threads(),
           "data_plus_train_seconds": res.data_seconds + res.train_seconds, "budget_s": args.budget_s,
           "loadavg_before_training": load0, "loadavg_after_training": load1, "loadavg_end": os.getloadavg()})
    write(out, args.json)
    print(f"canary AL trained {st.accept_length:.3f} vs mis-wired {sv.accept_length:.3f}; "
          f"data {res.data_seconds:.0f}s + train {res.train_seconds:.0f}s; total {total:.0f}s")


if __name__ == "__main__":
    main()
