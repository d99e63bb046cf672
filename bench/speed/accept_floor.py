"""The floor for `accept-rate` end to end (issue 19, "Speed of accept-rate"): a bare Python process that
imports transformers, loads the target, generates the prompts' greedy continuations batched and runs
each prompt + continuation once teacher-forced with ``output_hidden_states``. No eagle_audit import: the
prompts are read from the package's data file and rendered with the tokenizer's chat template, as
``eagle-audit accept-rate`` does with its built-in prompts.

    python -m bench.speed.accept_floor TARGET_DIR [--max-prompts 8] [--max-new-tokens 128] [--no-cudnn]
        [--dtype auto] [--no-generate] [--first-prompt 0] [--block-draft DIR]

``--no-cudnn``: decode with the flash / memory-efficient / math attention kernels only, as eagle-audit's
decode loops do (``source/forwards.py`` ``decode_attention``). ``--dtype``: the weights' dtype; ``auto``
(the default) is eagle-audit's own rule (``target.py`` ``parse_dtype``: float32 on the CPU, bfloat16 on a
GPU), so the floor does the same arithmetic (until issue 29 it loaded bfloat16 everywhere: on a CPU with
AVX512-BF16 that floor computed other, faster arithmetic than eagle-audit's float32). ``--no-generate``: the
prompts alone, teacher-forced (the floor of ``eagle-audit layers``). Prints one JSON line of phase times.

``--block-draft DIR`` (issue 34, the floor of ``accept-rate`` on a DFlash draft): after the teacher-forced pass,
the draft's block forward at every anchor of every prompt + continuation, once, on the trained slots
(``dflash_config.target_layer_ids``: ``hidden_states[id + 1]``), as ``eagle_audit/simulate/block.py``
``block_drafts`` runs it (blocks ``[x_a, mask x (B-1)]``, 64 anchors a forward, argmax of the target's head),
and the greedy verify walk; its eagle_audit imports are the block forward itself
(``eagle_audit/runtime/block.py``), built from the config here, and the verify walk (``simulate/accept.py`` ``walk``). ``--first-prompt``: skip that many built-in
prompts (the DFlash canary's training prompts are built-in 9-12: ``--first-prompt 8 --max-prompts 4``).
"""

from __future__ import annotations

import json
import sys
import time

T0 = time.perf_counter()

import argparse  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402

from bench._support import BUILTIN_PROMPTS as PROMPTS  # noqa: E402  (paths only: no eagle_audit import)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("--max-prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-cudnn", action="store_true")
    ap.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"))
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--first-prompt", type=int, default=0)
    ap.add_argument("--block-draft", default=None)
    args = ap.parse_args()
    phases = {"imports_s": time.perf_counter() - T0}

    t = time.perf_counter()
    tok = transformers.AutoTokenizer.from_pretrained(args.target)
    dtype = args.dtype if args.dtype != "auto" else ("float32" if args.device == "cpu" else "bfloat16")
    model = transformers.AutoModelForCausalLM.from_pretrained(args.target, dtype=getattr(torch, dtype),
                                                              device_map={"": args.device}).eval()
    phases["load_s"] = time.perf_counter() - t

    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()][
        args.first_prompt: args.first_prompt + args.max_prompts]
    ids = []
    for r in rows:
        msgs = r.get("messages") or [{"role": "user", "content": r.get("text") or r.get("prompt")}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids.append(tok(text, add_special_tokens=False)["input_ids"][: args.max_tokens])

    t = time.perf_counter()
    eos = set()  # as eagle-audit gathers them (source/forwards.py eos_ids): generation config, config, tokenizer
    for src in (model.generation_config, model.config, tok):
        v = getattr(src, "eos_token_id", None)
        eos |= {v} if isinstance(v, int) else set(v or ())
    pad = min(eos or {0})
    w = max(map(len, ids))
    x = torch.tensor([[pad] * (w - len(p)) + p for p in ids], device=args.device)
    m = torch.tensor([[0] * (w - len(p)) + [1] * len(p) for p in ids], device=args.device)
    ctx = torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.FLASH_ATTENTION,
                                          torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION,
                                          torch.nn.attention.SDPBackend.MATH]) if args.no_cudnn else _null()
    with torch.inference_mode(), ctx:
        out = x if args.no_generate else model.generate(
            input_ids=x, attention_mask=m, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=pad,
            eos_token_id=sorted(eos) or None)
    torch.cuda.synchronize() if args.device.startswith("cuda") else None
    phases["generate_s"] = time.perf_counter() - t

    t = time.perf_counter()
    states = 0
    seqs, caps = [], []
    with torch.inference_mode():
        for p, row in zip(ids, out):
            seq = p + [int(v) for v in row[w:]]
            if args.block_draft:  # the continuation up to its first EOS, as eagle-audit's cases
                cont = seq[len(p):]
                cut = next((i + 1 for i, v in enumerate(cont) if v in eos), len(cont))
                seq = p + cont[:cut]
            hs = model(input_ids=torch.tensor([seq], device=args.device), output_hidden_states=True).hidden_states
            states += len(hs)
            if args.block_draft:
                seqs.append((len(p), seq))
                caps.append(hs)
    torch.cuda.synchronize() if args.device.startswith("cuda") else None
    phases["teacher_forced_s"] = time.perf_counter() - t
    extra = {}
    if args.block_draft:
        t = time.perf_counter()
        extra = _block_floor(args.block_draft, model, seqs, caps, dtype)
        phases["block_forwards_s"] = time.perf_counter() - t
    phases["total_in_process_s"] = time.perf_counter() - T0
    print(json.dumps({k: round(v, 3) for k, v in phases.items()} | {"new_tokens": int(out.shape[1] - w),
                                                                      "hidden_states": states} | extra), flush=True)


def _block_floor(path, model, seqs, caps, dtype) -> dict:
    """The DFlash draft at ``path``: its block forward at every anchor of every sequence, the greedy walk; the
    accept length (a check that this is the work ``accept-rate`` does: it must equal its trained figure)."""
    from pathlib import Path

    from safetensors.torch import load_file

    from eagle_audit.runtime.arch import rope_params
    from eagle_audit.runtime.block import DFlashArch, build_dflash_draft
    from eagle_audit.simulate.accept import walk

    cfg = json.loads((Path(path) / "config.json").read_text())
    dc = cfg["dflash_config"]
    layer_ids, H = dc["target_layer_ids"], cfg["hidden_size"]
    theta, rope, _ = rope_params(cfg, ("linear", "llama3", "yarn"))
    arch = DFlashArch(hidden_size=H, target_hidden_size=model.config.hidden_size, num_aux=len(layer_ids),
                      num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
                      num_kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
                      intermediate_size=cfg["intermediate_size"], eps=cfg["rms_norm_eps"], rope_theta=theta,
                      block_size=dc["block_size"], mask_token_id=dc["mask_token_id"], rope=rope)
    embed = model.get_input_embeddings().weight.detach()
    head = model.get_output_embeddings().weight.detach()
    draft = build_dflash_draft(arch, load_file(str(Path(path) / "model.safetensors")), embed, head, path,
                               getattr(torch, dtype))
    bs, steps, gains = arch.block_size, arch.block_size - 1, []
    with torch.inference_mode():
        for (plen, seq), hs in zip(seqs, caps):
            L = len(seq)
            x = torch.tensor(seq, device=draft.device)
            ctx = draft.context(torch.cat([hs[i + 1][0] for i in layer_ids], dim=-1)[None])  # [1, L, H]
            drafts = [[] for _ in range(steps)]
            for start in range(1, L, 64):
                anchors = torch.arange(start, min(L, start + 64), device=draft.device)[None]
                block = torch.full((1, anchors.shape[1], bs), arch.mask_token_id, dtype=torch.long,
                                   device=draft.device)
                block[..., 0] = x[anchors[0]]
                picked = draft.logits(draft.blocks(ctx, block, anchors, last_rows=slice(1, bs))).argmax(-1)[0]
                for j in range(steps):
                    drafts[j].extend(picked[:, j].tolist())
            gains += walk(seq, plen, drafts)  # the greedy verify walk (pure Python, no model work)
    return {"verifies": len(gains), "accept_length": round(sum(gains) / max(len(gains), 1), 4)}


def _null():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    sys.exit(main())
