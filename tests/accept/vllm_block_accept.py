"""vLLM 0.33.0's own greedy verify, executed on the CPU under Triton's interpreter (run as a subprocess by
test_accept_block_engines.py).

``v1/worker/gpu/spec_decode/rejection_sampler_utils.py`` ``rejection_sample`` runs unchanged: the rejection sampler
of the GPU model runner (``rejection_sampler.py:250-296`` ``_verify`` calls it), which verifies DFlash and DSpark
blocks as any draft's (``speculator.py`` of either proposes ``num_speculative_tokens`` drafts; the input ids of a
request's logits are ``[bonus, drafts]``, ``_rejection_kernel`` reads the draft of logit i at i + 1). Greedy: every
request's temperature 0; no draft logits (an argmax draft), no block verification, no synthetic rates, no FLy.

The wheel's modules are imported by their real names from an extracted copy (tests/wheels.py ``wheel_modules``): the
sampler file, ``v1/spec_decode/fly.py``, ``v1/worker/gpu/sample/`` and ``v1/watermarking/prfs/``. ``vllm.triton_utils``
is the one module given in its place: it re-exports Triton (``triton``, ``tl``, ``tldevice``; here the real Triton)
after resolving vLLM's platform, which needs the rest of vLLM. Its own process: Triton is imported with the
interpreter switched on.

stdin: JSON ``{"vllm_wheel", "triton_dir", "work", "inputs", "output"}``; ``inputs`` a ``torch.save`` file of
``{"candidates": [R, K+1] (the bonus, then K drafts), "target_logits": [R * (K+1), V]}``; ``output`` gets
``{"sampled": [R, K+1], "num_sampled": [R]}`` (a request's first ``num_sampled`` entries: its accepted drafts, then
the target's token after them; the rest unset).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.wheels (a script)

from tests import wheels  # noqa: E402

SAMPLER = "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils"
EXTRACT = ("vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py", "vllm/v1/spec_decode/fly.py",
           "vllm/v1/worker/gpu/sample/", "vllm/v1/watermarking/prfs/")


def main() -> None:
    req = json.load(sys.stdin)
    shim = wheels.vllm_triton_utils(req["triton_dir"])
    import torch
    root = wheels.extract(Path(req["vllm_wheel"]), Path(req["work"]), *EXTRACT)
    with wheels.wheel_modules(root, "vllm", {"vllm.triton_utils": shim}) as load:
        rejection_sample = load(SAMPLER).rejection_sample
    inputs = torch.load(req["inputs"], weights_only=False)
    cand, logits = inputs["candidates"], inputs["target_logits"].contiguous()
    R, n = cand.shape
    sampled, num_sampled = rejection_sample(
        logits, None, cand.reshape(-1).contiguous(), torch.arange(R + 1, dtype=torch.int32) * n,
        torch.arange(R * n, dtype=torch.int64), torch.arange(R, dtype=torch.int32),
        torch.arange(R, dtype=torch.int32).repeat_interleave(n), torch.arange(n, dtype=torch.int32).repeat(R),
        torch.zeros(R), torch.zeros(R, dtype=torch.int64), n - 1)
    torch.save({"sampled": sampled, "num_sampled": num_sampled}, req["output"])


if __name__ == "__main__":
    main()
