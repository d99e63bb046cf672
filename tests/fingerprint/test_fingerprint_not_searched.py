"""A slot named next to a state its source does not give (a server: no B0 on SGLang's +1 rule, no BN / BN+norm):
the state not searched is named with it ("B1 or B0 (not searched)"), the slot is never exact, and the claims and
the fix treat it as admitted (``eagle_audit.fingerprint.corpus.unsearched_neighbours``). The SmolLM2 canaries
fingerprinted over the states the SGLang reference server captures (B1..B29) are the real case: the canary
trained on [B8, B30+norm] came out as the exact answer [B8, B1] (full tier: the SmolLM2 canaries)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eagle_audit.fingerprint.result import Agreement, SlotInference
from eagle_audit.fingerprint.verdict import Inference
from eagle_audit.fingerprint.claims import settled
from eagle_audit.fingerprint.intervals import Interval
from eagle_audit.states import State, all_states

from tests.fingerprint.fp_canaries import CANARIES

N = 30
SERVED = tuple(State(k) for k in range(1, N))  # what a reference SGLang server on Llama captures: B1..B(N-1)


def test_adjacent_is_one_boundary_or_the_final_norm_and_runs_through_states_not_searched():
    from eagle_audit.fingerprint.corpus import unsearched_neighbours

    near = lambda *named, last=False: [s.label() for s in unsearched_neighbours(  # noqa: E731
        [State(k) for k in named], SERVED, N, last=last)]
    assert near(1) == near(2, 1) == ["B0"]
    assert near(2) == near(15) == [] and near(29) == ["B30", "B30+norm"]  # B30+norm: no searched state nearer
    assert near(15, last=True) == ["B30+norm"]  # the last slot: no boundary stands in for the post-norm state
    assert near(29, last=True) == ["B30", "B30+norm"]
    gap = tuple(s for s in all_states(N) if s != State(10))
    assert [s.label() for s in unsearched_neighbours([State(9)], gap, N)] == ["B10"]
    assert unsearched_neighbours([State(11)], gap, N) == (State(10),)
    assert unsearched_neighbours([State(1), State(30, True)], all_states(N), N, last=True) == ()  # all searched


def _slot(cands, index=0, unsearched=()):
    iv = Interval(0.3, 0.1, 0.5)
    return SlotInference(index, cands[0], State(cands[0].boundary + 1), iv, iv, tuple(cands),
                         len(cands) > 1 or bool(unsearched), False, scored_tokens=900, unsearched=tuple(unsearched))


def test_a_slot_beside_a_state_not_searched_names_it_and_is_not_exact():
    s = _slot([State(1)], unsearched=[State(0)])
    assert s.text() == "B1 or B0 (not searched)" and s.guarded() == ["B1", "B0"] and s.ambiguous
    assert s.admits(State(0)) and s.admits(State(1)) and not s.admits(State(2))
    j = s.to_json()
    assert j["unsearched"] == ["B0"] and j["state"] == ["B1", "B0"] and j["candidates"] == ["B1"] and j["ambiguous"]
    assert s.needs().startswith("separated from every searched state on 900") and "not told from B0" in s.needs()
    two = _slot([State(1), State(2)], unsearched=[State(0)])
    assert two.text() == "B1 or B2 or B0 (not searched)" and "not told from B0" in two.needs()
    assert _slot([State(15)]).to_json()["unsearched"] == []


def test_claims_and_the_fix_take_the_state_not_searched_as_admitted():
    slots = (_slot([State(8)], 0), _slot([State(1)], 1, [State(0), State(30, True)]))
    inf = Inference((State(8), State(1)), slots, "ambiguous", 0.5, -3.0, 0.1, -6.0, 900, 1.0,
                    Agreement(SERVED, (), ()), {}, "", {})
    agrees, note = inf.verdict((State(8), State(30, True)))  # the truth of the canary: never "differs"
    assert agrees is None and "slot 1 B30+norm (admitted beside B1 or B0 (not searched)" in note
    assert settled(inf, (State(8), State(30, True))) == (State(8), State(30, True))  # the declared, admitted
    # a declared state excluded: the engine's where it is a state not searched the slot admits (no fix moves the
    # engine off a state nobody measured), else the best
    assert settled(inf, (State(8), State(5)), (State(8), State(0))) == (State(8), State(0))
    assert settled(inf, (State(8), State(5)), (State(8), State(2))) == (State(8), State(1))


@pytest.fixture(scope="module")
def served_corpus(fp_corpus, smollm2):
    """The canaries' corpus less the states the SGLang 0.5.23 reference launch does not capture."""
    from eagle_audit.engines.sglang.launch import sglang_reference
    from eagle_audit.engines.launch import TargetShape

    info = smollm2.info
    got = set(sglang_reference(TargetShape(info.name, info.architecture, info.num_layers, info.hidden_size)).capture.states)
    assert got == set(SERVED)
    keep = [j for j, s in enumerate(fp_corpus.candidates) if s in got]
    return replace(fp_corpus, candidates=tuple(fp_corpus.candidates[j] for j in keep),
                   states=[fp_corpus.states[j] for j in keep])


@pytest.mark.parametrize("name", list(CANARIES))
def test_through_a_server_no_canary_slot_is_named_wrong(name, fp_canaries, fingerprint_of, served_corpus, smollm2):
    """Every slot admits its true state (searched or not) or names none; the truth is never "differs", and the
    findings and fix are those of the search of every state. Measured (8 prompts x 96 tokens): [B8, B30+norm]
    read [B8, B1] before the guard, B1 exact (separated from every searched state, +0.316 against B2; the search
    of every state names B30+norm, runner-up B0), and the fix told to permute fc for training on ['B8', 'B1']."""
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.claims import compare
    from eagle_audit.resolution import resolve_trained, side_of

    draft = fp_canaries[name]
    spec = read_draft(str(draft))
    declared, _ = resolve_trained(spec, smollm2.info, [])
    served = side_of(get_convention("sglang", "engine"), spec.config, smollm2.info.architecture, N)
    inf, _ = fingerprint_of(draft, corpus=served_corpus)
    local, _ = fingerprint_of(draft)
    bounds, final = CANARIES[name]
    truth = tuple(State(b, normed=final and b == N) for b in bounds)
    assert inf.confidence != "none", inf.reason
    for sl, t in zip(inf.slots, truth):
        assert sl.admits(t), (name, sl.index, sl.text(), t.label())
        if t not in SERVED and not sl.undetermined:
            assert t in sl.unsearched and sl.ambiguous and f"{t.label()} (not searched)" in sl.text()
    assert inf.verdict(truth)[0] is not False
    claims, findings, fix = compare(inf, spec, smollm2.info, declared, None, served)
    _, local_findings, local_fix = compare(local, spec, smollm2.info, declared, None, served)
    assert "TRAINED_WIRING_DIFFERS" not in [f.code for f in findings]
    assert [(f.code, f.slot) for f in findings] == [(f.code, f.slot) for f in local_findings]
    assert (fix is None) == (local_fix is None)
    assert fix is None or (fix.resolved, fix.explanation) == (local_fix.resolved, local_fix.explanation)
