"""The transformers forwards of the local backends (:mod:`eagle_audit.source.local`): greedy generation
with a KV cache (one prompt, or a left-padded batch), cached forwards that capture states on the way (for
the live loop), and a batched greedy or sampled decode that captures states at every position
(:func:`decode_states`, ``train-canary``'s data).

The cache keyword is chosen from the model's signature (transformers 5.2x renamed
``past_key_values`` to ``cache``); the cache object is created here and mutated in place.
"""

from __future__ import annotations

import inspect
from typing import Callable, Iterable, Sequence

import torch

from ..capture import capture
from ..states import State
from .spec import Decoded


def new_cache(model=None):
    """An empty KV cache. A hyper-connection target (DeepSeek-V4) keeps compressor state in cache layers of its
    own, which transformers builds only from the config (``DynamicCache(config=...)``); every other target gets
    the plain cache it always had."""
    from transformers import DynamicCache

    from ..target import HYPER_CONNECTION

    config = getattr(model, "config", None)
    if config is not None and getattr(config, "model_type", None) in HYPER_CONNECTION:
        return DynamicCache(config=config)
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
    new key length; a decode loop meets a new length at every step (several times slower on an 8B-shaped target
    until every length has been seen; docs/performance.md). Flash / memory-
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


def left_padded(prompts: Sequence[Sequence[int]], pad: int, device):
    """One batch of ``prompts``, padded on the left: (ids, attention mask, position ids), each [batch, width];
    positions start at 0 at each prompt's first real token (padding: 0, masked)."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def cut_at_eos(tokens: Sequence[int], eos: set[int]) -> list[int]:
    """``tokens`` up to and including the first EOS token (all of them when none is)."""
    out = []
    for t in tokens:
        out.append(t)
        if t in eos:
            break
    return out


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
    cache = new_cache(target.model)
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
    ids, mask, pos = left_padded(prompts, pad, dev)
    cache, kw = new_cache(model), cache_kw(model)
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
    return [cut_at_eos(row, eos) for row in torch.stack(toks, dim=1).tolist()]  # [batch, steps]


@torch.inference_mode()
def decode_states(target, prompts: Sequence[Sequence[int]], states: Sequence[State], max_new: int, batch: int = 16,
                  temperature: float = 0.0, seed: int = 0, out_device: str = "cpu",
                  progress: Callable[[int, int], None] | None = None) -> list[Decoded]:
    """The target's continuations of ``prompts`` (batched: prompts of similar length share a batch, left
    padding, one KV cache per batch; a row stops at its first EOS token, kept), capturing ``states`` at
    every position on the way (prompt and generated), so no teacher pass is needed: the cached decode
    computes the same states. Greedy at ``temperature`` 0; else sampled from ``softmax(logits /
    temperature)`` with one generator seeded ``seed`` on the input device, drawn batch after batch in
    length order (the same seed and prompts give the same text). States are gathered as float32 on
    ``out_device`` after every forward. Padding changes rounding, so this is for training data (the
    simulation continues one prompt at a time: :func:`greedy_generate`). Not memoised."""
    model, dev, eos = target.model, target.input_device, eos_ids(target)
    states = tuple(states)
    pad = min(eos) if eos else 0
    eos_t = torch.tensor(sorted(eos) or [-1], device=dev)
    kw = cache_kw(model)
    gen_rng = torch.Generator(device=dev).manual_seed(seed) if temperature > 0 else None
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))  # similar lengths share a batch
    out: dict[int, Decoded] = {}
    with capture(target.stack, states, stop_early=False) as store, decode_attention():
        def forward(ids, mask, pos, cache):
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                           **{kw: cache}).logits[:, -1]  # [batch, vocab]
            return logits, [store[s].to(out_device, torch.float32) for s in states]  # per state [batch, pos, H]

        for bi in range(0, len(order), batch):
            idx = order[bi:bi + batch]
            chunk = [list(prompts[i]) for i in idx]
            width = max(len(p) for p in chunk)
            ids, mask, pos = left_padded(chunk, pad, dev)
            cache = new_cache(model)
            logits, caps = forward(ids, mask, pos, cache)
            steps, toks = [caps], []
            done = torch.zeros(len(chunk), dtype=torch.bool, device=dev)
            for step in range(max_new):
                if gen_rng is None:
                    tok = logits.argmax(-1)  # [batch]
                else:
                    tok = torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1,
                                            generator=gen_rng)[:, 0]
                toks.append(tok)
                done |= torch.isin(tok, eos_t)
                if step == max_new - 1 or bool(done.all()):
                    break
                mask = torch.cat([mask, mask.new_ones(len(chunk), 1)], dim=1)
                pos = pos[:, -1:] + 1
                logits, caps = forward(tok[:, None], mask, pos, cache)
                steps.append(caps)
            held = [torch.cat([c[j] for c in steps], dim=1) for j in range(len(states))]  # [batch, width + steps - 1, H]
            gen = torch.stack(toks, dim=1).tolist()  # [batch, steps]
            for r, i in enumerate(idx):
                cont = cut_at_eos(gen[r], eos)
                p = len(chunk[r])
                keep = slice(width - p, width + len(cont) - 1)  # states of every token but the last
                # a copy: the batch's padded tensors are freed before the next batch runs
                out[i] = Decoded(tuple(chunk[r] + cont), p, {s: h[r, keep].clone() for s, h in zip(states, held)})
            if progress:
                progress(min(bi + batch, len(order)), len(order))
    return [out[i] for i in range(len(prompts))]
