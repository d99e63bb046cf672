"""The launch lines eagle_audit/engines/vllm/launch.py builds for vLLM (``vllm_reference``, ``vllm_serving``), run
exactly as built through the real engine (harness.serve adds only host, port and the CPU flags), with the real
``ExampleHiddenStatesConnector`` (its two CPU bugs fixed by the harness plugin, cpu_fixes/): every state the
server writes equals the local capture of the boundary the line says it captures.

* reference line: ``layers --server URL --hidden-states-dir DIR`` reads B0..B30 (31 slots) from the server and
  compares each with the local capture: every slot ``ok``, cosine ~1 (float32 on both sides);
* serving line of the demo draft: the slots the line's :class:`Capture` names (B0, B3, B16, from the draft's
  top-level ids), read through the tool's own reader, equal the local capture of those boundaries.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from eagle_audit.demo import demo_draft
from eagle_audit.engines.launch import TargetShape
from eagle_audit.engines.vllm.launch import vllm_reference, vllm_serving

N, H = 30, 576
COSINE = 0.9999  # float32 on both sides: measured 1.0 (issue 26)


def smol_shape(smol_dir) -> TargetShape:
    return TargetShape(str(smol_dir), "LlamaForCausalLM", N, H)


def test_reference_line_through_the_real_connector(vllm_server, smol_dir, cli, tmp_path):
    storage = tmp_path / "hs"
    storage.mkdir()
    launch = vllm_reference(smol_shape(smol_dir), str(storage))
    assert launch.capture is not None and launch.capture.slots == N + 1 and not launch.unreachable
    server = vllm_server(launch.argv)
    out = tmp_path / "layers.json"
    r = cli("-t", smol_dir, "-d", demo_draft(), "--states-server", server.url, "--hidden-states-dir", storage,
            "--engine", "vllm-v1", "--json", out)
    assert r.exit_code in (0, 1), (r.exit_code, r.stdout, r.stderr, server.error_lines())
    doc = json.loads(out.read_text())
    slots = doc["served_states"]["slots"]
    assert [s["expected"] for s in slots] == [f"B{k}" for k in range(N + 1)]
    assert all(s["verdict"] == "ok" and s["matched"] == s["expected"] for s in slots), slots
    assert min(s["min_cosine"] for s in slots) >= COSINE, [(s["expected"], s["min_cosine"]) for s in slots]
    assert doc["served_states"]["tokens"] > 100
    assert not [f for f in doc["findings"] if f["code"].startswith("ENGINE_STATE")]


def test_serving_line_through_the_real_connector(vllm_server, smol_dir, smollm2, tmp_path, ids=None):
    """The demo's own serving line (its ids [0, 3, 16]; measured once also with ids [2, 15, 27]: the same)."""
    from eagle_audit.engines.options import ServerOptions
    from eagle_audit.capture import capture_states
    from eagle_audit.engines.registry import read_served_states
    from eagle_audit.states import State

    storage = tmp_path / "hs"
    storage.mkdir()
    config = json.loads((Path(demo_draft()) / "config.json").read_text())
    if ids is not None:
        config["eagle_aux_hidden_state_layer_ids"] = ids
    launch = vllm_serving(config, smol_shape(smol_dir), str(storage), conv=None)
    want = [State(k) for k in (ids or [0, 3, 16])]
    assert launch.capture is not None and list(launch.capture.states) == want
    server = vllm_server(launch.argv)
    prompts = [smollm2.tokenizer("The capital of France is")["input_ids"],
               smollm2.tokenizer("def fib(n):\n    return")["input_ids"]]
    served = read_served_states(ServerOptions(server.url, "vllm"), prompts, launch.capture,
                                hidden_states_dir=str(storage))
    assert len(served) == len(prompts)
    for r in served:
        local = capture_states(smollm2, torch.tensor([list(r.token_ids)]), want)
        for slot, s in enumerate(want):
            a = np.asarray(r.states[:, slot], dtype=np.float64)  # [T, H]
            b = local[s][0].double().numpy()
            cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
            assert cos.min() >= COSINE, (s.label(), cos.min())
