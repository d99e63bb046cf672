"""The confirmation's statistics (eagle_audit.fingerprint.confirm): the accept-length difference's cluster interval
covers the true difference at its level, and a finding from the weights stands only on a material gain whose
interval excludes 0. The confirmation end to end on a real canary: tests/fingerprint/test_fingerprint_cli.py."""

from __future__ import annotations

import random

from eagle_audit.fingerprint.confirm import MATERIAL_GAIN, Confirmation, Gain, WiringAccept, ratio_difference, stands


def _prompts(rng: random.Random, g: int, rate_a: float, rate_b: float):
    """Per prompt: tokens gained and verifies of two wirings on the same continuation. A verify gains 1 + accepted
    drafts (0..3); each prompt has its own ease (a shared offset), so the two wirings' verifies are correlated
    within a prompt, as on real text."""
    ta, va, tb, vb = [], [], [], []
    for _ in range(g):
        tokens = rng.randint(30, 120)
        ease = rng.uniform(-0.15, 0.15)
        for rate, t_out, v_out in ((rate_a, ta, va), (rate_b, tb, vb)):
            left, verifies = tokens, 0
            p = min(0.95, max(0.0, rate + ease))
            while left > 0:
                n = 1
                while n < 4 and rng.random() < p:
                    n += 1
                left -= min(n, left)
                verifies += 1
            t_out.append(tokens)
            v_out.append(verifies)
    return ta, va, tb, vb


def test_the_interval_covers_the_true_accept_length_difference():
    """300 trials of 8 prompts: the 99% interval covers the difference measured on 2,000 prompts of the same kind
    (the truth) at least 97% of the time, and is not trivially wide (it excludes 0 for a 0.35 vs 0.15 rate)."""
    rng = random.Random(0)
    big = _prompts(rng, 2000, 0.35, 0.30)
    truth = sum(big[0]) / sum(big[1]) - sum(big[2]) / sum(big[3])
    covered = 0
    for _ in range(300):
        iv = ratio_difference(*_prompts(rng, 8, 0.35, 0.30))
        covered += iv.low <= truth <= iv.high
    assert covered >= 0.97 * 300, covered
    far = ratio_difference(*_prompts(rng, 8, 0.35, 0.15))
    assert far.low > 0, far


def test_one_prompt_decides_nothing_and_the_same_wiring_differs_by_zero():
    iv = ratio_difference([50], [30], [50], [40])
    assert iv.mean > 0 and iv.low == float("-inf")
    same = ratio_difference([50, 60, 70], [30, 40, 35], [50, 60, 70], [30, 40, 35])
    assert same.mean == 0 and same.low == same.high == 0


def test_a_finding_stands_only_on_a_material_gain_whose_interval_excludes_zero():
    # issue 27's draft trained on [B2, B15, B27]: the fingerprint's [B2, B19, B28] scored 1.281 against 1.307
    assert not stands(Gain(1.281 - 1.307, -0.08, 0.03, ()))
    assert not stands(Gain(0.004, 0.001, 0.007, ()))  # real but immaterial (1,3,17 against 1,3,16: 1.338 - 1.334)
    assert not stands(Gain(0.05, -0.01, 0.11, ()))  # material but not shown
    assert stands(Gain(MATERIAL_GAIN + 0.03, 0.01, 0.09, ()))
    assert not stands(None)


def test_a_gain_says_tokens_per_verify_and_per_position():
    a = WiringAccept((), 1.5, (0.4, 0.08, 0.02), (60, 60), (40, 40))
    b = WiringAccept((), 1.2, (0.15, 0.04, 0.01), (60, 60), (50, 50))
    g = Gain.of(a, b)
    assert abs(g.mean - 0.3) < 1e-9 and all(abs(x - y) < 1e-9 for x, y in zip(g.per_position, (0.25, 0.04, 0.01)))
    assert "tokens per verify (per position +0.250, +0.040, +0.010)" in g.text()


def test_a_gain_that_does_not_stand_says_what_more_text_would_decide():
    def conf(gain):
        return Confirmation(8, 600, 3, {}, gain, None, stands(gain), 1.0)

    assert "not worth a fix" in conf(Gain(0.004, 0.001, 0.007, ())).needs()
    wide = conf(Gain(0.05, -0.01, 0.11, ())).needs()
    assert wide.startswith("about ") and "confirmation prompts" in wide, wide
    assert int(wide.split()[1]) > 8
    assert conf(Gain(0.05, 0.01, 0.09, ())).needs() == "" and "needs" in conf(Gain(0.05, 0.01, 0.09, ())).to_json()


def test_the_declared_state_joins_a_slot_that_excluded_it_where_accept_length_does_not_refute_it():
    """admit_declared: the specforge-5-12-21 case (tests/trainers): slot 1 named B23 or B22 or B21 against a
    declared B13, the measured wiring no better in accept length: B13 is admitted, the slot (4 states) undetermined;
    a slot that admits the declared state, or where measured and declared agree, is left as it is."""
    from eagle_audit.fingerprint.confirm import admit_declared
    from eagle_audit.fingerprint.result import Agreement, SlotInference
    from eagle_audit.fingerprint.verdict import Inference
    from eagle_audit.states import State

    B = State
    slots = (SlotInference(0, B(6), B(7), None, None, (B(6), B(7)), True),
             SlotInference(1, B(23), B(22), None, None, (B(23), B(22), B(21)), True),
             SlotInference(2, B(22), B(21), None, None, (B(22),), False))
    inf = Inference((B(6), B(23), B(22)), slots, "ambiguous", 0.2, -5.0, 0.08, -6.0, 500, 1.0,
                    Agreement((), (), ()), {}, "")
    gain = Gain(0.0, -0.03, 0.03, (0.0, 0.0, 0.0))
    out, said = admit_declared(inf, ("held", "held", "held"), (B(6), B(13), B(22)), (B(6), B(23), B(22)), gain)
    assert out.slots[0] == slots[0] and out.slots[2] == slots[2] and said[0] == said[2] == "held"
    s1 = out.slots[1]
    assert s1.undetermined and s1.admits(B(13)) and s1.accept_admitted == (B(13),) and "B13" in said[1]
    assert "B13 is not worse in simulated accept length" in s1.needs() and "B23 or B22 or B21" in s1.needs()
    assert s1.text() == "undetermined (4 states not separated or admitted in accept length, best B23)"
    # a two-state slot that excluded the declared state names three, and stays named
    two = (slots[0], SlotInference(1, B(23), B(22), None, None, (B(23), B(22)), True), slots[2])
    out, _ = admit_declared(Inference(inf.best, two, "ambiguous", 0.2, -5.0, 0.08, -6.0, 500, 1.0,
                                      Agreement((), (), ()), {}, ""), ("",) * 3, (B(6), B(13), B(22)), inf.best, gain)
    assert not out.slots[1].undetermined and out.slots[1].text() == "B23 or B22 or B13"
