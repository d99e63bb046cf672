"""Benchmarks of `eagle-audit fingerprint` (numbers in docs/fingerprint.md, "Cost and recovery, measured").

``--cpu``: SmolLM2-135M on this machine.
  * end to end: ``fingerprint()`` of the [B2, B15, B27] test canary with the defaults (8 built-in prompts,
    64 new tokens), after the first cache (GGUF conversion done), split into load / generate+capture /
    search / judge;
  * recovery over the test canaries (``tests/fingerprint/fp_canaries.py``, trained if missing into the test
    cache) on the tests' corpus (4 training prompts) and on 8 training prompts: exact, ambiguous with the
    true state among the candidates, or wrong.

``--gpu``: a Llama-3.1-8B-shaped target (the 8B config, random bf16 weights built on the GPU) and a random
3-slot draft for it (hidden 4096, draft vocab 32000): the search's cost beyond the target pass. 8 prompts of
64 random token ids, 64 new tokens; generation, the capture pass and the search timed apart; the search runs
to convergence (no early give-up, as for a trained draft; a random draft wanders, so this bounds it).

Run: python -m bench.speed.fingerprint --gpu --tiny --out /tmp/x.json   # smoke test of the GPU steps on the CPU
     python -m bench.speed.fingerprint --cpu [--threads 1] --out bench/results/fingerprint_cpu.json
     python -m bench.speed.fingerprint --gpu --out $OUT/fingerprint_gpu.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._support import record, write


def sync(dev: str) -> None:
    import torch

    if dev == "cuda":
        torch.cuda.synchronize()


def _starts(spec, info, engine_name="sglang"):
    from eagle_audit.conventions import get_convention
    from eagle_audit.fingerprint.infer import starting_points
    from eagle_audit.resolution import resolve_trained

    declared, _ = resolve_trained(spec, info, [])
    return declared, starting_points(spec, info, declared.wiring, get_convention(engine_name, "engine"))


def cpu(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    from tests.fingerprint.fp_canaries import CANARIES, train_all

    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.api import fingerprint
    from eagle_audit.fingerprint.infer import infer_wiring
    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target, materialise

    cache = Path(args.cache)
    materialise(default_target())  # the first cache
    target = load_target(default_target())
    t0 = time.perf_counter()
    dirs = train_all(target, cache, log=lambda m: print(m, flush=True))
    train_s = time.perf_counter() - t0
    out: dict = {"threads": args.threads, "canary_training_s": round(train_s, 1)}

    t0 = time.perf_counter()
    r = fingerprint(default_target(), str(dirs["2-15-27"]))
    out["end_to_end"] = {"seconds": round(time.perf_counter() - t0, 1), "inferred": [s.text() for s in r.slots],
                         "confidence": r.confidence, "breakdown": r.search.get("seconds"),
                         "wirings_scored": r.search.get("wirings_scored"), "scored_tokens": r.scored_tokens}
    print(json.dumps(out["end_to_end"]), flush=True)

    for label, prompts in (("tests corpus (prompts 9-12)", slice(8, 12)), ("prompts 9-16", slice(8, 16))):
        corpus = prepare_corpus(target, encode(load_prompts(None)[prompts], target.tokenizer), 64)
        rows, exact, amb_slots, wrong = [], 0, 0, 0
        for name, (bounds, final) in CANARIES.items():
            truth = tuple(State(b, normed=final and b == target.info.num_layers) for b in bounds)
            spec = read_draft(str(dirs[name]))
            declared, starts = _starts(spec, target.info)
            t1 = time.perf_counter()
            inf = infer_wiring(target, spec, corpus, starts, declared.flags)
            ok = inf.states is not None and all(t in sl.candidates for t, sl in zip(truth, inf.slots))
            bad = sum(1 for t, sl in zip(truth, inf.slots) if not sl.ambiguous and sl.best != t)
            exact += ok and inf.best == truth and not any(sl.ambiguous for sl in inf.slots)
            amb_slots += sum(sl.ambiguous for sl in inf.slots)
            wrong += bad + (0 if ok else 1)
            rows.append({"canary": name, "truth": [s.label() for s in truth], "inferred": [sl.text() for sl in inf.slots],
                         "confidence": inf.confidence, "seconds": round(time.perf_counter() - t1, 1),
                         "wirings_scored": inf.search.get("wirings_scored")})
            print(json.dumps(rows[-1]), flush=True)
        out[label] = {"canaries": len(rows), "exact": exact, "ambiguous_slots": amb_slots,
                      "slots": sum(len(v[0]) for v in CANARIES.values()), "wrong": wrong,
                      "tokens": corpus.tokens, "rows": rows}
    return out


def gpu(args) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle_audit.draft.read import read_draft
    from eagle_audit.draft.write import draft_config, random_weights, write_draft
    from eagle_audit.fingerprint.corpus import continuations
    from eagle_audit.fingerprint.infer import infer_wiring
    from eagle_audit.fingerprint.score import capture_corpus
    from eagle_audit.states import all_states
    from eagle_audit.target import LoadedTarget, TargetInfo, find_layer_stack

    dev = "cpu" if args.tiny else "cuda"
    V, H, inter, N, heads, kv, Vd = ((1024, 64, 128, 4, 4, 2, 512) if args.tiny else
                                     (128256, 4096, 14336, 32, 32, 8, 32000))
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=inter, num_hidden_layers=N,
                      num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=8192,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=V - 2,
                      eos_token_id=V - 1)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    sync(dev)
    build_s = time.perf_counter() - t0
    info = TargetInfo(name="llama-3.1-8b-shaped (random bf16)", source="-", architecture="LlamaForCausalLM",
                      model_type="llama", num_layers=N, hidden_size=H, vocab_size=V, config_sha256="-")
    target = LoadedTarget(model, None, find_layer_stack(model, N), info, dev, "bfloat16")
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, V - 2, (64,), generator=g).tolist() for _ in range(8)]
    sync(dev)
    t0 = time.perf_counter()
    seqs = continuations(target, prompts, 64)
    sync(dev)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    corpus = capture_corpus(target, seqs, all_states(N))
    sync(dev)
    cap_s = time.perf_counter() - t0
    # the draft vocabulary: the target's most frequent next tokens of this text, filled up to Vd (as trainers
    # choose it), so that every position is scored and the search runs
    labels = corpus.labels[corpus.valid].cpu()
    ids, counts = labels.unique(return_counts=True)
    used = ids[counts.argsort(descending=True)][:Vd].tolist()
    taken = set(used)
    rest = [t for t in range(V) if t not in taken][:Vd - len(used)]
    vocab = torch.tensor(sorted(used + rest))
    dcfg = draft_config(hidden_size=H, target_hidden_size=H, num_aux=3, vocab_size=V, draft_vocab_size=Vd,
                        num_heads=heads, num_kv_heads=kv, intermediate_size=inter, nested_ids=[0, 1, 2],
                        rope_theta=500000.0)
    ddir = Path(args.work) / "draft8b"
    write_draft(ddir, dcfg, random_weights(dcfg, 3, seed=1, vocab_ids=vocab))
    spec = read_draft(str(ddir))
    declared, starts = _starts(spec, info)
    runs = []
    for give_up in (False, True):
        t0 = time.perf_counter()
        inf = infer_wiring(target, spec, corpus, starts, declared.flags, give_up=give_up)
        sync(dev)
        runs.append({"give_up": give_up, "seconds": round(time.perf_counter() - t0, 2),
                     "wirings_scored": inf.search.get("wirings_scored"), "sweeps": inf.search.get("sweeps"),
                     "breakdown": inf.search.get("seconds"), "confidence": inf.confidence,
                     "linear_fc": inf.search.get("linear_fc"),
                     # fc's weights read against every state (fingerprint/weights.py, on the CPU whatever the device)
                     "weights_s": (inf.search.get("weights") or {}).get("seconds")})
        print(json.dumps(runs[-1]), flush=True)
    return {"build_target_s": round(build_s, 2),
            "generate_s": round(gen_s, 2), "capture_s": round(cap_s, 2), "tokens": corpus.tokens,
            "search": runs, "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if dev == "cuda" else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="--gpu's steps on a tiny model on the CPU (a smoke test)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "eagle-audit-test"))
    ap.add_argument("--work", default="/tmp/fp-bench")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    write(record(**(cpu(args) if args.cpu else gpu(args))), args.out)


if __name__ == "__main__":
    main()
