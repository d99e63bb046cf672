"""Search the wiring that the draft agrees with its target best under, and judge how sure that is.

Search (:func:`search`): score every starting wiring (each convention's, the declared one, the
engine's); from the best, improve one slot at a time over every state (Gauss-Seidel: the slot takes the
best state with the others held), then try every permutation of the resulting set; repeat until no single
change improves the objective, the mean log-probability of the target's next token. The last sweep, in
which nothing changed, is the per-slot table: slot i against every state, the other slots at the answer.

Judgement (:func:`judge`): per slot, the paired difference between the best state and the runner-up,
token by token, with a 99% cluster-robust interval whose units are the prompts (log-probability and top-1;
:func:`paired_interval`). Every state whose
log-probability interval against the best reaches 0 is not separated from it and is named with it
("B15 or B16"); such a slot is ambiguous. The whole answer is withheld
(``REPRESENTATION_MISMATCH``) when the best wiring is poor or barely better than no target information.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
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
    rows, top1 = slot_table(scorer, best, num_candidates)
    return SearchTrace(best, tuple(scored), rows, top1, sweeps, scorer.evaluations)


def slot_table(scorer: Scorer, best: Wiring, num_candidates: int
               ) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]:
    """[slot][candidate] mean log-prob and top-1 agreement, each slot given every state, the others at ``best``."""
    rows, top1 = [], []
    for i in range(len(best)):
        sc = [scorer.score(best[:i] + (j,) + best[i + 1:]) for j in range(num_candidates)]
        rows.append(tuple(_objective(s) for s in sc))
        top1.append(tuple(s.top1 for s in sc))
    return tuple(rows), tuple(top1)


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def to_json(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high}


#: fewer sequences than this and each sequence is cut into contiguous pieces to have enough units (below)
MIN_UNITS = 4


def units_of(seq: torch.Tensor, pos: torch.Tensor | None = None, min_units: int = MIN_UNITS) -> torch.Tensor:
    """The independent units of the interval, one id per scored token. ``seq``: each scored token's sequence
    (prompt) index; ``pos``: its position in the text (None: the order given). A prompt and its continuation
    is one unit: tokens of one text are correlated at every range (its topic, its register, how well the draft
    knows it), prompts are drawn independently. With fewer than ``min_units`` sequences, each is cut into
    contiguous pieces of positions so that ``min_units`` units exist (assumption: the correlation between
    neighbouring pieces is small; the t quantile of few units stays wide)."""
    ids = torch.unique(seq, return_inverse=True)[1]
    g = int(ids.max()) + 1 if ids.numel() else 0
    if g == 0 or g >= min_units:
        return ids
    per = math.ceil(min_units / g)
    out = torch.empty_like(ids)
    for u in range(g):
        where = (ids == u).nonzero()[:, 0]
        rank = torch.arange(where.numel())
        if pos is not None:  # rank of each entry's position within its sequence (ties: the order given)
            rank = torch.empty_like(rank).scatter_(0, torch.argsort(pos[where], stable=True), rank)
        piece = torch.div(rank * per, max(1, where.numel()), rounding_mode="floor")
        out[where] = u * per + piece
    return torch.unique(out, return_inverse=True)[1]


@lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (``p`` > 0.5), by bisection of its CDF (Simpson's rule on the density; no scipy)."""
    if df >= 400:
        return NormalDist().inv_cdf(p)
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float, n: int = 2000) -> float:
        h = x / n
        f = [c * (1 + (k * h) ** 2 / df) ** (-(df + 1) / 2) for k in range(n + 1)]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def paired_interval(a: torch.Tensor, b: torch.Tensor, units: torch.Tensor, level: float = 0.99) -> Interval:
    """Mean of ``a - b`` over tokens with a cluster-robust interval: the per-unit sums of the difference
    (a unit: one prompt and its continuation, :func:`units_of`) are the independent observations; the
    variance of the ratio estimate (CR1: G/(G-1)), the t quantile with G-1 degrees of freedom. Every
    correlation inside a text widens it, however long its range (the moving-block bootstrap of 8 tokens
    it replaces was too narrow on real text: a false LAYER_OFFSET on 666 held-out tokens, issue 18)."""
    d = (a - b).double()
    n_tok = d.numel()
    if n_tok == 0:
        return Interval(0.0, -math.inf, math.inf)
    G = int(units.max()) + 1
    S = torch.zeros(G, dtype=torch.float64).index_add_(0, units, d)
    n = torch.zeros(G, dtype=torch.float64).index_add_(0, units, torch.ones_like(d))
    mean = float(S.sum() / n.sum())
    if G < 2:
        return Interval(mean, -math.inf, math.inf)
    se = math.sqrt(G / (G - 1) * float(((S - mean * n) ** 2).sum())) / n_tok
    half = t_quantile((1 + level) / 2, G - 1) * se
    return Interval(mean, mean - half, mean + half)


def tokens_to_separate(iv: Interval, units: int, tokens: int, level: float = 0.99, cap: int = 64) -> int | None:
    """Scored tokens (prompts of the same kind and length, fewer or more than given) at which this margin's
    interval excludes 0, if its mean and the per-prompt spread stay as measured; None: not within ``cap``
    times the current evidence (the two states are as good as alike for this draft on such text)."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)) or iv.mean == 0 or units < 2:
        return None
    q = (1 + level) / 2
    se = (iv.high - iv.low) / 2 / t_quantile(q, units - 1)
    for g in range(2, cap * units + 1):
        if t_quantile(q, g - 1) * se * math.sqrt(units / g) < abs(iv.mean):
            return math.ceil(g * tokens / units)
    return None


@dataclass(frozen=True)
class SlotJudgement:
    index: int
    best: int
    runner_up: int | None
    logprob_margin: Interval | None  # best - runner-up, mean log-prob per token
    top1_margin: Interval | None  # best - runner-up, top-1 agreement
    candidates: tuple[int, ...]  # the best and every state not separated from it, best first
    ambiguous: bool
    separate_tokens: int | None = None  # scored tokens at which the runner-up would be separated (None: not in reach)
    name_tokens: int | None = None  # ... at which at most ``max_named`` states would remain (None: not in reach)
    unused: bool = False  # even the worst state is not separated from the best: the draft does not use the slot here
    uninformed: bool = False  # the best state is not separated from itself shuffled over positions: the draft does
    # not use what the slot carries, only its statistics (a state it was not trained on can then score best)
    use_margin: Interval | None = None  # best - best shuffled over positions


def judge(scorer: Scorer, trace: SearchTrace, level: float = 0.99, max_named: int = 3) -> tuple[SlotJudgement, ...]:
    """Per slot: runner-up, paired cluster-robust margins (at ``level``, :func:`paired_interval`), and the
    states not separated from the best: those whose log-prob interval against it reaches 0. Log-prob, the
    search objective, decides; the top-1 margin is evidence beside it (a thresholded, noisier view of the
    same predictions). With each slot: the tokens at which its runner-up, and its ``max_named + 1``-th
    state, would be separated, and whether the draft uses it at all on this text."""
    best = trace.best
    top = scorer.score(best)
    units = scorer.units
    G = int(units.max()) + 1 if units.numel() else 0
    m = scorer.scored if top.logprob.numel() else 0  # text positions (how sure is said in text tokens)
    out = []
    for i, row in enumerate(trace.rows):
        order = sorted(range(len(row)), key=lambda j: -row[j])
        runner = next((j for j in order if j != best[i]), None)
        if runner is None or m == 0:
            out.append(SlotJudgement(i, best[i], runner, None, None, (best[i],), False))
            continue
        ivs = {j: paired_interval(top.logprob, scorer.score(best[:i] + (j,) + best[i + 1:]).logprob, units, level)
               for j in order if j != best[i]}
        lp = ivs[runner]
        t1 = paired_interval(top.hit, scorer.score(best[:i] + (runner,) + best[i + 1:]).hit, units, level)
        close = [best[i]] + [j for j in order if j != best[i] and ivs[j].low <= 0]
        rest = [j for j in order if j != best[i]]
        nth = ivs[rest[max_named - 1]] if len(rest) >= max_named else None
        use = paired_interval(top.logprob, scorer.shuffled(best, i).logprob, units, level)
        out.append(SlotJudgement(
            i, best[i], runner, lp, t1, tuple(close), len(close) > 1,
            tokens_to_separate(lp, G, m, level),
            tokens_to_separate(nth, G, m, level) if nth is not None else None,
            ivs[order[-1]].low <= 0 if order[-1] != best[i] else False, use.low <= 0, use))
    return tuple(out)


def joint_interval(scorer: Scorer, best: Wiring, other: Wiring, level: float = 0.99) -> Interval:
    """best - ``other``, both whole wirings, per token (the test of a claimed wiring that differs in several slots)."""
    return paired_interval(scorer.score(best).logprob, scorer.score(other).logprob, scorer.units, level)
