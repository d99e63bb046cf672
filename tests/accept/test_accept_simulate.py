"""Simulation: the verify walk, and simulation == live on a tiny random Llama target."""

from __future__ import annotations

import pytest

from eagle_audit.accept.live import run_live
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import Case, capture_cases, make_cases, simulate, stats_from_gains, walk
from eagle_audit.capture import hooks_left
from eagle_audit.draft.read import read_draft
from eagle_audit.states import State

from tests.accept.accept_tiny import TINY_BOUNDARIES, tiny_prompts
from tests.accept.accept_tiny import write_tiny_draft


def test_walk_counts_accepted_drafts_plus_bonus():
    ids = [9, 9, 1, 2, 3, 4, 5, 6, 7]  # prompt [9, 9], continuation 1..7
    T = len(ids) - 1
    # drafts[j][a-1]: perfect drafts everywhere
    perfect = [[ids[t + 2 + j] if t + 2 + j < len(ids) else -1 for t in range(T)] for j in range(3)]
    assert walk(ids, 2, perfect) == [4, 2]  # 3 accepted + bonus, then cut at the end (7 tokens - 1 prefill)
    none = [[-1] * T for _ in range(3)]
    assert walk(ids, 2, none) == [1] * 6
    s = stats_from_gains([walk(ids, 2, perfect)], 3, [Case((9, 9), (1, 2, 3, 4, 5, 6, 7))])
    assert s.accept_length == 3.0 and s.histogram == (0, 1, 0, 1) and s.per_position == (1.0, 0.5, 0.5)
    assert s.request_accept_length == 3.5  # SGLang meta_info: completion tokens / verifies


def test_simulation_equals_live_random_draft(tiny_target, tmp_path):
    spec = read_draft(str(write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=20)))
    draft = load_draft_model(spec, tiny_target, flags_from_config(spec.config, spec.layout))
    states = tuple(map(State, TINY_BOUNDARIES))
    cases, secs = make_cases(tiny_target, tiny_prompts(3, seed=3), 20)
    sim = simulate(draft, cases, capture_cases(tiny_target, cases, states), states, 3)
    live = run_live(tiny_target, draft, cases, states, 3, 20, secs)
    assert live.lossless and live.stats.gains == sim.gains
    assert hooks_left(tiny_target.model) == 0


def test_simulation_equals_live_trained_canary(tiny_target, tiny_canary):
    spec = read_draft(str(tiny_canary))
    draft = load_draft_model(spec, tiny_target, flags_from_config(spec.config, spec.layout))
    states = tuple(map(State, TINY_BOUNDARIES))
    cases, secs = make_cases(tiny_target, tiny_prompts(20)[:4], 32)  # training prompts: the canary accepts
    sim = simulate(draft, cases, capture_cases(tiny_target, cases, states), states, 3)
    live = run_live(tiny_target, draft, cases, states, 3, 32, secs)
    assert sim.accept_length > 1.3  # drafts are accepted, so the comparison means something
    assert live.lossless and live.stats.gains == sim.gains
    assert live.stats.accept_length == sim.accept_length and live.stats.histogram == sim.histogram


def test_canary_config_records_wiring(tiny_canary):
    spec = read_draft(str(tiny_canary))
    cfg = spec.config
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [b - 1 for b in TINY_BOUNDARIES]
    assert cfg["eagle_audit_canary"]["trained_boundaries"] == list(TINY_BOUNDARIES)
    assert spec.vocab.d2t_in_t2d and spec.layout == "sglang" and spec.fc_in == 3 * spec.hidden_size
    assert any(n.startswith("midlayer.") for n in spec.weight_names)


# ---------------------------------------------------------------------------- batched generation


def _check_batched_equals_one_at_a_time(target, prompts, max_new):
    from eagle_audit.source.forwards import greedy_generate, greedy_generate_batch

    single = [greedy_generate(target, p, max_new, set()) for p in prompts]
    assert greedy_generate_batch(target, prompts, max_new, set()) == single
    # an EOS inside row 0's continuation: that row stops there (EOS kept), the others run on
    stop = max(single[0].index(t) for t in single[0])  # the latest first occurrence of a token in row 0
    eos = {single[0][stop]}
    single_eos = [greedy_generate(target, p, max_new, eos) for p in prompts]
    assert single_eos[0] == single[0][:stop + 1]
    assert greedy_generate_batch(target, prompts, max_new, eos) == single_eos
    cases, _ = make_cases(target, prompts, max_new, batch=3)
    assert [list(c.continuation) for c in cases] == [greedy_generate(target, p, max_new) for p in prompts]
    assert [list(c.prompt) for c in cases] == prompts


def test_batched_generation_equals_one_at_a_time(tiny_target):
    """Left padding (prompts of 4..11 tokens), one cache, position ids from each prompt's first token."""
    _check_batched_equals_one_at_a_time(tiny_target, tiny_prompts(8, seed=5), 16)


@pytest.mark.full  # seven architectures; the tiny Llama above covers the default tier
def test_batched_generation_other_architectures(tiny_targets, arch_key):
    import torch

    from eagle_audit.target import load_target

    target = load_target(str(tiny_targets[arch_key]))
    with torch.no_grad():  # peaked logits: greedy choices far from ties, as a trained model's mostly are
        for p in target.model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 256, (3 + 2 * i,), generator=g).tolist() for i in range(5)]
    _check_batched_equals_one_at_a_time(target, prompts, 10)
