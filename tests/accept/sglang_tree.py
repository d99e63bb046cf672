"""SGLang 0.5.23's tree drafting, driven with SGLang's own code from the wheel (nothing of it is committed).

Executed from the wheel, unchanged:

* ``select_top_k_tokens`` / ``_select_top_k_tokens_first`` / ``_select_top_k_tokens_later``
  (``srt/speculative/spec_utils.py``, the ``torch.compile`` decorator dropped) with ``fast_topk``
  (``srt/utils/common.py``): beam expansion, re-selection, hidden re-gathered to the parent row;
* ``organize_draft_results`` (``srt/speculative/eagle_utils.py``): the final tree;
* ``renorm_draft_probs`` (``spec_utils.py``) on the draft logits;
* the KV slots each draft step writes and reads: ``assign_draft_cache_locs_contiguous``,
  ``per_step_draft_out_cache_loc`` and the Triton kernel ``generate_draft_decode_kv_indices``
  (``kernels/ops/speculative/cache_locs.py``), run by Triton's interpreter in a subprocess
  (sglang_kv_kernels.py).

Re-expressed (stated here, and in docs/accept-rate.md): ``sampling_softmax`` is ``torch.softmax`` (its CPU
fallback, ``kernels/ops/sampling/__init__.py:57``); ``maybe_detect_oob`` (an async debug assertion, off by
default) is a plain bounds assert; the ``draft_forward`` loop of ``eagle_worker_v2.py:742-923`` (greedy, no
rejection sampling, ``topk > 1``) is re-stated below in a dozen lines, each SGLang call in it being the
wheel's; the draft network and its attention over the gathered keys are eagle-audit's
(:class:`~eagle_audit.runtime.eagle3.Eagle3Draft`: the subject here is which keys each node reads and which
nodes are kept, not the network); the kernels are run for two requests (``seq_len`` 5 and 9) and their
slots, relative to ``seq_len``, are checked identical for both before being applied to every root.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.wheels import WheelSource

SPEC_UTILS = "sglang/srt/speculative/spec_utils.py"
EAGLE_UTILS = "sglang/srt/speculative/eagle_utils.py"
KERNEL_SEQ_LENS = (5, 9)


@dataclass(frozen=True)
class SGLangTreeCode:
    select_top_k_tokens: object
    organize_draft_results: object
    renorm_draft_probs: object
    fast_topk: object


def load_code(wheel: Path) -> SGLangTreeCode:
    src = WheelSource(wheel)
    fast_topk = src.function("sglang/srt/utils/common.py", "fast_topk", {"torch": torch})
    ns = {"torch": torch, "fast_topk": fast_topk}
    ns["_select_top_k_tokens_first"] = src.function(SPEC_UTILS, "_select_top_k_tokens_first", ns)
    ns["_select_top_k_tokens_later"] = src.function(SPEC_UTILS, "_select_top_k_tokens_later", ns)

    def oob(indices, low, high, msg):
        assert indices.numel() == 0 or (int(indices.min()) >= low and int(indices.max()) < high), msg

    softmax = lambda logits, temperatures=None: torch.softmax(logits, dim=-1)  # noqa: E731
    return SGLangTreeCode(src.function(SPEC_UTILS, "select_top_k_tokens", ns),
                          src.function(EAGLE_UTILS, "organize_draft_results", {"torch": torch, "maybe_detect_oob": oob}),
                          src.function(SPEC_UTILS, "renorm_draft_probs", {"sampling_softmax": softmax}), fast_topk)


@dataclass(frozen=True)
class Slots:
    """Draft-step KV slots, relative to the request's ``seq_len``: ``writes[i][r]`` the slot row r writes at
    step i, ``reads[i][r]`` the extension slots it reads (the prefix 0..seq_len-1 is always read)."""

    writes: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[tuple[int, ...], ...], ...]


def kernel_slots(sglang_wheel: Path, triton_dir: Path, work: Path, combos) -> dict[tuple[int, int], Slots]:
    """SGLang's kernels for every (topk, steps) of ``combos``, run once in a subprocess."""
    pool_len = max(KERNEL_SEQ_LENS) + 8 * 4 + 8
    req = {"sglang_wheel": str(sglang_wheel), "triton_dir": str(triton_dir), "work": str(work),
           "seq_lens": list(KERNEL_SEQ_LENS), "pool_len": pool_len, "combos": [list(c) for c in combos]}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("sglang_kv_kernels.py"))],
                          input=json.dumps(req), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for key, res in json.loads(proc.stdout).items():
        topk, steps = map(int, key.split(","))
        per_request = []
        for b, s in enumerate(KERNEL_SEQ_LENS):
            rows = range(b * topk, (b + 1) * topk)
            reads = []
            for i in range(steps):
                step = []
                for row in rows:
                    got = res["reads"][i][row]
                    assert got[:s] == list(range(s)), (key, i, row)  # the whole prefix, in order
                    step.append(tuple(x - s for x in got[s:]))
                reads.append(tuple(step))
            writes = tuple(tuple(res["writes"][i][row] - s for row in rows) for i in range(steps))
            per_request.append(Slots(writes, tuple(reads)))
        assert per_request[0] == per_request[1], key  # relative to seq_len, the same for any request
        out[(topk, steps)] = per_request[0]
    return out


@dataclass(frozen=True)
class SGLangTree:
    parent_list: torch.Tensor  # [R, ...] SGLang's parent candidate per topk group (-1 = root)
    top_scores_index: torch.Tensor  # [R, ndt - 1] selected candidates, sorted
    draft_tokens: torch.Tensor  # [R, ndt - 1] their target ids


@torch.inference_mode()
def sglang_trees(code: SGLangTreeCode, slots: Slots, draft, next_tokens: torch.Tensor, aux: torch.Tensor,
                 roots: list[int], steps: int, topk: int, ndts: list[int]) -> dict[int, SGLangTree]:
    """The trees SGLang's ``draft_forward`` builds at draft rows ``roots`` (row t: the draft-extend row that
    read x[t+1]; its KV prefix is rows 0..t, so ``seq_len = t + 1``), one per ``num_draft_tokens``."""
    T = next_tokens.shape[1]
    ext = draft(next_tokens, aux, torch.arange(T))  # draft-extend over the teacher-forced prefix
    R = len(roots)
    probs = code.renorm_draft_probs(ext.logits[0, roots].float(), None, False)  # [R, draft_vocab]
    topk_p, topk_index = code.fast_topk(probs, topk, dim=-1)
    topk_index = draft.to_target_ids(topk_index)  # hot_token_id[topk_index]
    hidden_states = ext.hidden[0, roots]  # [R, H]
    # per root: the prefix keys (rows 0..t) and a pool of extension slots -> (k, v) per layer
    prefix = [[(k[:, :, :t + 1], v[:, :, :t + 1]) for k, v in ext.kv] for t in roots]
    pools: list[dict[int, list]] = [{} for _ in roots]
    scores = None
    score_list, token_list, parents_list = [], [], []
    for i in range(steps):
        input_ids, hidden_states, scores, tree_info = code.select_top_k_tokens(
            i, topk_p, topk_index, hidden_states, scores, topk)
        score_list.append(tree_info[0])
        token_list.append(tree_info[1])
        parents_list.append(tree_info[2])
        if i == steps - 1:
            break
        logits, hiddens = [], []
        for b, t in enumerate(roots):  # the topk rows of one request read equally many keys: one batch
            rows = range(b * topk, (b + 1) * topk)
            past = []
            for layer, (pk, pv) in enumerate(prefix[b]):
                ks, vs = [], []
                for r in range(topk):
                    own = slots.writes[i][r]
                    read = slots.reads[i][r]
                    assert own in read  # written before attention (set_kv_buffer), read by the same step
                    others = [pools[b][s][layer] for s in read if s != own]
                    ks.append(torch.cat([pk[0]] + [kv[0] for kv in others], dim=1))
                    vs.append(torch.cat([pv[0]] + [kv[1] for kv in others], dim=1))
                past.append((torch.stack(ks), torch.stack(vs)))  # [topk, kv_heads, keys, head_dim]
            pos = torch.full((topk, 1), t + 1 + i)  # seq_len + i (positions.add_(1) per step)
            o = draft(input_ids[list(rows)][:, None], hidden_states[list(rows)][:, None], pos, past)
            for r in range(topk):
                pools[b][slots.writes[i][r]] = [(k[r], v[r]) for k, v in o.kv]  # [kv_heads, 1, head_dim]
            logits.append(o.logits[:, 0])
            hiddens.append(o.hidden[:, 0])
        probs = code.renorm_draft_probs(torch.cat(logits).float(), None, False)  # [R*topk, draft_vocab]
        topk_p, topk_index = code.fast_topk(probs, topk, dim=-1)
        topk_index = draft.to_target_ids(topk_index)
        hidden_states = torch.cat(hiddens)
    out = {}
    for ndt in ndts:
        parent_list, top_scores_index, draft_tokens = code.organize_draft_results(
            score_list, token_list, parents_list, ndt)
        out[ndt] = SGLangTree(parent_list, top_scores_index, draft_tokens)
    assert out[ndts[0]].top_scores_index.shape[0] == R
    return out
