"""Tree drafts (topk > 1): topk 1 through the tree code equals the chain, a brute-force tree per root
(each node run with its own path: exact-ancestor attention) agrees exactly with the ``exact_ancestor``
mode, and a trained draft gains from branching. SGLang's own code is checked in test_accept_tree_sglang.py."""

from __future__ import annotations

import pytest
import torch

from eagle_audit.accept.run import make_settings, with_tree_attention
from eagle_audit.conventions import get_convention
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, draft_chains, make_cases, simulate, tree_gains, walk
from eagle_audit.simulate.targetrun import aux_of
from eagle_audit.simulate.tree import EXACT_ANCESTOR, KV_BY_SLOT, draft_trees, max_tree_nodes, tree_accepts
from eagle_audit.draft.read import read_draft
from eagle_audit.errors import AuditError
from eagle_audit.states import State

from tests.accept.accept_tiny import TINY_BOUNDARIES, tiny_prompts, write_tiny_draft

STATES = tuple(map(State, TINY_BOUNDARIES))


def _draft(target, path):
    spec = read_draft(str(path))
    return load_draft_model(spec, target, flags_from_config(spec.config, spec.layout))


@pytest.fixture(scope="module")
def random_draft(tiny_target, tmp_path_factory):
    return _draft(tiny_target, write_tiny_draft(tmp_path_factory.mktemp("tree") / "d", nested_ids=[0, 2, 4], scale=20))


@pytest.fixture(scope="module")
def canary_draft(tiny_target, tiny_canary):
    return _draft(tiny_target, tiny_canary)


@pytest.fixture(scope="module")
def canary_cases(tiny_target):
    cases, _ = make_cases(tiny_target, tiny_prompts(20)[:4], 32)  # training prompts: the canary accepts
    return cases, capture_cases(tiny_target, cases, STATES)


@pytest.mark.parametrize("steps", [1, 3, 4])
def test_topk1_tree_equals_chain(tiny_target, random_draft, canary_draft, canary_cases, steps):
    cases, caps = canary_cases
    for draft in (random_draft, canary_draft):
        for case, cap in zip(cases, caps):
            chain = walk(case.ids, len(case.prompt), draft_chains(draft, case.ids, cap, STATES, steps))
            assert tree_gains(draft, case.ids, len(case.prompt), cap, STATES, steps, 1, steps + 1) == chain


@torch.inference_mode()
def _brute_accepted(draft, ids, cap, a, steps, topk, ndt):
    """Drafts accepted at root a (x[a] the last verified token), the tree built node by node."""
    aux = aux_of(cap, STATES)[None, :a]  # target states at 0..a-1
    o = draft(torch.tensor([ids[1:a + 1]]), aux, torch.arange(a))  # draft-extend: position t reads x[t+1]
    prefix, h_root = o.kv, o.hidden[:, -1:]

    def children(node):  # run the node's path alone from the root; its topk children (prob, target id)
        logits, h, past = o.logits[0, -1], h_root, list(prefix)
        for j, tok in enumerate(node["path"] if node else []):
            r = draft(torch.tensor([[tok]]), h, torch.tensor([a + j]), past)
            past = [(torch.cat([p[0], n[0]], 2), torch.cat([p[1], n[1]], 2)) for p, n in zip(past, r.kv)]
            logits, h = r.logits[0, -1], r.hidden
        p, i = torch.softmax(logits.float(), -1).topk(topk)
        return [(float(pp), int(draft.to_target_ids(ii))) for pp, ii in zip(p, i)]

    nodes = [{"path": [t], "score": p, "parent": None} for p, t in children(None)]
    beams = nodes
    for _ in range(2, steps + 1):
        level = [{"path": b["path"] + [t], "score": b["score"] * p, "parent": id(b)} for b in beams
                 for p, t in children(b)]
        nodes += level
        beams = sorted(level, key=lambda n: -n["score"])[:topk]
    tree = sorted(nodes, key=lambda n: -n["score"])[: ndt - 1]
    best = 0
    for n in tree:
        path, d = n["path"], len(n["path"])
        prefixes_in_tree = all(any(m["path"] == path[:i] for m in tree) for i in range(1, d))
        if prefixes_in_tree and path == list(ids[a + 1:a + 1 + d]):
            best = max(best, d)
    return best


@pytest.mark.parametrize("steps,topk,ndt", [(3, 3, 8), (2, 2, 4), (4, 2, 13)])
def test_tree_equals_brute_force(tiny_target, canary_draft, random_draft, canary_cases, steps, topk, ndt):
    cases, caps = canary_cases
    seen = 0
    for draft in (canary_draft, random_draft):
        for case, cap in list(zip(cases, caps))[:2]:
            ids = list(case.ids)
            dev = draft.fc.weight.device
            trees = draft_trees(draft, torch.tensor([ids[1:]], device=dev), aux_of(cap, STATES)[None, :-1], steps,
                                topk, ndt, EXACT_ANCESTOR)
            acc = tree_accepts(trees, ids, steps)
            assert int(trees.selected.sum(-1).min()) == ndt - 1 and trees.tokens.shape[1] == max_tree_nodes(steps, topk)
            for a in range(len(case.prompt), len(ids) - 1):
                assert acc[a - 1] == _brute_accepted(draft, ids, cap, a, steps, topk, ndt), (a, steps, topk, ndt)
                seen += acc[a - 1]
    assert seen > 0  # some drafts are accepted, so the comparison means something


def test_tree_accepts_at_least_chain_for_trained_draft(canary_draft, canary_cases):
    cases, caps = canary_cases
    chain = simulate(canary_draft, cases, caps, STATES, 3)
    tree = simulate(canary_draft, cases, caps, STATES, 3, topk=4, num_draft_tokens=8)
    full = simulate(canary_draft, cases, caps, STATES, 3, topk=4, num_draft_tokens=1 + max_tree_nodes(3, 4))
    assert chain.accept_length > 1.3
    assert tree.accept_length >= chain.accept_length and full.accept_length >= tree.accept_length
    assert len(tree.histogram) == 4 and sum(tree.gains[0]) == len(cases[0].continuation) - 1


def test_make_settings_tree_rules():
    s = make_settings(3, 4, 8, 64)
    assert (s.mode, s.num_draft_tokens, s.topk) == ("tree", 8, 4)
    assert make_settings(2, 2, 7, 64).num_draft_tokens == 7  # 6 = 2 + 1 * 4: the largest allowed
    for bad in [(2, 2, 8), (1, 4, 6), (3, 4, None), (3, 4, 1)]:
        with pytest.raises(AuditError):
            make_settings(bad[0], bad[1], bad[2], 64)
    assert make_settings(3, 1, 9, 64).num_draft_tokens == 4  # chain unchanged


def test_tree_attention_comes_from_the_engine_convention():
    tree = make_settings(3, 4, 8, 64)
    sglang = with_tree_attention(tree, get_convention("sglang", "engine"))
    assert sglang.tree_attention == KV_BY_SLOT and "cache_locs.py" in sglang.notes[-1]
    for name in ("vllm", "vllm-v1"):  # vLLM 0.33.0 drafts chains only
        with pytest.raises(AuditError, match="chains only"):
            with_tree_attention(tree, get_convention(name, "engine"))
        assert with_tree_attention(make_settings(3, 1, None, 64), get_convention(name, "engine")).tree_attention is None
    trtllm = with_tree_attention(tree, get_convention("trtllm", "engine"))  # declares nothing: said so
    assert trtllm.tree_attention == EXACT_ANCESTOR and "declares no tree_drafts" in trtllm.notes[-1]
