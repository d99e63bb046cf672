"""Block drafting against SGLang 0.5.23's own code (tests/accept/sglang_block_accept.py says what runs from the wheel):
on continuations built to accept a known number of drafts each round (tests/accept/block_tiny.py, every count
0..drafts), at every anchor:

* DFlash: SGLang's verify (``compute_dflash_correct_drafts_and_bonus``, its CUDA kernel and the worker's fused
  accept/bonus kernel, both under Triton's interpreter) on the engine's blocks; walked by its accepted counts, the
  rounds are eagle-audit's (``simulate_block``) round for round, and its bonus is the continuation's next token;
* DSpark: SGLang's ``draft_markov_block`` with its own Markov heads (vanilla, gated, rnn) drafts every anchor's
  block from the backbone's logits and hidden states as eagle-audit's simulation does, and its greedy verify
  (``accept_greedy``) walks the same rounds.

* vLLM 0.33.0's verify (``v1/worker/gpu/spec_decode/rejection_sampler_utils.py`` ``rejection_sample``, Triton only,
  under the interpreter: tests/accept/vllm_block_accept.py) on the same rounds' blocks, DFlash's and DSpark's, walks
  the same rounds;
* vLLM 0.33.0's DSpark drafting (tests/accept/vllm_dspark_draft.py says what runs from the wheel and what stands
  in): the speculator built by its own constructors, its input kernel (``_prepare_dflash_inputs_kernel``, under the
  interpreter: the block's ids, positions, context and sampled rows) and its drafting loop
  (``DSparkSpeculator._sample_sequential``, ``dspark/speculator.py:156-209``) through the draft model's
  ``markov_embed`` / ``markov_bias`` and vLLM's ``LogitsProcessor`` draft every anchor's block from the backbone's
  hidden states as eagle-audit's simulation does, ``sample_from_anchor`` by default (true) and false. vLLM's one
  Markov head is the vanilla one (``model_executor/models/qwen3_dspark.py:48-93``): gated and rnn drafts are held
  against SGLang only. vLLM's backbone forward is not executed (the hidden states are the test draft's)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eagle_audit.simulate.block import dspark_drafts, simulate_block

from tests.accept.block_tiny import (MASK, STATES, VOCAB, built_case, drafts_per_round, engine_round, round_hidden,
                                     tiny_draft)

pytestmark = [pytest.mark.full, pytest.mark.usefixtures("one_thread")]

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def triton_dir(tmp_path_factory) -> Path:
    """Triton's Python package, unpacked once for every harness of this module (tests/wheels.py)."""
    from tests.wheels import triton_wheel, unpack_triton

    return unpack_triton(triton_wheel(), tmp_path_factory.mktemp("triton"))


def _runner(harness: str, wheel_key: str, wheel: Path, root: Path, triton_dir: Path):
    """``run(inputs) -> outputs``: one run of ``harness`` (a subprocess) on ``wheel``."""
    runs = iter(range(100))

    def run(inputs: dict) -> dict:
        n = next(runs)
        torch.save(inputs, root / f"in{n}.pt")
        req = {wheel_key: str(wheel), "triton_dir": str(triton_dir), "work": str(root / f"stub{n}"),
               "inputs": str(root / f"in{n}.pt"), "output": str(root / f"out{n}.pt")}
        proc = subprocess.run([sys.executable, str(HERE / harness)], input=json.dumps(req), capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return torch.load(root / f"out{n}.pt", weights_only=False)

    return run


@pytest.fixture(scope="module")
def sglang(sglang_wheel, tmp_path_factory, triton_dir):
    return _runner("sglang_block_accept.py", "sglang_wheel", sglang_wheel, tmp_path_factory.mktemp("sglang-block"),
                   triton_dir)


@pytest.fixture(scope="module")
def vllm(vllm_wheel, tmp_path_factory, triton_dir):
    return _runner("vllm_block_accept.py", "vllm_wheel", vllm_wheel, tmp_path_factory.mktemp("vllm-block"), triton_dir)


@pytest.fixture(scope="module")
def vllm_dspark(vllm_wheel, tmp_path_factory, triton_dir):
    return _runner("vllm_dspark_draft.py", "vllm_wheel", vllm_wheel, tmp_path_factory.mktemp("vllm-dspark"),
                   triton_dir)


def _extended(case, n: int, seed: int = 5) -> list[int]:
    """The case's tokens and n + 1 more (the target's tokens past its end, read by the last rounds' verify rows
    after their first miss only)."""
    rng = random.Random(seed)
    return case.ids + [rng.randrange(VOCAB - 1) for _ in range(n + 1)]


def _walk(ids: list[int], start: int, accepted, bonus) -> list[int]:
    """The rounds an engine runs along ``ids`` from bonus position ``start``, by its verify's per-anchor accepted
    count and bonus (indexed by anchor position), checking each bonus is the continuation's next token."""
    L, gains = start, []
    while L < len(ids) - 1:
        k = int(accepted[L])
        assert int(bonus[L]) == ids[L + k + 1], L
        gains.append(k + 1)
        L += k + 1
    return gains


def test_dflash_verify_is_sglangs(sglang):
    drafts = [tiny_draft(), tiny_draft(seed=2, causal=True)]
    built = [built_case(d, total=80, seed=s) for d, s in zip(drafts, (1, 3))]
    rows, cand, tp, pre = [], [], [], []
    for d, (case, caps, _) in zip(drafts, built):
        n, ids = drafts_per_round(d), _extended(case, drafts_per_round(d))
        for L in range(len(case.prompt), len(case.ids) - 1):
            rows.append(L)
            cand.append([ids[L]] + engine_round(d, ids, caps, L))
            tp.append(ids[L + 1:L + n + 2])
            pre.append(L)
    out = sglang({"dflash": {"candidates": torch.tensor(cand), "target_predict": torch.tensor(tp),
                             "prefix_lens": torch.tensor(pre)}})["dflash"]
    eager_k, eager_b = out["eager"]
    kern_k, kern_b = out["kernel"]
    work_k, work_b, commit, out_tokens, new_seq = out["worker"]
    assert torch.equal(eager_k, kern_k) and torch.equal(eager_k, work_k)  # the three paths agree on every row
    assert torch.equal(eager_b, kern_b) and torch.equal(eager_b, work_b)
    assert torch.equal(commit, eager_k + 1) and torch.equal(new_seq, torch.tensor(pre) + eager_k + 1)
    at = 0
    for d, (case, caps, ks) in zip(drafts, built):
        m = len(case.ids) - 1 - len(case.prompt)
        k_by_anchor = {L: eager_k[at + i] for i, L in enumerate(rows[at:at + m])}
        b_by_anchor = {L: eager_b[at + i] for i, L in enumerate(rows[at:at + m])}
        for i in range(at, at + m):  # the worker's committed tokens: the accepted drafts, then the bonus
            k = int(work_k[i])
            assert out_tokens[i, :k].tolist() == cand[i][1:k + 1] and int(out_tokens[i, k]) == int(work_b[i])
        at += m
        gains = _walk(case.ids, len(case.prompt), k_by_anchor, b_by_anchor)
        assert gains == [k + 1 for k in ks] == list(simulate_block(d, [case], [caps], STATES).gains[0])
        assert set(ks) == set(range(drafts_per_round(d) + 1))  # every count, a full block included


@pytest.mark.parametrize("kw", [{"markov": "vanilla"}, {"markov": "gated"}, {"markov": "rnn"},
                                {"markov": "rnn", "sample_from_anchor": False}],
                         ids=["vanilla", "gated", "rnn", "rnn-fill-in"])
def test_dspark_drafting_and_verify_are_sglangs(sglang, kw):
    draft = tiny_draft(**kw)
    case, caps, ks = built_case(draft, total=80)
    n, ids = drafts_per_round(draft), _extended(case, drafts_per_round(draft))
    anchors = list(range(len(case.prompt), len(case.ids) - 1))
    with torch.inference_mode():
        hidden = torch.stack([round_hidden(draft, ids, caps, L) for L in anchors])  # [R, gamma, H]
        base = draft.head_logits(hidden)
    target = torch.zeros(len(anchors), n + 1, VOCAB)  # the target's greedy tokens at L+1..L+gamma+1
    for r, L in enumerate(anchors):
        target[r, torch.arange(n + 1), torch.tensor(ids[L + 1:L + n + 2])] = 1.0
    head = {k: v for k, v in draft.state_dict().items() if k.startswith("markov_head.")}
    out = sglang({"dspark": {"base_logits": base, "hidden": hidden, "anchors": torch.tensor([ids[L] for L in anchors]),
                             "kind": draft.arch.markov, "head": head, "target_logits": target}})["dspark"]
    sim = dspark_drafts(draft, case.ids, caps, STATES, n)
    assert torch.equal(out["drafts"], out["greedy_draft"])
    for r, L in enumerate(anchors):  # SGLang's drafts: the reference round's and the simulation's, every anchor
        assert out["drafts"][r].tolist() == engine_round(draft, ids, caps, L) == [sim[j][L - 1] for j in range(n)], L
    k, bonus = out["accept"][:2]
    gains = _walk(case.ids, len(case.prompt), dict(zip(anchors, k)), dict(zip(anchors, bonus)))
    assert gains == [k + 1 for k in ks] == list(simulate_block(draft, [case], [caps], STATES).gains[0])
    assert set(ks) == set(range(n + 1))


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"markov": "vanilla"}, {"markov": "rnn"}],
                         ids=["dflash", "dflash-causal", "dspark-vanilla", "dspark-rnn"])
def test_vllm_verify_walks_the_same_rounds(vllm, kw):
    draft = tiny_draft(**kw)
    case, caps, ks = built_case(draft, total=70)
    n, ids = drafts_per_round(draft), _extended(case, drafts_per_round(draft))
    anchors = list(range(len(case.prompt), len(case.ids) - 1))
    cand = torch.tensor([[ids[L]] + engine_round(draft, ids, caps, L) for L in anchors])  # [R, K+1]
    logits = torch.zeros(len(anchors) * (n + 1), VOCAB)  # the target's greedy tokens at L+1..L+K+1, one-hot
    logits[torch.arange(logits.shape[0]), torch.tensor([t for L in anchors for t in ids[L + 1:L + n + 2]])] = 1.0
    out = vllm({"candidates": cand, "target_logits": logits})
    k = out["num_sampled"].long() - 1  # accepted drafts: vLLM samples them and the bonus
    bonus = out["sampled"][torch.arange(len(anchors)), k]
    for r in range(len(anchors)):
        assert out["sampled"][r, :k[r]].tolist() == cand[r, 1:k[r] + 1].tolist()
    gains = _walk(case.ids, len(case.prompt), dict(zip(anchors, k)), dict(zip(anchors, bonus)))
    assert gains == [k + 1 for k in ks] == list(simulate_block(draft, [case], [caps], STATES).gains[0])
    assert set(ks) == set(range(n + 1))


@torch.inference_mode()
def _query_rows(draft, ids, caps, L, rows: int, states=STATES) -> torch.Tensor:
    """Every row's final-normed hidden of the block ``[x_L, mask x (rows - 1)]`` at L.. over the context of positions
    < L [rows, H], the anchor's row included: vLLM's speculator picks the rows it samples."""
    ctx = draft.context(torch.cat([caps[s][:L] for s in states], -1)[None])
    block = torch.full((1, 1, rows), draft.arch.mask_token_id, dtype=torch.long)
    block[0, 0, 0] = ids[L]
    return draft.blocks(ctx, block, torch.tensor([[L]]))[0, 0]


@pytest.mark.parametrize("sample_from_anchor", [None, False], ids=["anchor-default", "fill-in"])
def test_vllm_dspark_drafting_is_the_simulations(vllm_dspark, sample_from_anchor):
    """vLLM's DSpark speculator (tests/accept/vllm_dspark_draft.py) drafts every anchor's block as eagle-audit's
    simulation does: its Markov head is the vanilla one only (``qwen3_dspark.py:48-93``, the loop's
    ``markov_embed(prev)`` -> ``markov_bias``, no hidden state nor recurrent state: ``dspark/speculator.py:187-200``);
    ``sample_from_anchor`` absent from the config (vLLM's default, true) and false. num_speculative_tokens = gamma,
    vLLM's default for DSpark (``config/speculative.py:1592-1599``)."""
    draft = tiny_draft(markov="vanilla", sample_from_anchor=sample_from_anchor is not False)
    case, caps, _ = built_case(draft, total=80)
    n, first = drafts_per_round(draft), draft.arch.first_draft_row
    rows = n + first  # [anchor, masks]: N rows sampling from the anchor, 1 + N not
    anchors = list(range(len(case.prompt), len(case.ids) - 1))
    hidden = torch.stack([_query_rows(draft, case.ids, caps, L, rows) for L in anchors])  # [R, rows, H]
    hf_config = {"vocab_size": VOCAB, "hidden_size": draft.arch.hidden_size, "num_hidden_layers": draft.arch.num_layers,
                 "mask_token_id": draft.arch.mask_token_id, "block_size": draft.arch.block_size,
                 "markov_rank": draft.arch.markov_rank, "markov_head_type": "vanilla", "target_layer_ids": [0, 2]}
    if sample_from_anchor is not None:
        hf_config["sample_from_anchor"] = sample_from_anchor
    head = {k[len("markov_head."):]: v for k, v in draft.state_dict().items() if k.startswith("markov_head.")}
    out = vllm_dspark({"head_hidden": hidden, "anchors": torch.tensor(anchors),
                       "bonus": torch.tensor([case.ids[L] for L in anchors]), "target_head": draft.target_head,
                       "markov": head, "config": {"num_speculative_tokens": n, "hf_config": hf_config}})
    Q = out["num_query_per_req"]
    assert out["sample_from_anchor"] is draft.arch.sample_from_anchor and Q == rows
    at = 0
    for r, L in enumerate(anchors):  # the block vLLM builds is the one the backbone ran: ids, positions, context
        assert out["input_ids"][r * Q:(r + 1) * Q].tolist() == [case.ids[L]] + [MASK] * (Q - 1), L
        assert out["positions"][r * Q:(r + 1) * Q].tolist() == list(range(L, L + Q)), L
        assert out["context_positions"][at:at + L].tolist() == list(range(L)), L
        assert out["sample_indices"][r * n:(r + 1) * n].tolist() == [r * Q + first + j for j in range(n)], L
        assert out["sample_pos"][r * n:(r + 1) * n].tolist() == list(range(L + 1, L + n + 1)), L
        at += L
    sim = dspark_drafts(draft, case.ids, caps, STATES, n)
    for r, L in enumerate(anchors):  # vLLM's drafts: the reference round's and the simulation's, every anchor
        drafted = out["drafts"][r].tolist()
        assert drafted == engine_round(draft, case.ids, caps, L) == [sim[j][L - 1] for j in range(n)], L
    with torch.inference_mode():
        base = draft.head_logits(hidden[:, first:]).argmax(-1)
    assert (out["drafts"] != base).any()  # the Markov bias moves drafts here: the check is not the backbone's alone
