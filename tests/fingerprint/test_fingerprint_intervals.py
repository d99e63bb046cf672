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
