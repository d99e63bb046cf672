"""SGLang 0.5.23's draft-decode KV kernels, executed on the CPU (run as a subprocess by
test_accept_tree_sglang.py).

Triton's interpreter (``TRITON_INTERPRET=1``) runs the wheel's own ``@triton.jit`` kernels of
``sglang/kernels/ops/speculative/cache_locs.py`` unchanged:

* ``assign_draft_cache_locs_contiguous_func`` -> ``assign_draft_cache_locs_contiguous``: the KV slots the
  draft steps write (``topk * num_steps`` per request from ``seq_len`` on, as
  ``speculative/eagle_worker_common.py`` calls it for ``page_size == 1``), split per step by
  ``speculative/eagle_utils.py`` ``per_step_draft_out_cache_loc`` (compiled out of the wheel with ast), as
  ``eagle_worker_v2.py`` ``draft_forward`` splits them;
* ``generate_draft_decode_kv_indices``: the KV slots each draft step reads, launched as
  ``FlashInferMultiStepDraftBackend.common_template`` (``layers/attention/flashinfer_backend.py``) launches
  it for ``page_size == 1``, no draft window, one token block (``NUM_STEPS=0``).

The file is imported from a throwaway package whose ``sglang/srt/utils.py`` is a stub: ``is_cpu`` and the
other platform tests return False (so the Triton path runs, as on a GPU) and ``next_power_of_2`` is the
wheel's own (``srt/utils/common.py``). It runs in its own process because Triton must be imported with the
interpreter switched on, and the test process's torch should not see Triton.

stdin: JSON ``{"sglang_wheel", "triton_dir", "work", "seq_lens", "pool_len", "combos": [[topk, steps]]}``.
stdout: JSON ``{"topk,steps": {"writes": [step][row], "reads": [step][row][slots]}}``, row = b * topk + r,
every slot relative to the start of request b's ``req_to_token`` row (slot - b * pool_len).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.wheels (a script)

from tests.wheels import WheelSource  # noqa: E402

CACHE_LOCS = "sglang/kernels/ops/speculative/cache_locs.py"


def stub_package(src: WheelSource, root: Path) -> None:
    """``root/sglang/...``: the wheel's cache_locs.py verbatim under stub parent packages."""
    import ast

    for d in ("sglang", "sglang/srt", "sglang/kernels", "sglang/kernels/ops", "sglang/kernels/ops/speculative"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "__init__.py").write_text("")
    common = "sglang/srt/utils/common.py"
    npow = ast.get_source_segment(src.text(common), src.definition(common, "next_power_of_2"))
    (root / "sglang/srt/utils.py").write_text(
        "def _no():\n    return False\n\n\nis_cpu = is_cuda = is_hip = is_musa = is_npu = is_xpu = _no\n\n\n"
        f"{npow}\n")
    (root / CACHE_LOCS).write_text(src.text(CACHE_LOCS))


def run(req: dict, src: WheelSource) -> dict:
    import torch

    from sglang.kernels.ops.speculative import cache_locs as cl

    per_step = src.function("sglang/srt/speculative/eagle_utils.py", "per_step_draft_out_cache_loc", {"torch": torch})
    seq_lens = torch.tensor(req["seq_lens"], dtype=torch.int64)
    pool_len, bs = req["pool_len"], len(req["seq_lens"])
    req_to_token = torch.arange(bs * pool_len, dtype=torch.int32).view(bs, pool_len)
    req_pool_indices = torch.arange(bs, dtype=torch.int64)
    base = (req_pool_indices * pool_len).tolist()
    out = {}
    for topk, steps in req["combos"]:
        rows = bs * topk
        writes = torch.empty(rows * steps, dtype=torch.int64)
        cl.assign_draft_cache_locs_contiguous_func(req_pool_indices, req_to_token, seq_lens, writes, topk, steps)
        writes = per_step(writes, bs, topk, steps)  # [steps, rows]
        kv_indices = torch.full((steps, rows * (pool_len + steps)), -1, dtype=torch.int32)
        kv_indptr = torch.zeros((steps, rows + 1), dtype=torch.int32)
        positions = seq_lens.repeat_interleave(topk)
        npow = cl.next_power_of_2
        cl.generate_draft_decode_kv_indices[(steps, bs, topk)](
            req_pool_indices, req_to_token, seq_lens, kv_indices, kv_indptr, positions, pool_len,
            kv_indices.shape[1], kv_indptr.shape[1], npow(bs), npow(steps), npow(rows), 1, 0, 0,
            ENTRY_PAGE_SIZE=1, v2p=None, TRANSLATE=False, NUM_STEPS=0)
        reads = []
        for i in range(steps):
            ptr = kv_indptr[i].tolist()
            reads.append([[s - base[row // topk] for s in kv_indices[i, ptr[row]:ptr[row + 1]].tolist()]
                          for row in range(rows)])
        out[f"{topk},{steps}"] = {"writes": [[s - base[row // topk] for row, s in enumerate(w)]
                                             for w in writes.tolist()], "reads": reads}
    return out


def main() -> None:
    req = json.load(sys.stdin)
    work = Path(req["work"])
    src = WheelSource(Path(req["sglang_wheel"]))
    stub_package(src, work)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path[:0] = [str(work), req["triton_dir"]]
    json.dump(run(req, src), sys.stdout)


if __name__ == "__main__":
    main()
