"""fingerprint on a DFlash draft trained on a known wiring: the SmolLM2 canary of tests/fingerprint/dflash_canary.py
(SpecForge 0.2.0's own DFlash training forward and loss, ids [1, 14, 26] = B2, B15, B27), read back through
eagle-audit's DFlash forward (test_dflash_forward.py proves it equal to the wheels').

Acceptance (issue 17): every slot exact or not separated from a neighbour of the truth, never a confident state
that misses it; the declared wiring agrees. The corpus is the canaries' own (fp_corpus: the 8 prompts trained
on, 96 new tokens), as for the EAGLE-3 canaries.
"""

from __future__ import annotations

import json

import pytest

from tests.fingerprint.dflash_canary import CANARIES, boundaries, train_dflash_canary

from eagle_audit.states import State

pytestmark = pytest.mark.full

#: slots the fingerprint determines, as measured (docs/fingerprint.md): on the three-slot canary the draft does not
#: use its shallow slot (B2's best state does not beat the same state taken from earlier positions) and 20 states
#: carry what it takes from its middle one: both undetermined, the deep slot B27 or B26. The goal (every slot
#: determined) is not reached there. The one-slot canary's slot was named "B20 or B21 or B22" on the build first
#: measured (runner-up interval low +0.007); on the build this code and 88a6cbf's make alike on transformers 5.24 /
#: torch 2.13 (two builds byte-identical) its runner-up B19 sits at +0.079 [-0.0005, +0.158]: four states not
#: separated, undetermined, best B20. A floor on a margin that thin does not hold from one environment's build to
#: the next, so its floor is the figure every build reached: none (the truth is still never excluded, below).
DETERMINED = {"2-15-27": 1, "one-20": 0}
#: how far a named state may lie from the truth (measured: 2, B22 for B20; never a state of another region)
NEAR = 2


@pytest.fixture(scope="module")
def dflash_canary(smollm2, audit_cache, fp_threads):
    from tests import artefacts

    for name in CANARIES:
        artefacts.ensure(f"dflash-canary-{name}")
    return {name: train_dflash_canary(smollm2, audit_cache, name, log=lambda m: None) for name in CANARIES}


@pytest.fixture(scope="module")
def inferred(smollm2, fp_corpus, dflash_canary):
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.block import convention_for
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.resolution import resolve_trained

    memo = {}

    def run(name):
        if name not in memo:
            spec = read_draft(str(dflash_canary[name]))
            declared, _ = resolve_trained(spec, smollm2.info, [])
            engine = convention_for(get_convention("sglang", "engine"), spec.kind)
            starts = starting_points(spec, smollm2.info, declared.wiring, engine)
            memo[name] = spec, declared, infer_wiring(smollm2, spec, fp_corpus, starts, declared.flags)
        return memo[name]

    return run


@pytest.mark.parametrize("name", list(CANARIES))
def test_every_slot_is_the_trained_state_a_neighbour_or_undetermined(inferred, name):
    """Never a confident state that misses the truth; every determined slot names the truth, alone or with states
    at most ``NEAR`` boundaries from it; the declared wiring agrees; at least the measured number of slots is
    determined."""
    from eagle_audit.states import State

    spec, declared, inf = inferred(name)
    truth = boundaries(name)
    assert spec.kind == "dflash" and [s.boundary for s in declared.states] == list(truth)
    assert inf.confidence in ("high", "ambiguous"), inf.reason
    assert inf.top1 - inf.baseline_top1 >= 0.1
    for sl, b in zip(inf.slots, truth):
        if sl.undetermined:
            continue
        assert State(b) in sl.candidates, (sl.index, sl.text())
        assert all(abs(c.boundary - b) <= NEAR and not c.normed for c in sl.candidates), (sl.index, sl.text())
    assert sum(not sl.undetermined for sl in inf.slots) >= DETERMINED[name], [sl.text() for sl in inf.slots]
    assert inf.verdict(declared.states)[0] is True


def test_the_cli_fingerprints_a_dflash_draft(cli, smollm2_path, dflash_canary):
    """Through the command line (few tokens: the plumbing, not the answer): the block draft is run, not refused."""
    res = cli("-t", smollm2_path, "-d", str(dflash_canary["2-15-27"]), "--max-prompts", "2", "--max-new-tokens", "8",
              "--json", "-", command="fingerprint")
    assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
    data = json.loads(res.stdout)
    assert data["draft"]["kind"] == "dflash" and len(data["inferred"]["slots"]) == 3
    assert data["served"]["convention"] == "sglang-dflash"


def test_accept_rate_simulates_the_dflash_canary_s_blocks(smollm2, dflash_canary):
    """accept-rate on a DFlash draft (issue 34): one block a round, B - 1 = 3 drafts a verify (block_size 4), on
    the canary's own training prompts. Fed its trained wiring it accepts more than fed states 3-8 layers away
    (each slot moved), the single-slot fixes are reported as for EAGLE-3, and the figures are per position."""
    from eagle_audit.accept.run import AcceptOptions, run_accept
    from eagle_audit.prompts import encode, load_prompts

    ids = tuple(map(tuple, encode(load_prompts(None)[8:12], smollm2.tokenizer)))
    base = dict(target=str(smollm2.info.name), draft=str(dflash_canary["2-15-27"]), prompt_ids=ids,
                max_new_tokens=48, use_installed_engine=False)
    right = run_accept(AcceptOptions(**base), source=smollm2)
    assert right.settings.mode == "block" and right.settings.num_steps == 3 and right.settings.num_draft_tokens == 4
    assert [s.label() for s in right.trained.states] == [s.label() for s in right.served.states] == ["B2", "B15", "B27"]
    tr = right.stats["trained"]
    # the canary's floor in accept length (docs/fingerprint.md: 3.58 and 3.66 on two builds; 1.0 = nothing accepted)
    assert tr.accept_length > 3.0 and len(tr.per_position) == 3 and tr.verify_steps == sum(tr.histogram)
    assert right.verdict == "match"
    wrong = run_accept(AcceptOptions(**base, trained_boundaries=(State(5), State(20), State(24))), source=smollm2)
    assert wrong.stats["trained"].accept_length < tr.accept_length - 0.5  # fed states it never saw (2.30 vs 3.58)
    assert wrong.stats["served"].accept_length == pytest.approx(tr.accept_length)  # the engine still feeds the truth
    assert len(wrong.attribution) == 3


def test_the_confirmation_judges_a_dflash_draft_in_simulated_accept_length(smollm2, smollm2_path, dflash_canary):
    """The fingerprint's confirmation runs on a block draft (issue 34): the pick re-judged with the block scorer, the
    accept length of the declared, measured and served wirings simulated as the engines draft a DFlash block (its
    B - 1 = 3 drafts a round, not CONFIRM_STEPS). The canary's trained wiring drafts on its own training text
    (bench/results/dflash_accept_cpu.json: 3.58 on prompts 9-12), so the declared wiring's accept length is above 1
    and at least the served one's where they differ; no finding names a state the truth misses."""
    from eagle_audit.fingerprint.options import FingerprintOptions
    from eagle_audit.fingerprint.run import run_fingerprint
    from eagle_audit.prompts import encode, load_prompts

    ids = lambda sl: tuple(map(tuple, encode(load_prompts(None)[sl], smollm2.tokenizer)))  # noqa: E731
    opts = FingerprintOptions(target=smollm2_path, draft=str(dflash_canary["2-15-27"]), prompt_ids=ids(slice(8, 10)),
                              confirm_prompt_ids=ids(slice(12, 14)), max_new_tokens=32, use_installed_engine=False)
    res = run_fingerprint(opts, source=smollm2)
    c = res.confirmation
    assert c is not None and c.steps == 3, res.provenance
    declared = c.wirings["declared"]
    assert [s.boundary for s in declared.states] == list(boundaries("2-15-27"))
    assert declared.accept_length > 1.5, declared
    if "served" in c.wirings and c.wirings["served"].states != declared.states:
        assert c.wirings["served"].accept_length <= declared.accept_length + 0.05
    assert not any("no confirmation" in n for n in res.provenance.get("notes", ()))
    for sl, b in zip(res.slots, boundaries("2-15-27")):
        assert sl.admits(State(b)), sl.text()
