"""Tiny random block drafts (DFlash, DSpark) for the block-drafting tests, an engine-style round of each (one block
over only the context committed before its bonus, as an engine runs it), and cases built on those rounds to
accept a known number of drafts each round.

The DSpark round re-derives the Markov step from the weights, written from SGLang 0.5.23's heads
(``srt/models/dspark.py:238-382``: ``VanillaMarkov.step_bias``, ``GatedMarkovHead.step_bias``, ``RNNHead._rnn_step``)
and its block loop (``srt/speculative/dspark_components/dspark_draft.py:248-289`` ``draft_markov_block``), not
through :class:`eagle_audit.runtime.block.MarkovHead`."""

from __future__ import annotations

import random

import torch

from eagle_audit.runtime.block import DFlashArch, DFlashDraft, MarkovHead
from eagle_audit.simulate.accept import Case
from eagle_audit.states import State

H, VOCAB, BLOCK, MASK, RANK = 32, 64, 5, 63, 8
STATES = (State(1), State(3))


def tiny_draft(seed: int = 0, causal: bool = False, markov: str | None = None, dspark: bool = False,
               sample_from_anchor: bool = True, markov_scale: float = 4.0) -> DFlashDraft:
    """A DFlash draft, or a DSpark one (``dspark``; ``markov``: its head kind, None for none) with random weights;
    the Markov weights scaled up so that the bias changes the drafts at this size."""
    dspark = dspark or markov is not None
    arch = DFlashArch(hidden_size=H, target_hidden_size=H, num_aux=len(STATES), num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=8, intermediate_size=64, eps=1e-6, rope_theta=10000.0,
                      block_size=BLOCK, mask_token_id=MASK, causal=causal, markov=markov,
                      markov_rank=RANK if markov else 0, dspark=dspark,
                      sample_from_anchor=dspark and sample_from_anchor)
    d = DFlashDraft(arch)
    if markov:
        d.markov_head = MarkovHead(arch, VOCAB)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in d.named_parameters():
            p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g) if name.endswith("norm.weight")
                    else 0.3 * torch.randn(p.shape, generator=g))
            if name.startswith("markov_head.markov_w"):
                p.mul_(markov_scale)
    d.embed = torch.randn(VOCAB, H, generator=g)
    d.target_head = torch.randn(VOCAB, H, generator=g)
    return d.eval()


def drafts_per_round(draft) -> int:
    """DFlash: B - 1 masks; DSpark: gamma = B (SGLang's default gamma, the draft's block_size)."""
    return draft.arch.block_size - (0 if draft.arch.dspark else 1)


@torch.inference_mode()
def round_hidden(draft, ids, caps, L, states=STATES) -> torch.Tensor:
    """The drafting rows' final-normed hidden of the block at bonus position L, over the context of positions < L
    only [drafts, H]: DFlash and DSpark without ``sample_from_anchor``, rows 1.. of ``[x_L, mask...]``; DSpark with
    it, every row of ``[x_L, mask x (gamma-1)]``."""
    n = drafts_per_round(draft)
    first = 0 if draft.arch.sample_from_anchor else 1
    ctx = draft.context(torch.cat([caps[s][:L] for s in states], -1)[None])
    block = torch.full((1, 1, n + first), draft.arch.mask_token_id, dtype=torch.long)
    block[0, 0, 0] = ids[L]
    return draft.blocks(ctx, block, torch.tensor([[L]]))[0, 0, first:]


def markov_bias(head, prev: int, h: torch.Tensor, state):
    """One step of SGLang's head kinds, from the weights: (bias [V], state)."""
    e = head.markov_w1.weight[prev]
    w2 = head.markov_w2.weight
    if head.kind == "vanilla":
        return w2 @ e, state
    if head.kind == "gated":
        g = torch.sigmoid(head.gate_proj.weight @ torch.cat([h, e]) + head.gate_proj.bias)
        return w2 @ (g * e), state
    z = head.joint_proj.weight @ torch.cat([state, e, h]) + head.joint_proj.bias
    gate, cand, out = z.chunk(3)
    gate = torch.sigmoid(gate)
    return w2 @ torch.tanh(out), gate * state + (1 - gate) * torch.tanh(cand)


@torch.inference_mode()
def engine_round(draft, ids, caps, L, states=STATES) -> list[int]:
    """One engine round at bonus position L: the block over the context of positions < L only, then its drafts:
    DFlash in parallel (argmax per row), DSpark left to right, each row's bias from the token drafted before it
    (the anchor x_L for the first)."""
    hidden = round_hidden(draft, ids, caps, L, states)
    base = draft.head_logits(hidden)
    if not draft.arch.dspark:
        return base.argmax(-1).tolist()
    head = draft.markov_head
    prev, state, out = ids[L], torch.zeros(draft.arch.markov_rank), []
    for i in range(len(hidden)):
        logits = base[i]
        if head is not None:
            bias, state = markov_bias(head, prev, hidden[i], state)
            logits = logits + bias
        prev = int(logits.argmax())
        out.append(prev)
    return out


def built_case(draft, prompt_len=6, total=60, seed=1, states=STATES):
    """A prompt and a continuation on which round r accepts ks[r] drafts: the continuation takes the engine's drafts
    d_1..d_k, then a token other than d_{k+1} (the target's own), and so on; ks covers 0..drafts_per_round."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    n = drafts_per_round(draft)
    caps = {s: torch.randn(total + n + 1, H, generator=g) for s in states}
    ids = [rng.randrange(VOCAB - 1) for _ in range(prompt_len + 1)]  # the prompt and the prefill's token
    ks = []
    while len(ids) < total:
        d = engine_round(draft, ids, caps, len(ids) - 1, states)
        k = min(rng.randrange(n + 1), total - len(ids) - 1)  # room for the round's bonus, the last round's too
        ids += d[:k]
        ids.append(next(t for t in range(VOCAB - 1) if k >= len(d) or t != d[k]))
        ks.append(k)
    return Case(tuple(ids[:prompt_len]), tuple(ids[prompt_len:])), {s: c[:len(ids)] for s, c in caps.items()}, ks
