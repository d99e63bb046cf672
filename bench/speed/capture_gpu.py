"""GPU benchmark and bf16 validation of capture on a Llama-3.1-8B-shaped target (random weights).

Measures, on one batch of --tokens prompt tokens:
  * a bare forward of the whole model (embedding .. lm_head), the baseline;
  * capture of an EAGLE-3 triple plus the pre-norm final boundary with early stop off (all layers
    run): the overhead of the hooks themselves;
  * capture up to boundary b (early stop) for several b: the cost relative to a full forward;
  * a full-scan audit measurement (every boundary, cosine matrix) as `eagle-audit layers` runs it;
and checks that captured boundaries 0..N-1 equal HF ``output_hidden_states`` bit for bit in bf16,
that the post-norm state equals ``hidden_states[N]``, and that no hook is left behind.

Run: python -m bench.speed.capture_gpu [--tokens 2048] [--layers 32]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from bench._support import record, write
from eagle_audit.capture import capture_states, hooks_left
from eagle_audit.states import State, all_states
from eagle_audit.target import LoadedTarget, TargetInfo, find_layer_stack


def timeit(fn, reps: int = 10, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def device_map_check() -> dict:
    """load_target(..., device_map="auto") on a small saved Llama, and capture across it."""
    import tempfile

    from eagle_audit.target import load_target

    small = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=6, num_attention_heads=8,
                        num_key_value_heads=4, vocab_size=32000, architectures=["LlamaForCausalLM"])
    with tempfile.TemporaryDirectory() as d:
        LlamaForCausalLM(small).save_pretrained(d)
        tgt = load_target(d, device="cuda", dtype="bfloat16", device_map="auto")
        ids = torch.randint(0, 32000, (1, 64))
        caps = capture_states(tgt, ids, all_states(6))
        with torch.inference_mode():
            hf = tgt.model(input_ids=ids.to(tgt.input_device), output_hidden_states=True).hidden_states
        return {"devices": sorted({str(p.device) for p in tgt.model.parameters()}), "dtype": tgt.dtype,
                "equal": all(torch.equal(hf[k], caps[State(k)]) for k in range(6))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=args.layers, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
                      rms_norm_eps=1e-5)
    t0 = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    n = cfg.num_hidden_layers
    info = TargetInfo("llama-3.1-8b-shaped (random)", "-", "LlamaForCausalLM", "llama", n, 4096, 128256, "-")
    target = LoadedTarget(model, None, find_layer_stack(model, n), info, "cuda", "bfloat16")
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), device="cuda", generator=g)
    res: dict = record(tokens=args.tokens, layers=n, build_s=round(build_s, 3))

    # correctness in bf16
    with torch.inference_mode():
        hf = model(input_ids=ids, output_hidden_states=True).hidden_states
    before = hooks_left(model)
    caps = capture_states(target, ids, all_states(n))
    res["bf16_equal_boundaries_0_to_N-1"] = all(torch.equal(hf[k], caps[State(k)]) for k in range(n))
    res["bf16_postnorm_equals_hf_N"] = bool(torch.equal(hf[n], caps[State(n, True)]))
    res["bf16_prenorm_N_differs_from_hf_N"] = not torch.equal(hf[n], caps[State(n)])
    res["hooks_left_delta"] = hooks_left(model) - before
    del hf, caps

    with torch.inference_mode():
        bare = timeit(lambda: model(input_ids=ids, use_cache=False))
    triple = (State(2), State(n // 2), State(n - 3), State(n))
    hooks_all = timeit(lambda: capture_states(target, ids, triple, stop_early=False))
    res["bare_forward_ms"] = round(bare * 1e3, 2)
    res["capture_triple_plus_N_no_early_stop_ms"] = round(hooks_all * 1e3, 2)
    res["capture_overhead_pct"] = round((hooks_all / bare - 1) * 100, 2)
    res["capture_up_to_b"] = {}
    for b in (2, n // 4, n // 2, 3 * n // 4, n - 3, n):
        t = timeit(lambda b=b: capture_states(target, ids, (State(b),)))
        res["capture_up_to_b"][str(b)] = {"ms": round(t * 1e3, 2), "fraction_of_full": round(t / bare, 3),
                                          "b_over_N": round(b / n, 3)}
    # the audit's full scan: every boundary + post-norm, cosine of 3 slots against all
    from eagle_audit.layers.run import measure

    ids_list = [ids[0].tolist()]
    t0 = time.perf_counter()
    stats, heat, tokens = measure(target, ids_list, triple[:3], triple[:3], (0, n - 1), True)
    torch.cuda.synchronize()
    res["audit_full_scan_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    res["audit_slot_cosines"] = [round(s.cosine, 4) for s in stats.values()]
    res["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model, target
    torch.cuda.empty_cache()
    res["device_map_auto"] = device_map_check()
    write(res, args.out)


if __name__ == "__main__":
    main()
