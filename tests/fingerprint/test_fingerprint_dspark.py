"""fingerprint on a DSpark draft trained on a known wiring: the SmolLM2 DSpark canary of tests/accept/dspark_canary.py
(SpecForge 0.2.0's own DSpark training, ids [1, 14, 26] = B2, B15, B27; ``sample_from_anchor`` absent, so true).

Its objective trains the anchor's row for the first draft (the row both engines draft it from by default); its mask
rows are untrained. The block scorer scores the anchor's row (``DFlashArch.first_draft_row``): fed the trained wiring
the draft predicts the target's next token far better than fed nothing, and the search names no state the truth
misses. Scored on the mask rows instead (before), no wiring beat fed-nothing by much (measured on prompts 9-12, 32 new
tokens: top-1 0.043 trained vs 0.094 fed nothing; on the anchor's row 0.647 vs 0.101). A short corpus (2 training
prompts, 24 new tokens): the plumbing and the row, not the interval's resolution.
"""

from __future__ import annotations

import pytest

from eagle_audit.states import State
from tests.accept.dspark_canary import boundaries, train_dspark_canary

pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def dspark(smollm2, audit_cache, fp_threads):
    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.prompts import encode, load_prompts

    from tests import artefacts

    artefacts.ensure("dspark-canary")
    canary = train_dspark_canary(smollm2, audit_cache, log=lambda m: None)
    corpus = prepare_corpus(smollm2, encode(load_prompts(None)[8:10], smollm2.tokenizer), 24)
    return canary, corpus


def test_the_dspark_canary_is_scored_on_its_anchor_row_and_names_no_wrong_state(smollm2, dspark):
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.block import convention_for
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.fingerprint.score import scorer_for
    from eagle_audit.resolution import resolve_trained
    from eagle_audit.runtime.block import load_dflash_draft

    canary, corpus = dspark
    truth = boundaries("2-15-27")
    spec = read_draft(str(canary))
    draft = load_dflash_draft(spec, smollm2)
    assert spec.kind == "dspark" and draft.arch.first_draft_row == 0
    scorer = scorer_for(draft, corpus)
    idx = {s: i for i, s in enumerate(corpus.candidates)}
    trained, nothing = scorer.score(tuple(idx[State(b)] for b in truth)), scorer.baseline()
    assert trained.top1 > nothing.top1 + 0.3, (trained.top1, nothing.top1)
    declared, _ = resolve_trained(spec, smollm2.info, [])
    starts = starting_points(spec, smollm2.info, declared.wiring,
                             convention_for(get_convention("sglang", "engine"), spec.kind))
    inf = infer_wiring(smollm2, spec, corpus, starts, declared.flags)
    assert inf.top1 - inf.baseline_top1 >= 0.3, inf.reason
    for sl, b in zip(inf.slots, truth):
        assert sl.undetermined or State(b) in sl.candidates, (sl.index, sl.text())
    assert inf.verdict(declared.states)[0] is not False
