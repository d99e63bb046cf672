"""Draft rollouts from every position at once: the chain of ``steps`` draft tokens that would be
proposed after each verified token, batched across positions. The same code is EAGLE-3's
training-time test (with ``teacher`` tokens and gradients) and the acceptance simulation (own tokens).

Index t of a sequence stands for the round whose last verified token is x[t+1] (root a = t+1):

* step 0 is the draft-extend row: one causal forward over all t, reading (embed(x[t+1]), h_t) at
  position t; it predicts the first draft token for root t+1.
* step k >= 1 reads (embed(token of step k-1), its own step k-1 hidden) at position t+k and attends to
  the step-0 keys of positions 0..t (the teacher-forced prefix, as after a draft-extend) and to its own
  keys of steps 1..k (the draft-forward keys of that round).

Keys of step k: ``cat(prefix [T], diag_1 [T], ..., diag_k [T])``; mask ``[tril(T) | I | ... | I]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .eagle3 import Eagle3Draft


@dataclass
class Rollout:
    logits: list[torch.Tensor]  # per step: [batch, T, draft_vocab]
    tokens: list[torch.Tensor]  # per step: [batch, T] target ids of the argmax draft token


def rollout(draft: Eagle3Draft, next_tokens: torch.Tensor, aux: torch.Tensor, steps: int,
            teacher: torch.Tensor | None = None, keep_logits: bool = False, projected: bool = False) -> Rollout:
    """``next_tokens`` [batch, T] = x[t+1]; ``aux`` [batch, T, n*H_t] = target states at t (``projected``:
    already fc's output, [batch, T, H], as the fingerprint sums it per slot).
    ``teacher`` [batch, T + steps - 1]: tokens fed at step k are ``teacher[:, k:k+T]`` (training);
    None: each step feeds the previous step's own argmax (simulation)."""
    B, T = next_tokens.shape
    dev = next_tokens.device
    pos = torch.arange(T, device=dev)
    out = draft(next_tokens, aux, pos, projected=True) if projected else draft(next_tokens, aux, pos, from_target=True)
    prefix = out.kv  # per layer, [batch, kv_heads, T, head_dim]
    diags: list[list] = [[] for _ in prefix]
    tril = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    eye = torch.eye(T, dtype=torch.bool, device=dev)
    logits, tokens = [], []
    for k in range(steps):
        if k > 0:
            ids = teacher[:, k:k + T] if teacher is not None else tokens[-1]
            past = [(torch.cat([p[0]] + [d[0] for d in dl], dim=2), torch.cat([p[1]] + [d[1] for d in dl], dim=2))
                    for p, dl in zip(prefix, diags)]
            mask = torch.cat([tril] + [eye] * k, dim=1)  # [T, (k+1)T]
            out = draft(ids, out.hidden, pos + k, past, mask)
            for dl, kv in zip(diags, out.kv):
                dl.append(kv)
        if keep_logits or teacher is not None:
            logits.append(out.logits)
        tokens.append(draft.to_target_ids(out.logits.argmax(-1)))
    return Rollout(logits, tokens)
