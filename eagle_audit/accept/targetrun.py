"""The target side of an acceptance run: greedy generation with a KV cache, teacher-forced capture of
aux states, and cached forwards that capture states on the way (for the live loop).

The cache keyword is chosen from the model's signature (transformers 5.2x renamed
``past_key_values`` to ``cache``); the cache object is created here and mutated in place.
"""

from __future__ import annotations

import inspect
from typing import Iterable

import torch

from ..capture import capture, capture_states
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


def _cache_kw(model) -> str:
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
        out = target.model(input_ids=x, use_cache=True, **{_cache_kw(target.model): cache})
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


def aux_of(caps: dict[State, torch.Tensor], states: tuple[State, ...]) -> torch.Tensor:
    """Concatenate captured states in wiring order: [..., pos, n*hidden] (one state: passed through)."""
    parts = [caps[s] for s in states]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


@torch.inference_mode()
def teacher_states(target, ids: list[int], states: Iterable[State]) -> dict[State, torch.Tensor]:
    """One teacher-forced pass over ``ids``: {state: [pos, hidden]} (float32, on the target's device)."""
    caps = capture_states(target, torch.tensor([ids]), tuple(states))
    return {s: t[0].float() for s, t in caps.items()}
