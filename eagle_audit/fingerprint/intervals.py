"""The statistics of the fingerprint's judgement: the independent units of a text (:func:`units_of`), Student's
t quantile, the paired cluster-robust interval (:func:`paired_interval`) and the tokens at which a margin
would be separated (:func:`tokens_to_separate`). Used by the scorer (each scored token's unit,
:mod:`eagle_audit.fingerprint.score`) and the search's judgement (:mod:`eagle_audit.fingerprint.search`);
it imports neither, so neither imports the other for them.
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


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 400):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            out *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return out


def _beta_reg(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def t_cdf(x: float, df: int) -> float:
    """Student's t CDF at ``x`` >= 0: 1 - I_{df / (df + x^2)}(df / 2, 1 / 2) / 2."""
    return 1.0 - 0.5 * _beta_reg(df / 2, 0.5, df / (df + x * x))


@lru_cache(maxsize=4096)  # the estimators scan every df up to 400 (beyond: normal)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (``p`` > 0.5), by bisection of its CDF (:func:`t_cdf`, the incomplete beta function;
    no scipy). A CDF by Simpson's rule on the density (2,000 points) took 9 s for the 400 dfs a slot's estimate
    of more text scans; this one agrees with it to 1e-9 (tests/fingerprint/test_fingerprint_intervals.py)."""
    if df >= 400:
        return NormalDist().inv_cdf(p)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def paired_interval(a: torch.Tensor, b: torch.Tensor, units: torch.Tensor, level: float = 0.99) -> Interval:
    """Mean of ``a - b`` over tokens with a cluster-robust interval: the per-unit sums of the difference
    (a unit: one prompt and its continuation, :func:`units_of`) are the independent observations; the
    variance of the ratio estimate (CR1: G/(G-1)), the t quantile with G-1 degrees of freedom. Every
    correlation inside a text widens it, however long its range (the moving-block bootstrap of 8 tokens
    it replaces was too narrow on real text: a false LAYER_OFFSET on 666 held-out tokens)."""
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


#: the chance an estimate of more evidence is made for: at the tokens it names, the 99% interval is expected to
#: exclude 0 with this probability, given what was measured (an estimate made for the point where the
#: interval's half-width meets the measured margin came true about half the time, by construction)
POWER = 0.8


def tokens_to_separate(iv: Interval, units: int, tokens: int, level: float = 0.99, cap: int = 64,
                       power: float = POWER) -> int | None:
    """Scored tokens (prompts of the same kind and length) at which this margin's interval would exclude 0.

    Separated already (the interval excludes 0): how few would have done, the point at which the half-width,
    grown by the square root of fewer prompts, meets the measured margin.

    Not separated: the fewest tokens, the measured ones among them (as a second round adds to the first), at which
    the interval is *predicted* to exclude 0 with probability ``power``. With the measured margin m, its standard
    error se on G prompts (the cluster-robust one of the interval: per-prompt sums, so the correlation of tokens
    within a text is in it) and a flat prior on the true margin, the mean over g >= G prompts is predicted as
    N(m, se^2 (1 - G/g)); the interval excludes 0 when that mean exceeds t(g-1) se sqrt(G/g), so
    P(g) = Phi((|m| - t(g-1) se sqrt(G/g)) / (se sqrt(1 - G/g))). P grows with g towards Phi(|m|/se): a margin
    within about 0.84 se of 0 is never predicted to separate with 0.8, however much text. Assumption, named: the
    per-prompt spread and the draft's margin stay as measured on prompts of the same kind.
    None: not within ``cap`` times the current evidence."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)) or iv.mean == 0 or units < 2:
        return None
    q = (1 + level) / 2
    se = (iv.high - iv.low) / 2 / t_quantile(q, units - 1)
    m = abs(iv.mean)
    if iv.low > 0 or iv.high < 0:
        for g in range(2, units + 1):
            if t_quantile(q, g - 1) * se * math.sqrt(units / g) < m:
                return math.ceil(g * tokens / units)
        return tokens
    if NormalDist().cdf(m / se) < power:
        return None
    z = NormalDist().inv_cdf(power)
    for g in range(units + 1, cap * units + 1):
        if m - t_quantile(q, g - 1) * se * math.sqrt(units / g) >= z * se * math.sqrt(1 - units / g):
            return math.ceil(g * tokens / units)
    return None
