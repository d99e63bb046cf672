"""Tree drafts against SGLang 0.5.23's own code: the trees eagle-audit selects (``kv_by_slot``) equal those
SGLang's selection functions build when every draft step reads the KV slots SGLang's kernels give it, for
topk 2-8, steps 2-4 and every allowed num_draft_tokens in 4-16 (sglang_tree.py says what runs from the wheel).
The ``exact_ancestor`` mode (EAGLE's reference) selects other trees from step 3 on."""

from __future__ import annotations

import pytest
import torch

from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, make_cases
from eagle_audit.simulate.targetrun import aux_of
from eagle_audit.simulate.tree import EXACT_ANCESTOR, KV_BY_SLOT, Trees, draft_trees, max_tree_nodes
from eagle_audit.draft.read import read_draft
from eagle_audit.states import State

from tests.accept.accept_tiny import TINY_BOUNDARIES, tiny_prompts, write_tiny_draft
from tests.accept.sglang_tree import kernel_slots, load_code, sglang_trees

pytestmark = pytest.mark.usefixtures("one_thread")

STATES = tuple(map(State, TINY_BOUNDARIES))
COMBOS = [(topk, steps) for topk in range(2, 9) for steps in (2, 3, 4)]


def _ndts(topk: int, steps: int) -> list[int]:
    return [n for n in range(4, 17) if n - 1 <= max_tree_nodes(steps, topk)]


@pytest.fixture(scope="module")
def code(sglang_wheel):
    return load_code(sglang_wheel)


@pytest.fixture(scope="module")
def slots(sglang_wheel, tmp_path_factory):
    from tests.wheels import triton_wheel, unpack_triton

    root = tmp_path_factory.mktemp("sglang-kv")
    triton_dir = unpack_triton(triton_wheel(), root / "triton")
    return kernel_slots(sglang_wheel, triton_dir, root / "stub", COMBOS)


def _draft(target, path):
    spec = read_draft(str(path))
    return load_draft_model(spec, target, flags_from_config(spec.config, spec.layout), dtype=torch.float64)


@pytest.fixture(scope="module")
def drafts(tiny_target, tmp_path_factory):
    """Random drafts with peaked (scale 20) and flatter (scale 5) distributions; float64, so that batching
    differences between the two drivers cannot flip a near-tie."""
    root = tmp_path_factory.mktemp("tree-sglang")
    return {name: _draft(tiny_target, write_tiny_draft(root / name, nested_ids=[0, 2, 4], seed=seed, scale=scale))
            for name, seed, scale in (("peaked", 1, 20.0), ("flat", 2, 5.0))}


@pytest.fixture(scope="module")
def case(tiny_target):
    cases, _ = make_cases(tiny_target, tiny_prompts(20)[:1], 24)
    ids = cases[0].ids
    aux = aux_of(capture_cases(tiny_target, cases, STATES)[0], STATES)[None, :-1]  # [1, T, n*H_t]
    return torch.tensor([ids[1:]]), aux


def _same(trees: Trees, sg, roots: list[int], topk: int) -> list[bool]:
    """Per root: eagle-audit's selected nodes, their tokens and their parents equal SGLang's tree."""
    same = []
    for b, t in enumerate(roots):
        sel = trees.selected[t].nonzero().flatten()
        ok = torch.equal(sel, sg.top_scores_index[b]) and torch.equal(trees.tokens[t, sel], sg.draft_tokens[b])
        if ok:
            ok = all(int(trees.parents[t, c]) == int(sg.parent_list[b, c // topk]) for c in sel.tolist())
        same.append(ok)
    return same


def test_kernel_slots_are_kv_by_slot(slots):
    """What the kernels say, in the words of tree.py: row r writes seq_len + r*steps + i at step i and reads
    its own row's slots 0..i, whatever beam holds rank r."""
    for (topk, steps), s in slots.items():
        for i in range(steps):
            for r in range(topk):
                assert s.writes[i][r] == r * steps + i
                assert s.reads[i][r] == tuple(r * steps + j for j in range(i + 1))


@pytest.mark.parametrize("draft_name", ["peaked", "flat"])
def test_trees_equal_sglang(code, slots, drafts, case, draft_name):
    draft = drafts[draft_name]
    next_tokens, aux = case
    roots = list(range(next_tokens.shape[1]))
    compared = differs = 0
    for topk, steps in COMBOS:
        ndts = _ndts(topk, steps)
        sg = sglang_trees(code, slots[(topk, steps)], draft, next_tokens, aux, roots, steps, topk, ndts)
        for ndt in ndts:
            mine = draft_trees(draft, next_tokens, aux, steps, topk, ndt, KV_BY_SLOT)
            same = _same(mine, sg[ndt], roots, topk)
            assert all(same), (draft_name, topk, steps, ndt, [t for t, ok in zip(roots, same) if not ok])
            compared += len(roots)
            if steps >= 3:
                differs += sum(not ok for ok in _same(draft_trees(draft, next_tokens, aux, steps, topk, ndt,
                                                                  EXACT_ANCESTOR), sg[ndt], roots, topk))
    assert compared > 1000
    assert differs > 0  # the comparison can tell the two attention modes apart


def test_minimal_case_topk2_steps3_ndt8(code, slots, drafts, case):
    """topk 2, 3 steps, 8 draft tokens: the KV-by-slot trees are SGLang's; exact-ancestor attention selects
    a different tree at some roots (the case issue 12 names)."""
    next_tokens, aux = case
    roots = list(range(next_tokens.shape[1]))
    draft = drafts["peaked"]
    sg = sglang_trees(code, slots[(2, 3)], draft, next_tokens, aux, roots, 3, 2, [8])[8]
    assert all(_same(draft_trees(draft, next_tokens, aux, 3, 2, 8, KV_BY_SLOT), sg, roots, 2))
    assert not all(_same(draft_trees(draft, next_tokens, aux, 3, 2, 8, EXACT_ANCESTOR), sg, roots, 2))
