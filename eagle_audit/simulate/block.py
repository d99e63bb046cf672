"""Block drafting (DFlash, DSpark), simulated as SGLang 0.5.23 and vLLM 0.33.0 run it, greedy.

One verify round, both engines (read in their wheels; docs/accept-rate.md "Block drafts" cites the lines):

* the committed text is x[0..L] where x[L] is the bonus token (the first one: the token the prefill samples);
* the draft runs one block ``[x[L], mask x (B - 1)]`` at positions L..L+B-1 over the context of the target's
  states at positions 0..L-1 (fc over the concatenated slots, then ``hidden_norm``: every committed token but
  the bonus, whose state the target has not computed yet), the block bidirectional unless the draft says causal;
* block row j (1..B-1) is drafted as the argmax of the target's ``lm_head`` on the draft's final-normed hidden:
  d_j, a guess of x[L+j] (row 0, the bonus, is never sampled); a reduced-vocabulary draft (speculators layout)
  takes its own head's argmax, mapped to a target id through ``d2t``;
* the target verifies ``[x[L], d_1..d_{B-1}]``: a = the leading run of d_j equal to the target's greedy token at
  L+j; the target's token after them is the new bonus; a + 1 tokens are committed and the next round's bonus
  sits at L + a + 1.

So a round is the EAGLE-3 chain's walk (:func:`eagle_audit.simulate.accept.walk`) with the drafts of one block
forward in place of a chain of draft steps: ``drafts[j-1][L-1]`` = d_j of the block anchored at L.

The engines' block: SGLang's is ``speculative_num_draft_tokens`` = the draft config's ``block_size`` by default
(B-1 drafts a round); vLLM's is ``1 + num_speculative_tokens`` (``[bonus, mask x K]``; K is the user's, never
derived from ``block_size``). Both are simulated with K = B - 1 drafts, the block the draft was trained on:
:func:`block_steps`.

**DSpark** (:func:`dspark_drafts`), as SGLang 0.5.23 (``srt/speculative/dspark_components/``) and vLLM 0.33.0
(``v1/worker/gpu/spec_decode/dspark/speculator.py``) run it, greedy:

* gamma drafts a round, gamma = the draft's ``block_size`` (SGLang ``dspark_config.py:295-297`` and
  ``arg_groups/speculative_hook.py:806-838``: the verify window is gamma + 1; vLLM: ``num_speculative_tokens``, the
  user's, simulated as gamma);
* ``sample_from_anchor`` (top-level config key, default true in both: SGLang ``dspark_config.py:29-31``, vLLM
  ``dspark/speculator.py:46-55``): the block is ``[x[L], mask x (gamma-1)]`` at L..L+gamma-1 and row i predicts the
  token at L+i+1, the anchor's row the first draft (SGLang ``dspark_draft.py:350-351, 656-664``; vLLM
  ``dflash/speculator.py:781-788`` ``sample_pos = query_pos + 1``); false: ``[x[L], mask x gamma]``, rows 1..gamma, as
  DFlash (``dspark_draft.py:665-670`` ``select_draft_hidden_without_anchor``);
* the block's backbone forward is one parallel pass (it reads no draft token); then the drafts are picked left to
  right: d_i = argmax(base logits of row i + the Markov bias of d_{i-1}), d_0 = x[L] the anchor (SGLang
  ``dspark_draft.py:248-289`` ``draft_markov_block``, ``:489`` ``anchor_tokens=draft_block_ids[:, 0]``; vLLM
  ``dspark/speculator.py:183-200``); an ``rnn`` head's state starts at zeros and is carried through the block
  (SGLang ``srt/models/dspark.py:347-382``);
* verify as DFlash: ``[x[L], d_1..d_gamma]``, the leading run of d_i equal to the target's greedy token at L+i, then
  the target's token after them (SGLang ``kernels/ops/speculative/dspark/dspark_accept.py:633-651``
  ``accept_greedy`` -> ``kernels/ops/speculative/dflash.py:348-400``; ``dspark_verify.py:1246-1268``, all-greedy).
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..states import State
from .accept import AcceptStats, Case, stats_from_gains, walk

#: anchors of one block forward at a time (their logits are [anchors, B-1, vocab]: bounded memory)
ANCHORS_PER_FORWARD = 64


def block_steps(draft) -> int:
    """Drafts per verify round: the trained block's mask positions (B - 1); a DSpark draft's gamma (B)."""
    return draft.arch.block_size - (0 if draft.arch.dspark else 1)


def layout_note(draft) -> str:
    """One line: the block a round and its drafts (for the run's notes)."""
    a, b = draft.arch, block_steps(draft)
    if not a.dspark:
        return (f"DFlash block drafting: {b + 1}-token blocks [bonus, {b} masks], {b} drafts a verify (the draft's "
                f"block_size: SGLang's --speculative-num-draft-tokens by default; vLLM with num_speculative_tokens {b})")
    rows = (f"{b}-token blocks [bonus, {b - 1} masks], every row drafting the token after it (sample_from_anchor)"
            if a.sample_from_anchor else f"{b + 1}-token blocks [bonus, {b} masks], the masks drafting (sample_from_anchor "
                                          "false)")
    head = f"its {a.markov} Markov head" if a.markov else "no Markov head"
    return (f"DSpark block drafting: {rows}, drafted left to right through {head}, {b} drafts a verify (gamma = the "
            f"draft's block_size, SGLang's default; vLLM with num_speculative_tokens {b})")


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
        picked = draft.to_target_ids(draft.logits(hidden).argmax(-1))[0]  # [A, steps] target ids; first-max ties
        for j in range(steps):
            out[j].extend(picked[:, j].tolist())
    return out


@torch.inference_mode()
def dspark_drafts(draft, ids: Sequence[int], caps: dict[State, torch.Tensor], states: Sequence[State],
                  steps: int) -> list[list[int]]:
    """:func:`block_drafts` for a DSpark draft: every anchor's block in one backbone forward, then its ``steps``
    drafts picked left to right through the Markov head (module docstring)."""
    dev = draft.device
    dt = draft.norm.weight.dtype
    a = draft.arch
    L = len(ids)
    x = torch.tensor([list(ids)], device=dev)
    ctx = draft.context(_slots(caps, states)[None].to(dev, dt))  # [1, L, H]
    first = a.first_draft_row  # the row of the first draft: the anchor's when sampling from it (as the fingerprint)
    bs = steps + first  # block rows: the anchor's row drafts too when sampling from it
    head = draft.markov_head
    out: list[list[int]] = [[] for _ in range(steps)]
    for start in range(1, L, ANCHORS_PER_FORWARD):
        anchors = torch.arange(start, min(L, start + ANCHORS_PER_FORWARD), device=dev)[None]  # [1, A]
        block = torch.full((1, anchors.shape[1], bs), a.mask_token_id, dtype=torch.long, device=dev)
        block[..., 0] = x[0, anchors[0]]
        hidden = draft.blocks(ctx, block, anchors, last_rows=slice(first, bs))[0]  # [A, steps, H]
        base = draft.head_logits(hidden)  # [A, steps, vocab]
        prev = x[0, anchors[0]]  # [A]: the anchors, the first draft's previous token
        state = head.init_state(hidden[:, 0]) if head is not None else None
        for j in range(steps):
            logits = base[:, j]
            if head is not None:
                bias, state = head.step(prev, hidden[:, j], state)
                logits = logits + bias
            prev = logits.argmax(-1)  # [A]: first-max ties, as both engines
            out[j].extend(prev.tolist())
    return out


def simulate_block(draft, cases: Sequence[Case], caps: Sequence[dict[State, torch.Tensor]],
                   states: tuple[State, ...], steps: int | None = None) -> AcceptStats:
    """Acceptance of the block draft (DFlash or DSpark) fed ``states`` on every case, ``steps`` drafts a round
    (default: :func:`block_steps`)."""
    steps = block_steps(draft) if steps is None else steps
    drafts = dspark_drafts if draft.arch.dspark else block_drafts
    gains = [walk(case.ids, len(case.prompt), drafts(draft, case.ids, cap, states, steps))
             for case, cap in zip(cases, caps)]
    return stats_from_gains(gains, steps, cases)
