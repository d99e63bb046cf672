"""The statistics of the fingerprint's judgement: the independent units of a text (:func:`units_of`), Student's
t quantile, the paired cluster-robust interval (:func:`paired_interval`) and the tokens at which a margin
would be separated (:func:`tokens_to_separate`). Used by the scorer (each scored token's unit,
:mod:`eagle_audit.fingerprint.score`) and the search's judgement (:mod:`eagle_audit.fingerprint.search`);
it imports neither (until 2026-12-01 these lived in ``search.py``, which imports ``score.py``, so ``score.py``
imported ``search.py`` back inside a function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import torch


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
