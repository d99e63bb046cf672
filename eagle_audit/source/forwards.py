"""The transformers forwards of the local backends (:mod:`eagle_audit.source.local`): greedy generation
with a KV cache (one prompt, or a left-padded batch), and cached forwards that capture states on the way (for
the live loop). :mod:`eagle_audit.accept.canary`'s own batched decode borrows the cache and attention helpers.

The cache keyword is chosen from the model's signature (transformers 5.2x renamed
``past_key_values`` to ``cache``); the cache object is created here and mutated in place.
"""

from __future__ import annotations

import inspect
from typing import Iterable, Sequence

import torch

from ..capture import capture
from ..states import State


def new_cache():
    from transformers import DynamicCache

    return DynamicCache()


def crop(cache, keep: int) -> None:
    """Keep the first ``keep`` positions. A negative argument means "remove that many" in both the old
    (``crop(max_length)``) and the new (``crop(tokens_to_remove)``) transformers API."""
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


def decode_attention():
    """A context for decode loops: scaled-dot-product attention without the cuDNN backend. With a
    padding mask, torch 2.11 on an H200 picks cuDNN attention, which builds an execution plan for every
    new key length; a decode loop meets a new length at every step (measured: 8 prompts x 128 tokens,
    8B-shaped target, 10.1 s the first time, 2.7 s once every length had been seen). Flash / memory-
    efficient / math kernels need no plan. No-op where ``torch.nn.attention`` is missing."""
    import contextlib

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def cache_kw(model) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def eos_ids(target) -> set[int]:
    ids: set[int] = set()
    for src in (getattr(target.model, "generation_config", None), target.model.config, target.tokenizer):
        v = getattr(src, "eos_token_id", None) if src is not None else None
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    return ids


@torch.inference_mode()
def cached_forward(target, ids: list[int] | torch.Tensor, cache, states: Iterable[State] = ()
                   ) -> tuple[torch.Tensor, dict[State, torch.Tensor]]:
    """Forward ``ids`` after what ``cache`` holds: (logits [pos, vocab], {state: [pos, hidden]})."""
    x = torch.as_tensor(ids, dtype=torch.long, device=target.input_device).view(1, -1)  # [1, pos]
    with capture(target.stack, states, stop_early=False) as store:
        out = target.model(input_ids=x, use_cache=True, **{cache_kw(target.model): cache})
    return out.logits[0].float(), {s: t[0] for s, t in store.tensors.items()}


@torch.inference_mode()
def greedy_generate(target, prompt: list[int], max_new: int, eos: set[int] | None = None) -> list[int]:
    """The target's own greedy continuation (at most ``max_new`` tokens, ending at an EOS token)."""
    eos = eos_ids(target) if eos is None else eos
    cache = new_cache()
    logits, _ = cached_forward(target, prompt, cache)
    out: list[int] = []
    while True:
        tok = int(logits[-1].argmax())
        out.append(tok)
        if len(out) >= max_new or tok in eos:
            return out
        logits, _ = cached_forward(target, [tok], cache)


@torch.inference_mode()
def greedy_generate_batch(target, prompts: Sequence[Sequence[int]], max_new: int, eos: set[int] | None = None,
                          pad: int | None = None) -> list[list[int]]:
    """The target's greedy continuations of several prompts at once: left-padded into one batch with
    one KV cache, an attention mask that hides the padding and position ids that start at 0 at each
    prompt's first real token (so every row sees what :func:`greedy_generate` would feed it). A row
    stops at its first EOS token (kept) or after ``max_new`` tokens; the batch stops when every row has.
    Padding changes the shapes of the matrix products, so logits may differ from the one-at-a-time
    run in the last bits: near-ties can pick another token (tests check equality on tiny float32
    models). Not transformers' ``generate``: it merges the model's generation_config (EOS ids,
    sampling) into any settings given, and greedy here must mean exactly the argmax."""
    eos = eos_ids(target) if eos is None else eos
    if not prompts:
        return []
    model, dev = target.model, target.input_device
    pad = (min(eos) if eos else 0) if pad is None else pad
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=dev)  # [batch, width]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=dev)  # [batch, width]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # [batch, width]
    cache, kw = new_cache(), cache_kw(model)
    extra = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    eos_t = torch.tensor(sorted(eos) or [-1], device=dev)
    done = torch.zeros(len(prompts), dtype=torch.bool, device=dev)
    toks: list[torch.Tensor] = []
    with decode_attention():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **{kw: cache},
                       **extra).logits[:, -1]  # [batch, vocab]
        for step in range(max_new):
            tok = logits.argmax(-1).to(dev)  # [batch]
            toks.append(tok)
            done |= torch.isin(tok, eos_t)
            if step == max_new - 1 or bool(done.all()):
                break
            mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], dim=1)
            pos = pos[:, -1:] + 1
            logits = model(input_ids=tok[:, None], attention_mask=mask, position_ids=pos, use_cache=True,
                           **{kw: cache}).logits[:, -1]
    out = []
    for row in torch.stack(toks, dim=1).tolist():  # [batch, steps]
        cont = []
        for t in row:
            cont.append(t)
            if t in eos:
                break
        out.append(cont)
    return out
