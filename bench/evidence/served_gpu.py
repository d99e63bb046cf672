"""GPU: the bf16 thresholds of the served-states comparison, and a Llama-3.1-8B-shaped `layers` audit through
the SGLang test server against the local one.

Steps (one process):

* ``make``: the Llama-3.1-8B-shaped random bf16 target and 3-slot draft of bench/speed/gpu_8b.py, and a copy of
  the target without weights (config, tokenizer, ``embed_tokens.safetensors``: the embedding and head alone,
  what the local draft runtime borrows).
* ``thresholds``: every boundary B0..BN over the audit prompts, captured in bf16 and in fp32 (same weights,
  same GPU): per boundary the smallest per-token cosine and the token-mean relative error of bf16 against
  fp32 (what kernel rounding leaves), against the smallest separation of the faults the comparison must find
  (one rank's share of a 2- and 8-rank partial sum of a layer, one boundary deeper), on fp32 states.
* ``audit``: ``audit_layers`` in process, ``scan=False`` (the states the verdict needs), 8 prompts: local
  (weights loaded here, on the GPU) and through the test server (tests/served/sglang_server.py, in a thread
  of this process, the same bf16 model on the GPU, launched with the ids of exactly those states) on the
  weights-free copy. Each run twice, the second timed;
  the server's own time (forward, ``tolist``, JSON) is timed apart.
* ``devmap``: the seam's device-map backend in bf16 (``device_map="auto"``, accelerate) against the same test
  server, one run each: ``layers`` local, ``layers --server`` served vs that local capture, ``layers`` with no
  weights here, then ``accept-rate`` local (device-map) and ``accept-rate`` with every state and the greedy
  continuation from the server (``states_server``): verdicts, findings, slot cosines, accept lengths and the
  backend each run's states came from (``provenance.source``).

Run: python -m bench.evidence.served_gpu --work /root/w8b --tokenizer DIR --wheel SGLANG_WHEEL --out results.json [--tiny]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._support import record, write


def sync(dev):
    import torch

    if dev.startswith("cuda"):
        torch.cuda.synchronize()


def thresholds(target: str, dev: str, prompts) -> dict:
    import torch

    from eagle_audit.capture import capture_states
    from eagle_audit.states import State
    from eagle_audit.target import load_target

    out = {}
    caps = {}
    for dtype in ("bfloat16", "float32"):
        t = load_target(target, device=dev, dtype=dtype)
        n = t.info.num_layers
        states = [State(k) for k in range(n + 1)]
        caps[dtype] = [{s: v[0].float().cpu() for s, v in capture_states(t, torch.tensor([p]), states, False).items()}
                       for p in prompts]
        del t
        torch.cuda.empty_cache() if dev.startswith("cuda") else None

    def stats(a, b):  # per token: cosine, relative error of a against b
        cos = torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)
        rel = (a.double() - b.double()).norm(dim=-1) / b.double().norm(dim=-1).clamp_min(1e-30)
        return float(cos.min()), float(rel.mean())

    rows = []
    for k in range(n + 1):
        s = State(k)
        a = torch.cat([c[s] for c in caps["bfloat16"]])
        b = torch.cat([c[s] for c in caps["float32"]])
        mc, mr = stats(a, b)
        row = {"boundary": k, "bf16_vs_fp32_min_cos": mc, "bf16_vs_fp32_rel": mr}
        if k >= 1:
            prev = torch.cat([c[State(k - 1)] for c in caps["float32"]])
            for r in (2, 8):
                part = prev + (b - prev) / r
                # the best an "equals" test could do: its nearest boundary (B_{k-1} or B_k)
                row[f"partial{r}_rel_to_Bk"] = stats(part, b)[1]
                row[f"partial{r}_rel_to_Bk-1"] = stats(part, prev)[1]
                row[f"partial{r}_min_cos_Bk"] = stats(part, b)[0]
        if k < n:
            nxt = torch.cat([c[State(k + 1)] for c in caps["float32"]])
            row["deeper_rel"], row["deeper_min_cos"] = stats(nxt, b)[1], stats(nxt, b)[0]
        rows.append(row)
    out["per_boundary"] = rows
    out["worst_bf16_min_cos"] = min(r["bf16_vs_fp32_min_cos"] for r in rows)
    out["worst_bf16_rel"] = max(r["bf16_vs_fp32_rel"] for r in rows)
    out["smallest_partial8_rel"] = min(min(r["partial8_rel_to_Bk"], r["partial8_rel_to_Bk-1"]) for r in rows if "partial8_rel_to_Bk" in r)
    out["smallest_partial2_rel"] = min(min(r["partial2_rel_to_Bk"], r["partial2_rel_to_Bk-1"]) for r in rows if "partial2_rel_to_Bk" in r)
    out["smallest_deeper_rel"] = min(r["deeper_rel"] for r in rows if "deeper_rel" in r)
    return out


def audit(target: str, bare: str, draft: str, wheel: str, dev: str) -> dict:
    import torch

    import eagle_audit.api as api
    from eagle_audit.engines.launch import TargetShape
    from eagle_audit.engines.sglang.launch import sglang_reference
    from eagle_audit.states import State
    from eagle_audit.target import target_info
    from tests.engine_wheels.sglang_engine import EngineRun
    from tests.served.sglang_pieces import SGLangPieces
    from tests.served.sglang_server import FakeSGLang, Target, serving

    res = {}
    n = target_info(target).num_layers
    # the draft of gpu_8b.make has nested ids [1, N//2, N-3]: SGLang serves B2, B(N//2+1), B(N-2)
    need = [2, n // 2 + 1, n - 2]
    kw = dict(trained_boundaries=need, max_prompts=8, device=dev, dtype="bfloat16", scan=False)
    for rep in range(2):
        sync(dev)
        t0 = time.perf_counter()
        local = api.audit_layers(target, draft, **kw)
        sync(dev)
        res[f"local_s_{rep}"] = round(time.perf_counter() - t0, 2)
    info = target_info(target)
    shape = TargetShape(target, info.architecture, info.num_layers, info.hidden_size)
    launch = sglang_reference(shape, wanted=[State(k) for k in need])  # a server launched for what the audit reads
    import types

    ids = list(launch.capture.ids)
    parsed = types.SimpleNamespace(enable_return_aux_hidden_states=True, return_aux_hidden_state_layer_ids=ids,
                                   chunked_prefill_size=-1, model_path=target)
    import tempfile

    pieces = SGLangPieces(Path(wheel), Path(tempfile.mkdtemp()))
    tgt = Target(target, dev, torch.bfloat16)
    fake = FakeSGLang(pieces, EngineRun(Path(wheel)), [], target, info.architecture, target=tgt, parsed=parsed)
    spent = {"s": 0.0}
    generate = fake.generate

    def timed(body):
        t0 = time.perf_counter()
        r = generate(body)
        spent["s"] += time.perf_counter() - t0
        return r

    fake.generate = timed
    with serving(fake) as url:
        for rep in range(2):
            spent["s"] = 0.0
            t0 = time.perf_counter()
            served = api.audit_layers(bare, draft, server=url, **kw)
            sync(dev)
            res[f"served_s_{rep}"] = round(time.perf_counter() - t0, 2)
            res[f"server_side_s_{rep}"] = round(spent["s"], 2)
    res["served_slots"] = len(launch.capture.states)
    res["ratio"] = round(res["served_s_1"] / res["local_s_1"], 2)
    res["ratio_client_only"] = round((res["served_s_1"] - res["server_side_s_1"]) / res["local_s_1"], 2)
    res["same_verdict"] = served.verdict == local.verdict
    res["same_findings"] = [(f.code, f.slot) for f in served.findings] == [(f.code, f.slot) for f in local.findings]
    res["slot_cosines"] = [[a.cosine, b.cosine] for a, b in zip(served.slots, local.slots)]
    res["verdict"] = local.verdict
    res["served_ids"] = list(launch.capture.ids)
    return res


def devmap(target: str, bare: str, draft: str, wheel: str, dev: str) -> dict:
    import tempfile
    import types

    import torch

    from eagle_audit import api
    from eagle_audit.engines.sglang.launch import sglang_reference
    from eagle_audit.engines.launch import TargetShape
    from eagle_audit.states import State
    from eagle_audit.target import target_info
    from tests.engine_wheels.sglang_engine import EngineRun
    from tests.served.sglang_pieces import SGLangPieces
    from tests.served.sglang_server import FakeSGLang, Target, serving

    info = target_info(target)
    n = info.num_layers
    need = [2, n // 2 + 1, n - 2]
    # a reference server launched for the states these audits read (every boundary: 31 slots, ~70 MB a reply)
    launch = sglang_reference(TargetShape(target, info.architecture, n, info.hidden_size), wanted=[State(k) for k in need])
    parsed = types.SimpleNamespace(enable_return_aux_hidden_states=True,
                                   return_aux_hidden_state_layer_ids=list(launch.capture.ids), chunked_prefill_size=-1,
                                   model_path=target)
    fake = FakeSGLang(SGLangPieces(Path(wheel), Path(tempfile.mkdtemp())), EngineRun(Path(wheel)), [], target,
                      info.architecture, target=Target(target, dev, torch.bfloat16), parsed=parsed)
    kw = dict(trained_boundaries=need, max_prompts=8, device=dev, dtype="bfloat16")
    akw = dict(kw, max_new_tokens=16, gen_batch=1, max_prompts=4)  # the tiny target's vocabulary has no room for a pad id
    res: dict = {"reference_ids": list(launch.capture.ids)}

    def timed(name, fn):
        sync(dev)
        t0 = time.perf_counter()
        r = fn()
        sync(dev)
        res[f"{name}_s"] = round(time.perf_counter() - t0, 2)
        res[f"{name}_backend"] = (r.provenance.get("source") or {}).get("backend")
        al = (r.al("trained"), r.al("served")) if hasattr(r, "al") else [(f.code, f.slot) for f in r.findings]
        print(name, res[f"{name}_s"], res[f"{name}_backend"], r.verdict, al, flush=True)  # a timeout keeps these
        return r

    local = timed("layers_devmap", lambda: api.audit_layers(target, draft, device_map="auto", scan=False, **kw))
    with serving(fake) as url:
        vs = timed("layers_server_vs_devmap", lambda: api.audit_layers(target, draft, device_map="auto", scan=False,
                                                                          server=url, **kw))
        nw = timed("layers_no_weights", lambda: api.audit_layers(bare, draft, server=url, scan=False, **kw))
        acc_local = timed("accept_devmap", lambda: api.accept_rate(target, draft, device_map="auto", **akw))
        acc_srv = timed("accept_states_server", lambda: api.accept_rate(bare, draft, states_server=url, **akw))
    res["verdicts"] = {"layers_devmap": local.verdict, "layers_server_vs_devmap": vs.verdict,
                       "layers_no_weights": nw.verdict, "accept_devmap": acc_local.verdict,
                       "accept_states_server": acc_srv.verdict}
    res["findings"] = {k: [(f.code, f.slot) for f in r.findings] for k, r in
                       (("layers_devmap", local), ("layers_server_vs_devmap", vs), ("layers_no_weights", nw))}
    res["served_vs_devmap_slots"] = [(s["expected"], s["verdict"], s["min_cosine"], s["rel_error"])
                                     for s in (vs.served_states or {}).get("slots", [])]
    res["slot_cosines_devmap_vs_no_weights"] = [[a.cosine, b.cosine] for a, b in zip(local.slots, nw.slots)]
    res["accept_length"] = {"devmap": [acc_local.al("trained"), acc_local.al("served")],
                            "states_server": [acc_srv.al("trained"), acc_srv.al("served")]}
    res["same_verdicts"] = len(set(res["verdicts"].values())) == 1 or (
        local.verdict == vs.verdict == nw.verdict and acc_local.verdict == acc_srv.verdict)
    res["server_requests"] = fake.requests
    return res


def bare_copy(target: Path, out: Path) -> Path:
    from tests.served.served_tiny import without_weights

    if not out.exists():
        import safetensors  # noqa: F401

        # the 8B target is sharded: gather the two tensors from whichever shard holds them
        from safetensors import safe_open
        from safetensors.torch import save_file
        import shutil

        out.mkdir(parents=True)
        keep = {}
        for f in target.iterdir():
            if f.suffix == ".safetensors":
                with safe_open(str(f), "pt") as st:
                    for k in ("model.embed_tokens.weight", "lm_head.weight"):
                        if k in st.keys():
                            keep[k] = st.get_tensor(k)
            elif f.name != "model.safetensors.index.json":
                shutil.copy2(f, out / f.name)
        save_file(keep, str(out / "embed_tokens.safetensors"))
    del without_weights
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work")
    ap.add_argument("--tokenizer")
    ap.add_argument("--wheel")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", default="make,thresholds,audit")
    ap.add_argument("--thresholds-of", help="only the thresholds step, on this target (a real one), on --device")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.thresholds_of:
        from transformers import AutoTokenizer

        from eagle_audit.prompts import encode, load_prompts

        prompts = encode(load_prompts(None, 8), AutoTokenizer.from_pretrained(a.thresholds_of), 256)
        res = record(target=a.thresholds_of, device_used=a.device, prompt_tokens=[len(p) for p in prompts],
                     thresholds=thresholds(a.thresholds_of, a.device, prompts))
        Path(a.out).write_text(json.dumps(res, indent=1))
        print(json.dumps({k: v for k, v in res["thresholds"].items() if k != "per_boundary"}, indent=1))
        return
    from bench.speed import gpu_8b

    dev = "cpu" if a.tiny else "cuda"
    gpu_8b.TINY, gpu_8b.DEV = a.tiny, dev
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    res: dict = record()
    t0 = time.perf_counter()
    made = gpu_8b.make(work, Path(a.tokenizer)) if "make" in a.steps else {
        "target": str(work / "llama-8b-random"), "draft": str(work / "eagle3-8b-random")}
    res["make"] = made
    bare = bare_copy(Path(made["target"]), work / "llama-8b-config-only")
    res["make_s"] = round(time.perf_counter() - t0, 1)
    from eagle_audit.prompts import encode, load_prompts
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(made["target"])
    prompts = encode(load_prompts(None, 8), tok, 256)
    res["prompt_tokens"] = [len(p) for p in prompts]
    if "thresholds" in a.steps:
        t0 = time.perf_counter()
        res["thresholds"] = thresholds(made["target"], dev, prompts)
        res["thresholds_s"] = round(time.perf_counter() - t0, 1)
        Path(a.out).write_text(json.dumps(res, indent=1))
    if "audit" in a.steps:
        res["audit"] = audit(made["target"], str(bare), made["draft"], a.wheel, dev)
        Path(a.out).write_text(json.dumps(res, indent=1))
    if "devmap" in a.steps:
        res["devmap"] = devmap(made["target"], str(bare), made["draft"], a.wheel, dev)
    write(res, a.out)
    if "thresholds" in res:
        print(json.dumps({k: v for k, v in res["thresholds"].items() if k != "per_boundary"}, indent=1))


if __name__ == "__main__":
    main()
