"""The fingerprint's decision interval is honest under the correlation of real text: per-token differences
that share a prompt-level offset and an autocorrelated token-level noise (what a draft's agreement with two
states looks like on one text), with a known mean. The interval must cover it at its stated level."""

from __future__ import annotations

import math

import pytest
import torch

from eagle_audit.fingerprint.intervals import paired_interval, t_quantile, tokens_to_separate, units_of


@pytest.mark.parametrize("p, df, want", [(0.995, 7, 3.4995), (0.995, 2, 9.9248), (0.975, 30, 2.0423),
                                         (0.995, 1, 63.657), (0.995, 1000, 2.5758)])
def test_t_quantile(p, df, want):
    assert t_quantile(p, df) == pytest.approx(want, rel=2e-4)


def text_like(g: torch.Generator, prompts: int, mean: float, prompt_sd: float = 0.3, rho: float = 0.7,
              noise_sd: float = 1.0):
    """Per-token differences of ``prompts`` texts of 40-120 tokens: mean + a prompt's offset + AR(1) noise
    (heavy-tailed: a few tokens where one state is far worse), and each token's prompt index."""
    ds, seq = [], []
    for p in range(prompts):
        n = int(torch.randint(40, 121, (1,), generator=g))
        e = torch.randn(n, generator=g, dtype=torch.float64) * noise_sd
        e = e * torch.where(torch.rand(n, generator=g) < 0.05, 4.0, 1.0)
        x = torch.empty(n, dtype=torch.float64)
        x[0] = e[0]
        for t in range(1, n):
            x[t] = rho * x[t - 1] + math.sqrt(1 - rho ** 2) * e[t]
        ds.append(mean + prompt_sd * float(torch.randn(1, generator=g)) + x)
        seq.append(torch.full((n,), p))
    return torch.cat(ds), torch.cat(seq)


@pytest.mark.parametrize("prompts", [3, 8, 16])
def test_the_interval_covers_the_mean_at_its_level(prompts):
    g = torch.Generator().manual_seed(prompts)
    trials, covered, mu = 400, 0, 0.05
    for _ in range(trials):
        d, seq = text_like(g, prompts, mu)
        iv = paired_interval(d, torch.zeros_like(d), units_of(seq), 0.99)
        covered += iv.low <= mu <= iv.high
    assert covered / trials >= 0.975, covered / trials  # 99% stated; 400 trials: 97.5% is 2.5 sd below


def test_a_true_difference_is_separated_given_enough_prompts():
    g = torch.Generator().manual_seed(1)
    d, seq = text_like(g, 48, 0.4)
    iv = paired_interval(d, torch.zeros_like(d), units_of(seq), 0.99)
    assert iv.low > 0
    few_d, few_seq = text_like(g, 4, 0.4)
    few = paired_interval(few_d, torch.zeros_like(few_d), units_of(few_seq), 0.99)
    need = tokens_to_separate(few, 4, few_d.numel())
    assert need is not None and need > 0


def test_one_prompt_is_cut_into_pieces_and_stays_wide():
    g = torch.Generator().manual_seed(2)
    d, seq = text_like(g, 1, 0.05)
    units = units_of(seq)
    assert int(units.max()) + 1 == 4
    iv = paired_interval(d, torch.zeros_like(d), units, 0.99)
    assert iv.high - iv.low > 0.5


def texts(g: torch.Generator, prompts: int, mean: float, prompt_sd: float = 0.3, rho: float = 0.7, longest: int = 120):
    """:func:`text_like`'s texts (the same model: prompt offset, AR(1) heavy-tailed noise, 40-120 tokens), drawn
    for all prompts at once (the estimate check below needs thousands of prompts)."""
    n = torch.randint(40, longest + 1, (prompts,), generator=g)
    e = torch.randn(prompts, longest, generator=g, dtype=torch.float64)
    e = e * torch.where(torch.rand(prompts, longest, generator=g) < 0.05, 4.0, 1.0)
    x = torch.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, longest):
        x[:, t] = rho * x[:, t - 1] + math.sqrt(1 - rho ** 2) * e[:, t]
    x = x + mean + prompt_sd * torch.randn(prompts, 1, generator=g, dtype=torch.float64)
    keep = torch.arange(longest)[None] < n[:, None]
    return x[keep], torch.arange(prompts)[:, None].expand(-1, longest)[keep]


def estimate_comes_true(mu: float, trials: int = 300, first: int = 8, seed: int = 0) -> tuple[int, int]:
    """Of the first looks (``first`` prompts) not separated, the estimates made and how many came true: the
    tokens named, the first look's prompts among them (as a second round adds to the first), separated."""
    g = torch.Generator().manual_seed(seed)
    made = true = 0
    for _ in range(trials):
        d, seq = texts(g, first, mu)
        iv = paired_interval(d, torch.zeros_like(d), units_of(seq), 0.99)
        if iv.low > 0:
            continue
        want = tokens_to_separate(iv, first, d.numel())
        if want is None:
            continue
        more = math.ceil(want / (d.numel() / first)) - first
        d2, s2 = texts(g, more, mu)
        both = paired_interval(torch.cat([d, d2]), torch.zeros(d.numel() + d2.numel(), dtype=torch.float64),
                               units_of(torch.cat([seq, s2 + first])), 0.99)
        made += 1
        true += both.low > 0
    return made, true


def test_the_tokens_an_estimate_names_separate_as_often_as_it_says():
    """Issue 18: the tokens ``needs`` named to separate a slot did not separate it on a SpecForge draft's held-out
    text. The estimate before planned on the point where the interval's half-width meets the measured margin: a
    coin flip if the margin were right, and, the first look being one that did not separate, it came true in 64%
    here (0.3 mean log-prob, 8 prompts of 40-120 tokens). The predictive estimate (``intervals.POWER`` 0.8)
    measured 84% (193 estimates; 0.75 is 3.5 sd below it)."""
    made, true = estimate_comes_true(0.3)
    assert made >= 100
    assert true / made >= 0.75, (true, made)


def test_t_quantile_matches_the_tables():
    """Student's t quantiles by the incomplete beta function (intervals.t_cdf): the printed tables' values."""
    from eagle_audit.fingerprint.intervals import t_cdf, t_quantile

    for p, df, want in ((0.975, 1, 12.706205), (0.995, 7, 3.499483), (0.975, 10, 2.228139), (0.995, 30, 2.749996),
                        (0.95, 4, 2.131847), (0.9, 60, 1.295821)):
        assert abs(t_quantile(p, df) - want) < 5e-6, (p, df, t_quantile(p, df))
    assert abs(t_cdf(0.0, 5) - 0.5) < 1e-12 and abs(t_cdf(2.570582, 5) - 0.975) < 1e-6
