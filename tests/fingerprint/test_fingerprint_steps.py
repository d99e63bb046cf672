"""Later training-time-test steps as fingerprint evidence: the scorer's step-k entries are the unrolled forward
the trainers train (``rollout`` with the text as teacher tokens, itself equal to SpecForge 0.2.0's and speculators
0.9.0's own loops: tests/trainers/test_trainer_draft_forward.py), scored on the target's token k positions on;
step 0 is unchanged; every step of a text falls in that text's interval unit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from eagle_audit.runtime.rollout import rollout
from eagle_audit.runtime.eagle3 import arch_from_spec, build_draft, read_weights
from eagle_audit.draft.read import read_draft
from eagle_audit.fingerprint.score import Corpus, Scorer
from eagle_audit.resolution import DraftFlags
from eagle_audit.states import State

pytestmark = pytest.mark.usefixtures("one_thread")

H, V, STEPS = 32, 512, 3


@pytest.fixture
def setup(make_draft):
    d = make_draft()
    spec = read_draft(str(d))
    torch.manual_seed(0)
    embed = torch.randn(V, H)
    draft = build_draft(arch_from_spec(spec, H, V), DraftFlags(), read_weights(d), embed, None, str(d)).eval()
    B, T = 3, 10
    cands = tuple(State(k) for k in range(5))
    lens = [10, 7, 4]  # positions per case (the rest is padding)
    valid = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lens):
        valid[b, :n] = True
    states = [torch.randn(B, T, H) for _ in cands]
    next_ids = torch.randint(0, V, (B, T)) * valid
    labels = draft.hot_ids[torch.randint(0, draft.hot_ids.numel(), (B, T))]
    labels[0, 3] = int(torch.tensor([i for i in range(V) if i not in set(draft.hot_ids.tolist())][0]))  # off-vocab
    return draft, Corpus(cands, states, next_ids, labels * valid, valid, sum(lens) + B), lens


def test_step_k_is_the_unrolled_forward_scored_k_tokens_on(setup):
    draft, corpus, lens = setup
    w = (1, 3, 4)
    one, many = Scorer(draft, corpus), Scorer(draft, corpus, steps=STEPS)
    s1, s3 = one.score(w), many.score(w)
    assert torch.equal(s3.step.unique(), torch.arange(STEPS))
    torch.testing.assert_close(s3.logprob[s3.step == 0], s1.logprob, atol=1e-5, rtol=0)
    assert s3.top1 == s1.top1  # the thresholds read step 0
    # the exact path: fc on the concatenated states, the rollout with the text as teacher tokens
    aux = torch.cat([corpus.states[j] for j in w], -1)
    B, T = corpus.next_ids.shape
    teacher = torch.cat([corpus.next_ids, torch.zeros(B, STEPS - 1, dtype=torch.long)], 1)
    with torch.no_grad():
        ro = rollout(draft, corpus.next_ids, aux, STEPS, teacher=teacher, keep_logits=True)
    t2d = {int(t): i for i, t in enumerate(draft.hot_ids)}
    for k in range(STEPS):
        want = []
        for b, n in enumerate(lens):
            for t in range(n - k):  # step k at t predicts the target's token after x[t+1+k]
                lab = int(corpus.labels[b, t + k])
                if lab in t2d:
                    want.append(F.log_softmax(ro.logits[k][b, t].float(), -1)[t2d[lab]])
        torch.testing.assert_close(s3.logprob[s3.step == k], torch.stack(want), atol=1e-4, rtol=0)


def test_every_step_of_a_text_is_in_its_unit(setup):
    draft, corpus, _ = setup
    many = Scorer(draft, corpus, steps=STEPS)
    assert many.units.numel() == many.score((0, 1, 2)).logprob.numel()
    assert many.scored == Scorer(draft, corpus).scored  # how sure is said in text positions
    # 3 texts (< 4 units): cut into pieces of positions, so step 2 of position t shares t+2's piece
    assert int(many.units.max()) + 1 >= 4
