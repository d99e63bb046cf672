"""Acceptance by simulation (greedy verification, chain and tree drafts: exact).

1. The target greedily generates a continuation of each prompt (KV cache; :func:`make_cases`).
2. One teacher-forced target pass over prompt + continuation captures the union of the states every
   wiring needs (:func:`capture_cases`).
3. Per wiring, the draft is rolled out ``num_steps`` tokens from every position at once
   (:func:`~eagle_audit.runtime.rollout.rollout`): step 0 is the draft-extend over the teacher-forced
   prefix (target aux states, the accepted tokens), later steps read the draft's own hidden and own
   previous token, as SGLang's ``draft_forward`` does.
4. The continuation is walked with verify steps from each accepted point (:func:`walk`): a verify at
   root a accepts the longest prefix of drafts equal to the target's tokens, plus the bonus token.
   Tree drafts (``topk > 1``) replace steps 3-4 by :func:`~eagle_audit.simulate.tree.draft_trees` and
   :func:`~eagle_audit.simulate.tree.tree_accepts` (SGLang's beam expansion and pruning; the longest
   accepted root-to-node path).

Accept length is tokens gained per verify = accepted drafts + 1, excluding the prefill token: over a
set of SGLang requests, ``sum(meta_info.completion_tokens - 1) / sum(meta_info.spec_verify_ct)``
(docs/server.md); the per-request ``spec_accept_length`` (completion tokens / verifies, prefill token
included) is kept beside it. The last verify of a sequence is cut at the end of the
continuation (EOS or ``max_new_tokens``), as the live loop cuts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..states import State
from ..runtime.rollout import rollout
from ..runtime.eagle3 import Eagle3Draft
from .tree import KV_BY_SLOT, draft_trees, tree_accepts, walk_accepts
from .targetrun import aux_of


@dataclass(frozen=True)
class Case:
    """One prompt and the target's own greedy continuation of it."""

    prompt: tuple[int, ...]
    continuation: tuple[int, ...]

    @property
    def ids(self) -> list[int]:
        return list(self.prompt) + list(self.continuation)


@dataclass(frozen=True)
class AcceptStats:
    """Acceptance of one wiring over all cases."""

    accept_length: float | None  # tokens per verify (accepted drafts + 1), prefill token excluded
    request_accept_length: float | None  # mean over requests of completion tokens / verifies (SGLang meta_info)
    per_position: tuple[float, ...]  # [num_steps]: share of verifies that accepted draft i
    histogram: tuple[int, ...]  # [num_steps + 1]: verifies that accepted n drafts
    verify_steps: int
    tokens: int  # generated tokens after the prefill token
    gains: tuple[tuple[int, ...], ...]  # per case, tokens gained at each verify

    def to_json(self) -> dict:
        return {"accept_length": self.accept_length, "request_accept_length": self.request_accept_length,
                "per_position": list(self.per_position), "histogram": list(self.histogram),
                "verify_steps": self.verify_steps, "tokens": self.tokens}


def make_cases(target, prompts_ids: Sequence[Sequence[int]], max_new: int,
               progress: Callable[[int, int], None] | None = None, batch: int = 1) -> tuple[list[Case], float]:
    """The target's greedy continuations, and the seconds they took (the target-alone baseline).
    ``batch`` > 1 generates that many prompts together (:func:`greedy_generate_batch`; prompts of
    similar length share a batch); the seconds are then the batch's, not one prompt's alone. Through the
    target's state source (:mod:`eagle_audit.source`): a prompt continued before is not continued again."""
    from ..source import as_source

    conts, seconds = as_source(target).continuations(prompts_ids, max_new, batch=batch, progress=progress)
    return [Case(tuple(p), tuple(c)) for p, c in zip(prompts_ids, conts)], seconds


def capture_cases(target, cases: Sequence[Case], states: Sequence[State]) -> list[dict[State, torch.Tensor]]:
    """Per case, {state: [pos, hidden]} over prompt + continuation, from one teacher-forced pass."""
    from ..source import as_source

    union = tuple(sorted(set(states)))
    source = as_source(target)
    dev = source.input_device  # a target split over devices (device_map) leaves states where their layer ran
    forced = source.teacher_forced([c.ids for c in cases], union)
    return [{s: t.to(dev, torch.float32) for s, t in f.states.items()} for f in forced]


def walk(ids: Sequence[int], prompt_len: int, drafts: Sequence[Sequence[int]]) -> list[int]:
    """Tokens gained at each verify along ``ids``. ``drafts[j][a-1]`` is draft token j+1 proposed
    when x[a] is the last verified token."""
    L, a, gains = len(ids), prompt_len, []
    steps = len(drafts)
    while a < L - 1:
        n = 0
        while n < steps and a + n + 1 <= L - 1 and drafts[n][a - 1] == ids[a + n + 1]:
            n += 1
        g = min(n + 1, L - 1 - a)
        gains.append(g)
        a += g
    return gains


@torch.inference_mode()
def draft_chains(draft: Eagle3Draft, ids: Sequence[int], caps: dict[State, torch.Tensor], states: tuple[State, ...],
                 steps: int) -> list[list[int]]:
    """[steps][T] draft target ids from every position of ``ids`` (T = len(ids) - 1)."""
    dev = draft.device
    x = torch.tensor([list(ids)], device=dev)  # [1, L]
    aux = aux_of(caps, states)[None, :-1].to(dev)  # [1, L-1, n*H_t]
    ro = rollout(draft, x[:, 1:], aux, steps)
    return [t[0].tolist() for t in ro.tokens]


@torch.inference_mode()
def tree_gains(draft: Eagle3Draft, ids: Sequence[int], prompt_len: int, caps: dict[State, torch.Tensor],
               states: tuple[State, ...], steps: int, topk: int, num_draft_tokens: int,
               attention: str = KV_BY_SLOT) -> list[int]:
    """Tokens gained at each verify along ``ids`` with tree drafts (any topk, 1 included); ``attention``
    as in :func:`~eagle_audit.simulate.tree.draft_trees`."""
    dev = draft.device
    x = torch.tensor([list(ids)], device=dev)  # [1, L]
    aux = aux_of(caps, states)[None, :-1].to(dev)  # [1, L-1, n*H_t]
    trees = draft_trees(draft, x[:, 1:], aux, steps, topk, num_draft_tokens, attention)
    return walk_accepts(len(ids), prompt_len, tree_accepts(trees, list(ids), steps))


def stats_from_gains(gains: Sequence[Sequence[int]], steps: int, cases: Sequence[Case]) -> AcceptStats:
    flat = [g for gs in gains for g in gs]
    hist = [0] * (steps + 1)
    for g in flat:
        hist[min(g - 1, steps)] += 1
    n = len(flat)
    per_pos = tuple(sum(hist[i + 1:]) / n if n else 0.0 for i in range(steps))
    req = [len(c.continuation) / len(gs) for c, gs in zip(cases, gains) if gs]
    return AcceptStats(sum(flat) / n if n else None, sum(req) / len(req) if req else None, per_pos, tuple(hist), n,
                       sum(flat), tuple(tuple(g) for g in gains))


def simulate(draft: Eagle3Draft, cases: Sequence[Case], caps: Sequence[dict[State, torch.Tensor]],
             states: tuple[State, ...], steps: int, topk: int = 1, num_draft_tokens: int | None = None,
             tree_attention: str = KV_BY_SLOT) -> AcceptStats:
    """Acceptance of ``draft`` fed ``states`` (in this order) on every case: a chain of ``steps`` drafts
    (``topk == 1``), or a tree of ``num_draft_tokens - 1`` drafts over ``steps`` levels (``topk > 1``)
    whose nodes attend to draft keys as ``tree_attention`` says (:data:`~eagle_audit.simulate.tree.TREE_ATTENTION`)."""
    gains = []
    for case, cap in zip(cases, caps):
        if topk > 1:
            gains.append(tree_gains(draft, case.ids, len(case.prompt), cap, states, steps, topk,
                                    num_draft_tokens if num_draft_tokens is not None else steps + 1, tree_attention))
            continue
        chains = draft_chains(draft, case.ids, cap, states, steps)
        gains.append(walk(case.ids, len(case.prompt), chains))
    return stats_from_gains(gains, steps, cases)
