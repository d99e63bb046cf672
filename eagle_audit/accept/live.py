"""Live speculative decoding, chain mode: a real draft-then-verify loop with KV caches for the target
(transformers cache, cropped after each verify) and the draft (per-layer key/value tensors).

Per round, with x[a] the last verified token (the root):

1. the draft proposes d_1 (from the previous draft-extend row) and d_2..d_k (``draft_forward``: own
   token, own hidden, positions a..a+k-2, temporary keys dropped after the round);
2. the target verifies [x[a], d_1..d_k] in one cached forward, capturing the aux states;
3. the longest prefix of drafts equal to the target's argmax is accepted, plus the target's bonus
   token (cut at EOS and at ``max_new``); the target cache is cropped to the accepted tokens;
4. draft-extend: the draft reads (accepted token, target aux state) for the accepted rows, positions
   a..a+g-1, appending to its cache; its last row gives d_1 of the next round.

Greedy verification makes the output equal to the target's own greedy output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..states import State
from ..runtime.eagle3 import Eagle3Draft
from ..simulate.accept import AcceptStats, Case, stats_from_gains
from ..simulate.targetrun import aux_of


@dataclass(frozen=True)
class LiveResult:
    stats: AcceptStats
    outputs: tuple[tuple[int, ...], ...]  # generated tokens per prompt
    seconds: float
    target_seconds: float  # the target alone, greedy, same prompts
    lossless: bool  # every output equals the target's own greedy output

    @property
    def tokens(self) -> int:
        return sum(len(o) for o in self.outputs)

    def to_json(self) -> dict:
        tps = self.tokens / self.seconds if self.seconds else None
        base = self.tokens / self.target_seconds if self.target_seconds else None
        return {**self.stats.to_json(), "seconds": round(self.seconds, 3), "tokens_per_s": tps,
                "target_alone_seconds": round(self.target_seconds, 3), "target_alone_tokens_per_s": base,
                "speedup": (self.target_seconds / self.seconds) if self.seconds else None, "lossless": self.lossless}


def _cat(a, b):
    return (torch.cat([a[0], b[0]], dim=2), torch.cat([a[1], b[1]], dim=2))


@torch.inference_mode()
def live_decode(target, draft: Eagle3Draft, prompt: Sequence[int], states: tuple[State, ...], steps: int,
                max_new: int, eos: set[int]) -> tuple[list[int], list[int]]:
    """(generated tokens, tokens gained per verify) for one prompt."""
    from ..source import as_source

    fwd = as_source(target).live()  # KV-cached target forwards (a source without them says so)
    dev = draft.device
    tcache = fwd.new_cache()
    logits, caps = fwd.forward(list(prompt), tcache, states)
    root = int(logits[-1].argmax())
    out, gains = [root], []
    P = len(prompt)
    ids = torch.tensor([list(prompt[1:]) + [root]], device=dev)  # [1, P]: draft position t reads x[t+1]
    o = draft(ids, aux_of(caps, states)[None].to(dev), torch.arange(P, device=dev), from_target=True)  # prefill
    dcache = o.kv
    d1, g1 = int(draft.to_target_ids(o.logits[0, -1].argmax())), o.hidden[:, -1:]
    a = P
    while len(out) < max_new and root not in eos:
        drafts, g, step_kv = [d1], g1, None
        for j in range(1, steps):  # draft_forward: own token, own hidden
            past = dcache if step_kv is None else [_cat(c, s) for c, s in zip(dcache, step_kv)]
            o = draft(torch.tensor([[drafts[-1]]], device=dev), g, torch.tensor([a + j - 1], device=dev), past)
            step_kv = o.kv if step_kv is None else [_cat(s, n) for s, n in zip(step_kv, o.kv)]
            drafts.append(int(draft.to_target_ids(o.logits[0, -1].argmax())))
            g = o.hidden
        logits, caps = fwd.forward([root] + drafts, tcache, states)  # verify
        pred = logits.argmax(-1).tolist()
        n = 0
        while n < len(drafts) and drafts[n] == pred[n]:
            n += 1
        new = (drafts[:n] + [pred[n]])[: max_new - len(out)]
        for i, t in enumerate(new):
            if t in eos:
                new = new[: i + 1]
                break
        gains.append(len(new))
        fwd.crop(tcache, a + len(new))
        o = draft(torch.tensor([new], device=dev), aux_of(caps, states)[None, : len(new)].to(dev),
                  torch.arange(a, a + len(new), device=dev), dcache, from_target=True)  # draft-extend
        dcache = [_cat(c, n_) for c, n_ in zip(dcache, o.kv)]
        d1, g1 = int(draft.to_target_ids(o.logits[0, -1].argmax())), o.hidden[:, -1:]
        out += new
        root, a = new[-1], a + len(new)
    return out, gains


def run_live(target, draft: Eagle3Draft, cases: Sequence[Case], states: tuple[State, ...], steps: int, max_new: int,
             target_seconds: float, progress: Callable[[int, int], None] | None = None) -> LiveResult:
    from ..source import as_source

    eos = as_source(target).eos_ids()
    outputs, gains, t0 = [], [], time.perf_counter()
    for i, c in enumerate(cases):
        o, g = live_decode(target, draft, c.prompt, states, steps, max_new, eos)
        outputs.append(tuple(o))
        gains.append(g)
        if progress:
            progress(i + 1, len(cases))
    seconds = time.perf_counter() - t0
    lossless = all(o == c.continuation for o, c in zip(outputs, cases))
    return LiveResult(stats_from_gains(gains, steps, cases), tuple(outputs), seconds, target_seconds, lossless)
