"""Search the wiring that the draft agrees with its target best under, and judge how sure that is.

Search (:func:`search`): score every starting wiring (each convention's, the declared one, the
engine's); from the best, improve one slot at a time over every state (Gauss-Seidel: the slot takes the
best state with the others held), then try every permutation of the resulting set; repeat until no single
change improves the objective, the mean log-probability of the target's next token. The last sweep, in
which nothing changed, is the per-slot table: slot i against every state, the other slots at the answer.

Judgement (:func:`judge`): per slot, the paired difference between the best state and the runner-up,
token by token, with a 99% moving-block bootstrap interval (log-probability and top-1). Every state whose
log-probability interval against the best reaches 0 is not separated from it and is named with it
("B15 or B16"); such a slot is ambiguous. The whole answer is withheld
(``REPRESENTATION_MISMATCH``) when the best wiring is poor or barely better than no target information.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .score import Score, Scorer

Wiring = tuple[int, ...]  # indices into the candidate states, in slot order


@dataclass(frozen=True)
class SearchTrace:
    best: Wiring
    starts: tuple[tuple[str, Wiring, float], ...]  # (name, wiring, objective)
    rows: tuple[tuple[float, ...], ...]  # [slot][candidate]: mean log-prob, the other slots at ``best``
    top1_rows: tuple[tuple[float, ...], ...]  # [slot][candidate]: top-1 agreement
    sweeps: int
    evaluations: int


def _objective(s: Score) -> float:
    return s.mean_logprob


def search(scorer: Scorer, starts: Sequence[tuple[str, Wiring]], num_candidates: int, max_sweeps: int = 6,
           max_permutations: int = 720, give_up_below_top1: float = 0.0,
           progress: Callable[[str], None] | None = None) -> SearchTrace:
    """``give_up_below_top1``: stop after a sweep whose best wiring still agrees on fewer tokens than this
    (no wiring will be trusted; the last sweep's table is still complete)."""
    say = progress or (lambda m: None)
    scored = [(name, tuple(w), _objective(scorer.score(w))) for name, w in starts]
    best = max(scored, key=lambda t: t[2])[1]
    cur = _objective(scorer.score(best))
    n = len(best)
    sweeps = 0
    while True:
        sweeps += 1
        changed = False
        for i in range(n):
            for j in range(num_candidates):
                w = best[:i] + (j,) + best[i + 1:]
                v = _objective(scorer.score(w))
                if v > cur + 1e-9:
                    best, cur, changed = w, v, True
        perms = itertools.islice(itertools.permutations(best), max_permutations) if n > 1 else ()
        for p in perms:
            v = _objective(scorer.score(p))
            if v > cur + 1e-9:
                best, cur, changed = tuple(p), v, True
        say(f"sweep {sweeps}: {scorer.evaluations} wirings scored, objective {cur:.4f}")
        if not changed or sweeps >= max_sweeps or scorer.score(best).top1 < give_up_below_top1:
            break
    rows, top1 = [], []
    for i in range(n):
        sc = [scorer.score(best[:i] + (j,) + best[i + 1:]) for j in range(num_candidates)]
        rows.append(tuple(_objective(s) for s in sc))
        top1.append(tuple(s.top1 for s in sc))
    return SearchTrace(best, tuple(scored), tuple(rows), tuple(top1), sweeps, scorer.evaluations)


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def to_json(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class SlotJudgement:
    index: int
    best: int
    runner_up: int | None
    logprob_margin: Interval | None  # best - runner-up, mean log-prob per token
    top1_margin: Interval | None  # best - runner-up, top-1 agreement
    candidates: tuple[int, ...]  # the best and every state not separated from it, best first
    ambiguous: bool


def bootstrap_indices(m: int, resamples: int, seed: int, block: int) -> torch.Tensor:
    """[resamples, m'] token indices: a moving-block bootstrap (blocks of ``block`` consecutive scored
    tokens, so that the correlation of neighbouring tokens widens the interval as it should)."""
    g = torch.Generator().manual_seed(seed)
    block = max(1, min(block, m))
    nb = math.ceil(m / block)
    starts = torch.randint(0, m - block + 1, (resamples, nb), generator=g)
    return (starts[..., None] + torch.arange(block)).reshape(resamples, -1)


def paired_interval(a: torch.Tensor, b: torch.Tensor, idx: torch.Tensor, level: float = 0.95) -> Interval:
    d = (a - b).double()
    means = d[idx].mean(-1)
    q = torch.quantile(means, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64))
    return Interval(float(d.mean()), float(q[0]), float(q[1]))


def judge(scorer: Scorer, trace: SearchTrace, resamples: int = 1000, block: int = 8, seed: int = 0,
          level: float = 0.99) -> tuple[SlotJudgement, ...]:
    """Per slot: runner-up, paired bootstrap margins (at ``level``), and the states not separated from the
    best: those whose log-prob interval against it reaches 0. Log-prob, the search objective, decides; the
    top-1 margin is evidence beside it (a thresholded, noisier view of the same predictions: over 30-odd
    states some top-1 intervals exclude 0 by chance)."""
    best = trace.best
    m = scorer.score(best).logprob.numel()
    idx = bootstrap_indices(m, resamples, seed, block) if m else None
    out = []
    for i, row in enumerate(trace.rows):
        order = sorted(range(len(row)), key=lambda j: -row[j])
        top = scorer.score(best)
        runner = next((j for j in order if j != best[i]), None)
        if runner is None or idx is None:
            out.append(SlotJudgement(i, best[i], runner, None, None, (best[i],), False))
            continue
        others = {j: scorer.score(best[:i] + (j,) + best[i + 1:]) for j in order if j != best[i]}
        lp = paired_interval(top.logprob, others[runner].logprob, idx, level)
        t1 = paired_interval(top.hit, others[runner].hit, idx, level)
        close = [best[i]]
        for j in order:
            if j == best[i]:
                continue
            o = others[j]
            if paired_interval(top.logprob, o.logprob, idx, level).low <= 0:
                close.append(j)
        out.append(SlotJudgement(i, best[i], runner, lp, t1, tuple(close), len(close) > 1))
    return tuple(out)
