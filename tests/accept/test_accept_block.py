"""Block drafting (DFlash) simulated as the engines run it (eagle_audit/simulate/block.py): one block
``[bonus, mask x (B-1)]`` a round over the committed context, the leading run of drafts equal to the target's
greedy tokens accepted, the target's next token the new bonus.

The simulation reads every anchor's block from one masked forward over the whole case; the reference here runs
the rounds one at a time as an engine does, each block over only the context committed before its bonus, on a
continuation built so that each round accepts a known number of drafts."""

from __future__ import annotations

import random

import pytest
import torch

from eagle_audit.runtime.block import DFlashArch, DFlashDraft
from eagle_audit.simulate.accept import Case
from eagle_audit.simulate.block import block_steps, simulate_block
from eagle_audit.states import State

H, VOCAB, BLOCK, MASK = 32, 64, 5, 63
STATES = (State(1), State(3))


def _draft(seed: int = 0, causal: bool = False) -> DFlashDraft:
    arch = DFlashArch(hidden_size=H, target_hidden_size=H, num_aux=len(STATES), num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=8, intermediate_size=64, eps=1e-6, rope_theta=10000.0,
                      block_size=BLOCK, mask_token_id=MASK, causal=causal)
    d = DFlashDraft(arch)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in d.named_parameters():
            p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g) if name.endswith("norm.weight")
                    else 0.3 * torch.randn(p.shape, generator=g))
    d.embed = torch.randn(VOCAB, H, generator=g)
    d.target_head = torch.randn(VOCAB, H, generator=g)
    return d.eval()


@torch.inference_mode()
def _round(draft, ids, caps, L) -> list[int]:
    """One engine round at bonus position L: the block over the context of positions < L only."""
    ctx = draft.context(torch.cat([caps[s][:L] for s in STATES], -1)[None])
    block = torch.full((1, 1, BLOCK), MASK, dtype=torch.long)
    block[0, 0, 0] = ids[L]
    hidden = draft.blocks(ctx, block, torch.tensor([[L]]))[0, 0, 1:]
    return draft.logits(hidden).argmax(-1).tolist()


def _case(draft, prompt_len=6, total=60, seed=1):
    """A prompt and a continuation on which round r accepts ks[r] drafts: the continuation takes the engine's
    drafts d_1..d_k, then a token other than d_{k+1} (the target's own), and so on."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    caps = {s: torch.randn(total + BLOCK, H, generator=g) for s in STATES}
    ids = [rng.randrange(VOCAB - 1) for _ in range(prompt_len + 1)]  # the prompt and the prefill's token
    ks = []
    while len(ids) < total:
        d = _round(draft, ids, caps, len(ids) - 1)
        k = min(rng.randrange(BLOCK), total - len(ids))
        ids += d[:k]
        if len(ids) < total:
            ids.append(next(t for t in range(VOCAB - 1) if k >= len(d) or t != d[k]))
        ks.append(k)
    return Case(tuple(ids[:prompt_len]), tuple(ids[prompt_len:])), {s: c[:len(ids)] for s, c in caps.items()}, ks


@pytest.mark.parametrize("causal", [False, True])
def test_each_round_accepts_what_the_engine_accepts(causal):
    draft = _draft(causal=causal)
    case, caps, ks = _case(draft)
    st = simulate_block(draft, [case], [caps], STATES)
    assert block_steps(draft) == BLOCK - 1 and st.verify_steps == len(ks)
    assert list(st.gains[0]) == [k + 1 for k in ks]
    assert sum(st.gains[0]) == len(case.continuation) - 1  # every generated token after the prefill's
    assert st.accept_length == pytest.approx(sum(k + 1 for k in ks) / len(ks))
    assert st.per_position[0] == pytest.approx(sum(k > 0 for k in ks) / len(ks))
    assert any(k > 0 for k in ks) and any(k == 0 for k in ks)


def test_another_wiring_reads_other_states():
    """The same case fed the slots swapped: the drafts change, so the known acceptance is lost."""
    draft = _draft()
    case, caps, ks = _case(draft)
    swapped = simulate_block(draft, [case], [caps], STATES[::-1])
    assert list(swapped.gains[0]) != [k + 1 for k in ks]
    assert swapped.accept_length < sum(k + 1 for k in ks) / len(ks)
