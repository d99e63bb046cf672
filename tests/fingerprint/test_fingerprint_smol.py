"""The fingerprint against SmolLM2 canaries of known wirings: recovered exactly, or a slot marked ambiguous
between the true state and its neighbour; never a wrong state named with confidence."""

from __future__ import annotations

import json
import os

import pytest

from eagle_audit.states import State

from tests.fingerprint.fp_canaries import CANARIES

N = 30


def truth(name: str) -> tuple[State, ...]:
    bounds, final = CANARIES[name]
    return tuple(State(b, normed=final and b == N) for b in bounds)


def neighbours(s: State) -> set[State]:
    """The state itself and the states next to it on the residual stream (B_N and B_N+norm are neighbours)."""
    out = {s}
    if s.normed:
        out.add(State(N))
        return out
    out |= {State(b) for b in (s.boundary - 1, s.boundary + 1) if 0 <= b <= N}
    if s.boundary == N:
        out.add(State(N, normed=True))
    return out


@pytest.mark.parametrize("name", list(CANARIES))
def test_recovers_the_trained_wiring(name, fp_canaries, fingerprint_of):
    inf, declared = fingerprint_of(fp_canaries[name])
    want = truth(name)
    assert declared.states == want  # the canary record
    assert inf.confidence in ("high", "ambiguous"), inf.reason
    assert len(inf.slots) == len(want)
    for sl, t in zip(inf.slots, want):
        assert t in sl.candidates, (name, sl.index, sl.text(), t.label())
        if not sl.ambiguous:
            assert sl.best == t, (name, sl.index, sl.best.label(), t.label())
        assert set(sl.candidates) <= neighbours(t), (name, sl.index, sl.text())
    assert inf.top1 > inf.baseline_top1 + 0.3
    steps = inf.search["ttt_steps"]  # trained at step 0 only (fp_canaries.TTT): the later steps are not read
    assert steps["asked"] == 3 and steps["used"] == 1 and steps["per_step"][1]["top1"] < 0.2, steps


def test_config_ids_never_change_the_inferred_wiring(fp_canaries, fingerprint_of, tmp_path):
    """The same weights declared (SGLang nested ids, no canary record) as [B1, B8, B21]."""
    src = fp_canaries["2-15-27"]
    cfg = json.loads((src / "config.json").read_text())
    cfg.pop("eagle_audit_canary")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 7, 20]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    os.symlink(src / "model.safetensors", tmp_path / "model.safetensors")
    moved, declared = fingerprint_of(tmp_path)
    base, _ = fingerprint_of(src)
    assert declared.states == (State(1), State(8), State(21))
    assert moved.best == base.best
    assert [sl.candidates for sl in moved.slots] == [sl.candidates for sl in base.slots]


def test_compare_finds_the_declared_wiring_wrong_and_fixes_the_engine(fp_canaries, fingerprint_of, smollm2):
    """Weights trained on [B0, B3, B16], config claiming SGLang's default: TRAINED_WIRING_DIFFERS with both
    wirings, the engine findings and fix computed from the measured wiring."""
    from dataclasses import replace

    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.claims import compare
    from eagle_audit.resolution import given_side, side_of

    inf, _ = fingerprint_of(fp_canaries["emb-3-16"])
    spec = read_draft(str(fp_canaries["emb-3-16"]))
    claimed = side_of(get_convention("specforge", "trainer"), {}, "LlamaForCausalLM", N)  # the default [2, 15, 27]
    served = side_of(get_convention("sglang", "engine"), {}, "LlamaForCausalLM", N)
    claims, findings, fix = compare(inf, spec, smollm2.info, claimed, None, served)
    codes = [f.code for f in findings]
    assert "TRAINED_WIRING_DIFFERS" in codes
    differs = findings[codes.index("TRAINED_WIRING_DIFFERS")]
    # slot 1 is B3, or B3 with its neighbour B4 where the two are equivalent to the draft (search.equivalent: on
    # this text B4 is +0.0065 [+0.0026, +0.0103] mean log-prob below B3, top-1 within [-0.005, +0.010])
    assert "B2, B15, B27" in differs.what and ("[B0, B3, " in differs.what or "[B0, B3 or B4, " in differs.what)
    assert "EMBEDDING_COMPOSITION" in codes
    assert fix is not None and fix.possible and fix.resolved == inf.best
    assert claims[0].agrees is False
    same = given_side(replace(claimed.wiring, states=inf.best), spec, None)
    _, findings_same, _ = compare(inf, spec, smollm2.info, same, None, served)
    assert "TRAINED_WIRING_DIFFERS" not in [f.code for f in findings_same]
    # the confirmation's verdict (fingerprint.confirm): standing, TRAINED_WIRING_DIFFERS says what the fix gains; not
    # standing, the declared wiring is the trained side: nothing from the weights, and SGLang feeds what is declared
    claims, findings, fix = compare(inf, spec, smollm2.info, claimed, None, served, (True, "Confirmed: +0.5."))
    assert findings[[f.code for f in findings].index("TRAINED_WIRING_DIFFERS")].what.endswith(" Confirmed: +0.5.")
    assert fix is not None and fix.resolved == inf.best
    claims, findings, fix = compare(inf, spec, smollm2.info, claimed, None, served, (False, "agrees within 0.004"))
    assert [f for f in findings if f.severity == "error"] == [] and fix is None
    assert claims[0].agrees is True and claims[0].note.endswith("agrees within 0.004")


@pytest.fixture(scope="module")
def random_draft(fp_corpus, tmp_path_factory):
    """A random-weights SmolLM2 draft (3 slots, hidden 576) whose vocabulary is the corpus's 2048 most frequent
    next tokens: every position is scored, so only the weights can fail."""
    import torch

    from eagle_audit.draft.write import draft_config, random_weights, write_draft

    labels = fp_corpus.labels[fp_corpus.valid]
    ids, counts = labels.unique(return_counts=True)
    used = ids[counts.argsort(descending=True)][:2048]
    cfg = draft_config(hidden_size=576, target_hidden_size=576, num_aux=3, vocab_size=49152,
                       draft_vocab_size=int(used.numel()), num_heads=9, num_kv_heads=3, intermediate_size=1536,
                       nested_ids=[1, 14, 26], rope_theta=100000.0)
    out = tmp_path_factory.mktemp("random-draft")
    return write_draft(out, cfg, random_weights(cfg, 3, seed=3, vocab_ids=torch.sort(used).values))


def test_random_draft_is_a_representation_mismatch(fingerprint_of, random_draft):
    inf, _ = fingerprint_of(random_draft)
    assert inf.coverage > 0.99
    assert inf.confidence == "none" and inf.states is None
    assert inf.top1 < 0.2


def test_canary_on_another_target_of_the_same_shape_is_a_representation_mismatch(fp_canaries, fingerprint_of,
                                                                                    other_target):
    target, corpus = other_target
    inf, _ = fingerprint_of(fp_canaries["2-15-27"], target, corpus)
    assert inf.confidence == "none" and inf.states is None, (inf.top1, inf.baseline_top1, inf.coverage)
    assert inf.reason


def test_canary_on_a_rotated_target_is_a_representation_mismatch(fp_canaries, fingerprint_of, rotated_target,
                                                                 smollm2):
    """The same function (the same text, the same next tokens), another residual stream: no wiring fits."""
    target, corpus = rotated_target
    x = corpus.next_ids[:1, :20]
    import torch

    with torch.inference_mode():
        a = smollm2.model(input_ids=x).logits.argmax(-1)
        b = target.model(input_ids=x).logits.argmax(-1)
    assert (a == b).float().mean() > 0.9  # the rotation keeps the function
    inf, _ = fingerprint_of(fp_canaries["2-15-27"], target, corpus)
    assert inf.coverage > 0.5 and inf.top1 is not None  # scored, unlike another target's text
    assert inf.confidence == "none" and inf.states is None, (inf.top1, inf.baseline_top1)
