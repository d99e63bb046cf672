"""Block drafting (DFlash), simulated as SGLang 0.5.23 and vLLM 0.33.0 run it, greedy.

One verify round, both engines (read in their wheels; docs/accept-rate.md "Block drafts" cites the lines):

* the committed text is x[0..L] where x[L] is the bonus token (the first one: the token the prefill samples);
* the draft runs one block ``[x[L], mask x (B - 1)]`` at positions L..L+B-1 over the context of the target's
  states at positions 0..L-1 (fc over the concatenated slots, then ``hidden_norm``: every committed token but
  the bonus, whose state the target has not computed yet), the block bidirectional unless the draft says causal;
* block row j (1..B-1) is drafted as the argmax of the target's ``lm_head`` on the draft's final-normed hidden:
  d_j, a guess of x[L+j] (row 0, the bonus, is never sampled);
* the target verifies ``[x[L], d_1..d_{B-1}]``: a = the leading run of d_j equal to the target's greedy token at
  L+j; the target's token after them is the new bonus; a + 1 tokens are committed and the next round's bonus
  sits at L + a + 1.

So a round is the EAGLE-3 chain's walk (:func:`eagle_audit.simulate.accept.walk`) with the B-1 drafts of one block
forward in place of a chain of draft steps: ``drafts[j-1][L-1]`` = d_j of the block anchored at L.

The engines' block: SGLang's is ``speculative_num_draft_tokens`` = the draft config's ``block_size`` by default
(B-1 drafts a round); vLLM's is ``1 + num_speculative_tokens`` (``[bonus, mask x K]``; K is the user's, never
derived from ``block_size``). Both are simulated with K = B - 1 drafts, the block the draft was trained on:
:func:`block_steps`. DSpark (a Markov head over sequential samples, ``sample_from_anchor``) is not simulated here.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..states import State
from .accept import AcceptStats, Case, stats_from_gains, walk

#: anchors of one block forward at a time (their logits are [anchors, B-1, vocab]: bounded memory)
ANCHORS_PER_FORWARD = 64


def block_steps(draft) -> int:
    """Drafts per verify round: the trained block's mask positions (B - 1)."""
    return draft.arch.block_size - 1


def _slots(caps: dict[State, torch.Tensor], states: Sequence[State]) -> torch.Tensor:
    return torch.cat([caps[s] for s in states], dim=-1)  # [L, n*H_t]


@torch.inference_mode()
def block_drafts(draft, ids: Sequence[int], caps: dict[State, torch.Tensor], states: Sequence[State],
                 steps: int) -> list[list[int]]:
    """[steps][L-1] drafted tokens: ``out[j-1][a-1]`` is d_j of the block anchored at position a (1..L-1), whose
    context is the states at positions < a."""
    dev = draft.device
    dt = draft.norm.weight.dtype
    L = len(ids)
    x = torch.tensor([list(ids)], device=dev)
    ctx = draft.context(_slots(caps, states)[None].to(dev, dt))  # [1, L, H]
    bs = steps + 1
    out: list[list[int]] = [[] for _ in range(steps)]
    for start in range(1, L, ANCHORS_PER_FORWARD):
        anchors = torch.arange(start, min(L, start + ANCHORS_PER_FORWARD), device=dev)[None]  # [1, A]
        block = torch.full((1, anchors.shape[1], bs), draft.arch.mask_token_id, dtype=torch.long, device=dev)
        block[..., 0] = x[0, anchors[0]]
        hidden = draft.blocks(ctx, block, anchors, last_rows=slice(1, bs))  # [1, A, steps, H]
        picked = draft.logits(hidden).argmax(-1)[0]  # [A, steps]: first-max ties, as both engines
        for j in range(steps):
            out[j].extend(picked[:, j].tolist())
    return out


def simulate_block(draft, cases: Sequence[Case], caps: Sequence[dict[State, torch.Tensor]],
                   states: tuple[State, ...], steps: int | None = None) -> AcceptStats:
    """Acceptance of the block draft fed ``states`` on every case, ``steps`` drafts a round (default: the
    trained block's, :func:`block_steps`)."""
    if getattr(draft, "markov_head", None) is not None:
        raise ValueError("a DSpark draft's block is drafted sequentially through its Markov head: not simulated")
    steps = block_steps(draft) if steps is None else steps
    gains = [walk(case.ids, len(case.prompt), block_drafts(draft, case.ids, cap, states, steps))
             for case, cap in zip(cases, caps)]
    return stats_from_gains(gains, steps, cases)
