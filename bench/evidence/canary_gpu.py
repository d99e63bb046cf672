"""Train a SmolLM2 canary on one GPU in one invocation (~9 minutes) and measure its held-out acceptance
under the trained wiring and under the seed mis-wiring; write the figures as JSON to ``--out``.

Same protocol as bench/evidence/canary_cpu.py, scaled up: the target's greedy continuations of
bench/data/canary_prompts.jsonl plus ``--sampled-copies`` seeded sampled continuations per prompt (batched
generation on the GPU, states captured on the way), a longer ``--max-new-tokens``, bf16 autocast with
float32 master weights, and a training schedule fitted to the time left. Evaluation: held-out prompts
(the first ``--eval-prompts`` of the built-in chat set, which training never sees), chain mode, 3 draft
steps, float32, exact greedy simulation.

Wirings (the project's seed pair):

* ``A``: trained on ``--trained`` (default SGLang's [2, 15, 27]), fed ``--served`` ([0, 3, 16]);
* ``B`` (unless ``--no-reverse``): a second canary trained on ``--served`` and served ``--trained``
  (the demo's failure: SGLang ignores top-level ids and serves its default). It shares the generated
  data (one capture of the union of states) and gets ``--reverse-share`` of the training time.

Usage (one invocation does everything; no network):

    python -m bench.evidence.canary_gpu --target /path/to/SmolLM2-135M-Instruct.Q4_1.gguf --out canary_gpu.json

Budget: ``--total-budget-s`` (default 500) covers loading, data, both trainings and evaluation; the
training schedules are fitted to what is left (evaluation is budgeted at ``--eval-reserve-s``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from bench._support import CANARY_PROMPTS, record, write
from eagle_audit.accept.canary import CanaryOptions, make_data, train_canary
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, make_cases, simulate
from eagle_audit.draft.read import read_draft
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State
from eagle_audit.target import default_target, load_target


def _parse(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split(","))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=None, help="target model: a .gguf file, a model directory (default: the bundled SmolLM2)")
    ap.add_argument("--out", default="canary_gpu.json", help="JSON results file")
    ap.add_argument("--canary-dir", default=None, help="where the canaries are written (default: a temporary directory)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="training precision")
    ap.add_argument("--trained", default="2,15,27")
    ap.add_argument("--served", default="0,3,16")
    ap.add_argument("--no-reverse", action="store_true", help="train only the --trained canary")
    ap.add_argument("--reverse-share", type=float, default=0.35, help="share of the training time for canary B")
    ap.add_argument("--prompts", default=str(CANARY_PROMPTS))
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--sampled-copies", type=int, default=7, help="sampled continuations per prompt (besides greedy)")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--gen-batch", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--val-fraction", type=float, default=0.03)
    ap.add_argument("--total-budget-s", type=float, default=500.0)
    ap.add_argument("--eval-reserve-s", type=float, default=60.0)
    ap.add_argument("--eval-prompts", type=int, default=8)
    ap.add_argument("--eval-max-new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t_all = time.perf_counter()
    torch.manual_seed(args.seed)
    A, B = _parse(args.trained), _parse(args.served)
    out_root = Path(args.canary_dir or tempfile.mkdtemp(prefix="canary-gpu-"))
    log = lambda m: print(f"  [{time.perf_counter() - t_all:6.1f}s] {m}", flush=True)  # noqa: E731

    target = load_target(args.target or default_target(), device=args.device, dtype="float32")
    log(f"target loaded on {args.device}")
    train_ids = encode(load_prompts(args.prompts), target.tokenizer)
    base = dict(epochs=args.epochs, lr=args.lr, draft_vocab=args.draft_vocab, max_new_tokens=args.max_new_tokens,
                batch_size=args.batch_size, seed=args.seed, gen_batch=args.gen_batch,
                sampled_copies=args.sampled_copies, temperature=args.temperature, val_fraction=args.val_fraction,
                device=args.device, dtype=args.dtype)
    union = tuple(State(b) for b in sorted(set(A) | (set() if args.no_reverse else set(B))))
    t_data = time.perf_counter()
    data = make_data(target, train_ids, CanaryOptions(boundaries=A, **base), union, log)
    data_seconds = time.perf_counter() - t_data
    log(f"data: {len(data)} sequences, {sum(len(d.ids) for d in data)} tokens in {data_seconds:.0f}s")

    left = args.total_budget_s - (time.perf_counter() - t_all) - args.eval_reserve_s
    runs = [(A, B, left * (1.0 if args.no_reverse else 1.0 - args.reverse_share))]
    if not args.no_reverse:
        runs.append((B, A, None))
    results = []
    t_eval_total = 0.0
    held = encode(load_prompts(None, args.eval_prompts), target.tokenizer)
    t_ev = time.perf_counter()
    cases, _ = make_cases(target, held, args.eval_max_new_tokens)
    caps = capture_cases(target, cases, tuple(State(b) for b in sorted(set(A) | set(B))))
    t_eval_total += time.perf_counter() - t_ev
    for trained_b, served_b, budget in runs:
        if budget is None:  # canary B: what is left
            budget = args.total_budget_s - (time.perf_counter() - t_all) - args.eval_reserve_s / 2
        out_dir = out_root / ("canary-" + "-".join(map(str, trained_b)))
        res = train_canary(target, train_ids, CanaryOptions(boundaries=trained_b, time_budget_s=max(budget, 10.0), **base),
                           out_dir, log, data=(data, union))
        t_ev = time.perf_counter()
        spec = read_draft(str(out_dir))
        draft = load_draft_model(spec, target, flags_from_config(spec.config, spec.layout))
        tw, sw = tuple(map(State, trained_b)), tuple(map(State, served_b))
        st = simulate(draft, cases, caps, tw, args.steps)
        sv = simulate(draft, cases, caps, sw, args.steps)
        t_eval_total += time.perf_counter() - t_ev
        log(f"canary {list(trained_b)}: AL trained {st.accept_length:.3f}, served {list(served_b)} {sv.accept_length:.3f}")
        results.append({"trained_wiring": [s.label() for s in tw], "served_wiring": [s.label() for s in sw],
                        "accept_length_trained": st.accept_length, "accept_length_served": sv.accept_length,
                        "per_position_trained": list(st.per_position), "per_position_served": list(sv.per_position),
                        "canary_dir": str(out_dir), "canary": res.to_json()})
    total = time.perf_counter() - t_all
    out = record(**{"schema": "eagle-audit/bench-canary-gpu/1", "results": results, "data_seconds": data_seconds,
           "data_sequences": len(data), "data_tokens": sum(len(d.ids) for d in data), "eval_seconds": t_eval_total,
           "total_seconds": total, "num_steps": args.steps, "eval_prompts": len(held),
           "eval_max_new_tokens": args.eval_max_new_tokens, "args": vars(args)})
    write(out, args.out)
    for r in results:
        print(f"canary {r['trained_wiring']}: AL trained {r['accept_length_trained']:.3f} vs served "
              f"{r['served_wiring']} {r['accept_length_served']:.3f}")
    print(f"data {data_seconds:.0f}s; total {total:.0f}s; JSON written to {args.out}")


if __name__ == "__main__":
    main()
