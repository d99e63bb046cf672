"""The fingerprint on drafts the real trainers trained (issue 18, part 2): SpecForge 0.2.0 and speculators 0.9.0,
each on its default wiring and an explicit one (tests/trainers/real_fixtures.py builds them once into the test
cache), fingerprinted on held-out prompts of the same kind (the target's own continuations).

Whatever these small CPU drafts' quality, the fingerprint must never say something false: no slot named by a
state set that misses the truth, no ``TRAINED_WIRING_DIFFERS``, no fix (ambiguous and undetermined are allowed,
and ``REPRESENTATION_MISMATCH`` only where the draft, fed the true wiring, is as poor as that finding says). And
its 99% interval, on disjoint groups of the held-out prompts, covers the margin measured on all of them (truth
against each state one or two layers away) at least as often as a 99% interval should, allowing for the count.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainers import real_fixtures

pytestmark = pytest.mark.full


@pytest.fixture(scope="session")
def trainer_fixtures(smollm2, smollm2_path, audit_cache):
    from eagle_audit.target import materialise

    from tests import artefacts

    for name in real_fixtures.FIXTURES:
        artefacts.ensure(f"trainer-fixture-{name}")
    torch.set_num_threads(1)
    return real_fixtures.build(smollm2, str(materialise(smollm2_path)), audit_cache)


@pytest.fixture(scope="session")
def held_out(smollm2):
    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.prompts import encode

    return prepare_corpus(smollm2, encode(real_fixtures.eval_prompts(), smollm2.tokenizer), real_fixtures.EVAL_MAX_NEW)


def _setup(smollm2, path):
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import starting_points
    from eagle_audit.resolution import resolve_trained, side_of
    from eagle_audit.states import State

    info = real_fixtures.load(path)
    spec = read_draft(str(path / "draft"))
    declared, trainer = resolve_trained(spec, smollm2.info, [])
    served = side_of(get_convention(info["engine"], "engine"), spec.config, smollm2.info.architecture,
                     smollm2.info.num_layers)
    truth = tuple(State(int(x.removeprefix("B"))) for x in info["truth"])
    return info, spec, declared, trainer, served, truth, starting_points(spec, smollm2.info, declared.wiring,
                                                                          get_convention(info["engine"], "engine"))


def _fingerprint(smollm2, target, path):
    """The fingerprint as a user runs it (:func:`~eagle_audit.fingerprint.run.run_fingerprint`: the search on the
    held-out prompts, then the confirmation on 8 others), its inputs given as token ids."""
    from eagle_audit.fingerprint.options import FingerprintOptions
    from eagle_audit.fingerprint.run import run_fingerprint
    from eagle_audit.prompts import encode

    tok = smollm2.tokenizer
    ids = lambda prompts: tuple(tuple(p) for p in encode(prompts, tok))  # noqa: E731
    opts = FingerprintOptions(target=target, draft=str(path / "draft"), engine=real_fixtures.load(path)["engine"],
                              max_new_tokens=real_fixtures.EVAL_MAX_NEW, prompt_ids=ids(real_fixtures.eval_prompts()),
                              confirm_prompt_ids=ids(real_fixtures.confirm_prompts()), use_installed_engine=False)
    return run_fingerprint(opts, source=smollm2)


# specforge-5-12-21 was a false REPRESENTATION_MISMATCH while the rule judged the log-prob pick's top-1 alone
# ([B13, B22, B24]: 0.191 < 0.2, the true [B6, B13, B22]: 0.211, fed nothing 0.043, on 517 tokens); now any scored
# wiring that clears both thresholds refutes "no wiring makes the draft agree". On the fixture as built since
# 2026-12-01 the search alone names its slot 1 "B23 or B22 or B21" (truth B13; the best [B13, B23, B27] beats the
# truth by 0.107 mean log-prob with top-1 no better): what stands is what the confirmation leaves (issue 27), and
# that is what a user is told, so that is what is judged here
#: slots the fingerprint decides per fixture, as run (both lines, bench/evidence/two_lines.py, docs/fingerprint.md
#: "Both lines on every draft of known wiring"): the fewer of the two builds measured (one thread: 14 of 18; every
#: core, as CI builds them: 12 of 18; the function alone named 1 and 2 slots on them, one of those wrong on the second
#: build, "B16 or B22" for B1, which the weights' disagreement made undetermined). A floor; never a wrong state.
#: CI's pre-build (tests/artefacts.py) builds each fixture on one thread: on that build (2026-12-05, two CI runs
#: and this machine alike) speculators-default-e12's slot 2 is named B27 (true) by fc's weights alone but is
#: "unused" on the held-out text (no state separated from the best), so 2 of its 3 slots are decided, not 3.
DECIDED = {"specforge-default": 3, "specforge-5-12-21": 1, "speculators-default": 3, "speculators-4-11-24": 1,
           "specforge-0-2-15-e12": 1, "speculators-default-e12": 2}


@pytest.mark.parametrize("name", real_fixtures.FIXTURES)
def test_fingerprint_says_nothing_false(name, trainer_fixtures, held_out, smollm2, smollm2_path):
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.fingerprint.infer import MIN_GAIN, MIN_TOP1
    from eagle_audit.fingerprint.score import Scorer

    info, spec, declared, trainer, served, truth, starts = _setup(smollm2, trainer_fixtures[name])
    # the trainer's own config says what it trained on, and eagle-audit reads it so (the truth is known)
    assert declared.states == truth, (name, [s.label() for s in declared.states], info["truth"])
    res = _fingerprint(smollm2, smollm2_path, trainer_fixtures[name])
    codes = {f.code for f in res.findings}
    for sl, t in zip(res.slots, truth):
        assert sl.admits(t), (name, sl.text(), t.label())  # never a wrong named state
    decided = sum(not (sl.undetermined or sl.unused or sl.uninformed) and (res.inferred is not None or sl in res.weights_alone)
                  for sl in res.slots)  # what a user is told (REPRESENTATION_MISMATCH: fc's weights alone)
    assert decided >= DECIDED[name], (name, [sl.text() for sl in res.slots])
    assert "TRAINED_WIRING_DIFFERS" not in codes, (name, [s.text() for s in res.slots])
    assert res.fix is None or not res.fix.possible, (name, res.fix)
    assert next(c for c in res.claims if c.source == "declared").agrees is not False
    if "REPRESENTATION_MISMATCH" in codes:  # only as true as the finding's own rule, applied to the truth
        scorer = Scorer(load_draft_model(spec, smollm2, declared.flags), held_out)
        idx = {s: j for j, s in enumerate(held_out.candidates)}
        top, base = scorer.score(tuple(idx[s] for s in truth)), scorer.baseline()
        assert top.top1 < MIN_TOP1 or top.top1 - base.top1 < MIN_GAIN, (name, top.top1, base.top1)
    errors = {f.code for f in res.findings if f.severity == "error"} - {"REPRESENTATION_MISMATCH"}
    assert not errors, (name, errors)


def test_interval_coverage_on_known_truth(trainer_fixtures, held_out, smollm2):
    """Per fixture, slot and neighbour (+-1, +-2 boundaries): the truth's margin on each group of
    :data:`GROUP` held-out prompts, its 99% interval against the margin on all of them."""
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.fingerprint.score import Scorer
    from eagle_audit.fingerprint.intervals import paired_interval, units_of
    from eagle_audit.states import State

    group = 4
    covered = total = 0
    misses = []
    for name, path in trainer_fixtures.items():
        info, spec, declared, _, _, truth, _ = _setup(smollm2, path)
        scorer = Scorer(load_draft_model(spec, smollm2, declared.flags), held_out)
        idx = {s: j for j, s in enumerate(held_out.candidates)}
        tw = tuple(idx[s] for s in truth)
        top = scorer.score(tw)
        seq = scorer.mask.nonzero()[:, 0].cpu()
        B = held_out.next_ids.shape[0]
        groups = [torch.arange(g0, g0 + group) for g0 in range(0, B - group + 1, group)]
        for i, s in enumerate(truth):
            for off in (-2, -1, 1, 2):
                if not 0 <= s.boundary + off <= smollm2.info.num_layers:
                    continue
                d = (top.logprob - scorer.score(tw[:i] + (idx[State(s.boundary + off)],) + tw[i + 1:]).logprob).double()
                pooled = float(d.mean())
                for g in groups:
                    sel = torch.isin(seq, g)
                    iv = paired_interval(d[sel], torch.zeros_like(d[sel]), units_of(seq[sel]))
                    ok = iv.low <= pooled <= iv.high
                    covered += ok
                    total += 1
                    if not ok:
                        misses.append((name, i, off, round(pooled, 4), round(iv.low, 4), round(iv.high, 4)))
    assert total >= 64
    # a 99% interval misses about 1 in 100; more than 4 misses in 64-100 would be p < 0.01 for an honest one
    assert total - covered <= max(4, total // 25), (covered, total, misses)
