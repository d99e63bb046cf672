"""Tree drafts (``topk > 1``) with SGLang 0.5.23's selection rules, from every position at once, greedy verification.

Per round with root a (draft position t = a - 1, the draft-extend row that read x[a]):

* level 1: the ``topk`` most probable draft tokens of the draft-extend row (softmax, then topk), score =
  their probability (``select_top_k_tokens`` i == 0);
* level i >= 2: each of the ``topk`` beams kept from level i-1 reads its own token with its parent's
  hidden (``draft_forward``) and proposes ``topk`` children; score = parent score * child probability;
  all ``topk**2`` children are candidates, and the ``topk`` best overall are kept as the next beams
  (``select_top_k_tokens`` i > 0: ``expand_scores``, ``fast_topk`` over the flattened ``topk**2``);
* the tree is the ``num_draft_tokens - 1`` best candidates by score over all levels, plus the root
  (``organize_draft_results``: ``torch.topk`` over the ``topk + (num_steps-1)*topk**2`` scores, indices
  sorted);
* verification (greedy) accepts the longest root-to-node path whose tokens all equal the target's greedy
  tokens; accept length = accepted + 1.

Each beam row is run as its own sequence (batch index = row r of the ``topk`` kept beams): it attends
to the step-0 keys of positions 0..t (the teacher-forced prefix) and to ``topk``-row draft keys chosen
by the tree attention mode (:data:`TREE_ATTENTION`); its hidden is always its parent's (SGLang
``select_top_k_tokens`` gathers ``hidden_states[parent row]``). Positions are batched as in
:func:`~eagle_audit.runtime.rollout.rollout`.

* ``kv_by_slot`` (SGLang 0.5.23, every attention backend): draft-decode step i of row r writes its keys
  to slot ``seq_len + r * num_steps + i`` and reads slots ``seq_len + r * num_steps + 0..i``
  (``kernels/ops/speculative/cache_locs.py:161`` ``generate_draft_decode_kv_indices``, line 266 in the
  ``page_size == 1 or topk == 1`` branch; writes: ``cache_locs.py:43``
  ``assign_draft_cache_locs_contiguous`` and ``srt/speculative/eagle_utils.py:57``
  ``per_step_draft_out_cache_loc``, used at ``eagle_worker_v2.py:760,830``; FlashAttention's expanded
  page table ``out_cache_loc.view(-1, num_steps)[:, :step + 1]``,
  ``srt/layers/attention/flashattention_backend.py:987-991``).
  Row r reads the keys that row r wrote at earlier steps, which belong to the beam that held rank r
  then, not necessarily to its ancestor: after a re-selection the keys are not re-gathered.
* ``exact_ancestor`` (EAGLE reference ``eagle/model/cnets.py`` ``topK_genrate`` @cb7e084:757, the tree
  mask gathered by ``out_ids``): a node attends to its true ancestors' keys; keys are gathered from
  the parents at each level like the hiddens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..runtime.eagle3 import Eagle3Draft


KV_BY_SLOT = "kv_by_slot"
EXACT_ANCESTOR = "exact_ancestor"
TREE_ATTENTION = (KV_BY_SLOT, EXACT_ANCESTOR)  # which draft keys a tree node attends to (module docstring)


def max_tree_nodes(num_steps: int, topk: int) -> int:
    """Candidates SGLang ranks: ``topk + (num_steps - 1) * topk**2``."""
    return topk + (num_steps - 1) * topk * topk


@dataclass
class Trees:
    tokens: torch.Tensor  # [T, N] target ids of every candidate node
    parents: torch.Tensor  # [T, N] candidate index of the parent, -1 = the root
    depth: list[int]  # [N] level of each candidate (1..steps)
    selected: torch.Tensor  # [T, N] bool: in the verified tree
    scores: torch.Tensor  # [T, N] cumulative draft probability


def draft_trees(draft: Eagle3Draft, next_tokens: torch.Tensor, aux: torch.Tensor, steps: int, topk: int,
                num_draft_tokens: int, attention: str = KV_BY_SLOT) -> Trees:
    """``next_tokens`` [1, T] = x[t+1]; ``aux`` [1, T, n*H_t] = target states at t; ``attention`` one of
    :data:`TREE_ATTENTION`."""
    if attention not in TREE_ATTENTION:
        raise ValueError(f"tree attention {attention!r}: known {', '.join(TREE_ATTENTION)}")
    B, T = next_tokens.shape
    assert B == 1
    k, dev = topk, next_tokens.device
    pos = torch.arange(T, device=dev)
    out = draft(next_tokens, aux, pos, from_target=True)
    prefix = out.kv  # per layer [1, kv_heads, T, head_dim]
    p, idx = torch.softmax(out.logits[0].float(), -1).topk(k, -1)  # [T, k]
    scores, beam_tok = p, draft.to_target_ids(idx)  # [T, k]
    beam_hidden = out.hidden.expand(k, -1, -1)  # [k, T, H]: the parent's (root's) hidden
    beam_cand = torch.arange(k, device=dev)[None].expand(T, k)  # candidate index of each beam
    c_scores, c_tok, c_par, depth = [p], [beam_tok], [torch.full((T, k), -1, device=dev)], [1] * k
    n_cand = k
    diags: list[list] = [[] for _ in prefix]  # per layer, per level: [k, kv_heads, T, head_dim], by beam row
    tril = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    eye = torch.eye(T, dtype=torch.bool, device=dev)
    tix = torch.arange(T, device=dev)[:, None].expand(T, k)
    for level in range(2, steps + 1):
        j = level - 1  # draft_forward steps so far, this one included
        past = [(torch.cat([pf[0].expand(k, -1, -1, -1)] + [d[0] for d in dl], dim=2),
                 torch.cat([pf[1].expand(k, -1, -1, -1)] + [d[1] for d in dl], dim=2)) for pf, dl in zip(prefix, diags)]
        mask = torch.cat([tril] + [eye] * j, dim=1)  # [T, (j+1)T]
        o = draft(beam_tok.T.contiguous(), beam_hidden, pos + j, past, mask)
        cp, ci = torch.softmax(o.logits.float(), -1).topk(k, -1)  # [k beam, T, k child]
        expand = (scores.T[:, :, None] * cp).permute(1, 0, 2).reshape(T, k * k)  # [T, k*k], beam-major
        ctok = draft.to_target_ids(ci).permute(1, 0, 2).reshape(T, k * k)
        c_scores.append(expand)
        c_tok.append(ctok)
        c_par.append(beam_cand.repeat_interleave(k, dim=1))
        depth += [level] * (k * k)
        base, n_cand = n_cand, n_cand + k * k
        if level == steps:
            break
        scores, sel = expand.topk(k, -1)  # [T, k]
        par = sel // k  # the kept beam's parent beam
        beam_tok = ctok.gather(1, sel)
        beam_cand = base + sel
        beam_hidden = o.hidden[par, tix].permute(1, 0, 2)  # [k, T, H]
        for li, (dl, new) in enumerate(zip(diags, o.kv)):
            if attention == KV_BY_SLOT:  # row r keeps the keys row r wrote (slot seq_len + r*num_steps + step)
                diags[li] = dl + [new]
            else:  # each kept beam takes its parent's keys (its ancestors')
                diags[li] = [tuple(x[par, :, tix].permute(1, 2, 0, 3) for x in kv) for kv in dl + [new]]
    all_scores = torch.cat(c_scores, dim=1)  # [T, N]
    top = all_scores.topk(num_draft_tokens - 1, dim=-1).indices.sort(-1).values
    selected = torch.zeros_like(all_scores, dtype=torch.bool).scatter_(1, top, True)
    return Trees(torch.cat(c_tok, dim=1), torch.cat(c_par, dim=1), depth, selected, all_scores)


def tree_accepts(trees: Trees, ids: list[int], steps: int) -> list[int]:
    """Accepted drafts per draft position t (root a = t + 1): the deepest selected node whose path from
    the root (all ancestors selected) equals ids[a+1..]."""
    T, N = trees.tokens.shape
    dev = trees.tokens.device
    x = torch.tensor(list(ids) + [-1] * (steps + 1), device=dev)
    t = torch.arange(T, device=dev)
    matched = torch.zeros(T, N, dtype=torch.bool, device=dev)
    acc = torch.zeros(T, dtype=torch.long, device=dev)
    for n in range(N):  # parents precede children
        d = trees.depth[n]
        ok = trees.selected[:, n] & (trees.tokens[:, n] == x[t + 1 + d])
        par = trees.parents[:, n]
        if d > 1:
            ok &= matched[t, par.clamp(min=0)]
        matched[:, n] = ok
        acc = torch.where(ok, torch.clamp(acc, min=d), acc)
    return acc.tolist()


def walk_accepts(L: int, prompt_len: int, acc: list[int]) -> list[int]:
    """Tokens gained at each verify along a sequence of length ``L``; ``acc[a-1]`` = drafts accepted at root a."""
    a, gains = prompt_len, []
    while a < L - 1:
        g = min(acc[a - 1] + 1, L - 1 - a)
        gains.append(g)
        a += g
    return gains
