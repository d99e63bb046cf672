"""The floor for `accept-rate` end to end (issue 19, "Speed of accept-rate"): a bare Python process that
imports transformers, loads the target, generates the prompts' greedy continuations batched and runs
each prompt + continuation once teacher-forced with ``output_hidden_states``. No eagle_audit import: the
prompts are read from the package's data file and rendered with the tokenizer's chat template, as
``eagle-audit accept-rate`` does with its built-in prompts.

    python -m bench.speed.accept_floor TARGET_DIR [--max-prompts 8] [--max-new-tokens 128] [--no-cudnn]
        [--dtype auto] [--no-generate]

``--no-cudnn``: decode with the flash / memory-efficient / math attention kernels only, as eagle-audit's
decode loops do (``source/forwards.py`` ``decode_attention``). ``--dtype``: the weights' dtype; ``auto``
(the default) is eagle-audit's own rule (``target.py`` ``parse_dtype``: float32 on the CPU, bfloat16 on a
GPU), so the floor does the same arithmetic (until issue 29 it loaded bfloat16 everywhere: on a CPU with
AVX512-BF16 that floor computed other, faster arithmetic than eagle-audit's float32). ``--no-generate``: the
prompts alone, teacher-forced (the floor of ``eagle-audit layers``). Prints one JSON line of phase times.
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
    args = ap.parse_args()
    phases = {"imports_s": time.perf_counter() - T0}

    t = time.perf_counter()
    tok = transformers.AutoTokenizer.from_pretrained(args.target)
    dtype = args.dtype if args.dtype != "auto" else ("float32" if args.device == "cpu" else "bfloat16")
    model = transformers.AutoModelForCausalLM.from_pretrained(args.target, dtype=getattr(torch, dtype),
                                                              device_map={"": args.device}).eval()
    phases["load_s"] = time.perf_counter() - t

    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()][: args.max_prompts]
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
    with torch.inference_mode():
        for p, row in zip(ids, out):
            seq = p + [int(v) for v in row[w:]]
            hs = model(input_ids=torch.tensor([seq], device=args.device), output_hidden_states=True).hidden_states
            states += len(hs)
    torch.cuda.synchronize() if args.device.startswith("cuda") else None
    phases["teacher_forced_s"] = time.perf_counter() - t
    phases["total_in_process_s"] = time.perf_counter() - T0
    print(json.dumps({k: round(v, 3) for k, v in phases.items()} | {"new_tokens": int(out.shape[1] - w),
                                                                      "hidden_states": states}), flush=True)


def _null():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    sys.exit(main())
