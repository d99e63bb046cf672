"""Launch lines for a server that hands out the target's captured states, and what each captures.

Two lines per engine (``sglang==0.5.23``, ``vllm==0.33.0``; docs/server.md cites every rule):

* **serving**: captures exactly what serving this draft feeds it. The ids are read from the draft config
  the way the engine reads them (the engine convention of probes/, :meth:`Convention.read_draft_ids`) and go
  through the same capture setter: SGLang's capture-only mode hands ``--return-aux-hidden-state-layer-ids``
  to ``model.set_eagle3_layers_to_capture`` exactly as serving hands the draft's ids
  (``spec_aux_hidden_state.py:84-110`` / ``:185-196``, ``attention_backend_setup.py:40-72``), so the
  architecture's shift applies to both; vLLM's ``extract_hidden_states`` reads
  ``eagle_aux_hidden_state_layer_ids`` from its draft config (``v1/worker/gpu/spec_decode/extract_hidden_states.py:40-49``)
  through the same ``set_eagle3_aux_hidden_state_layers`` as an EAGLE-3 draft.
* **reference**: captures every boundary the audit needs that the engine can reach (SGLang refuses
  negative ids, ``validation_hook.py:735-740``, so B0 is unreachable on the +1 rule; ids must be
  ``< num_hidden_layers``, ``spec_aux_hidden_state.py:113-129``, so B_N pre-norm only where the setter passes
  index N).

Every line is one the engine's own argument parser accepts (tests/served/test_launch.py runs SGLang's
field declarations, ``add_cli_args_from_dataclass`` and ``handle_aux_hidden_state_capture`` from the wheel).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..conventions import Convention, get_convention
from ..states import State

SGLANG_PORT = 30000
VLLM_PORT = 8000


@dataclass(frozen=True)
class Capture:
    """What one launch captures: the states in slot order (= the server's concatenation order), each
    ``hidden_size`` wide. ``ids``: the ids the line passes (None: the engine's default)."""

    engine: str  # "sglang" or "vllm"
    states: tuple[State, ...]
    hidden_size: int
    ids: tuple[int, ...] | None = None
    dtype: str | None = None  # the precision the server computes in, where it says (None: not said)

    @property
    def slots(self) -> int:
        return len(self.states)

    @property
    def width(self) -> int:
        return self.slots * self.hidden_size

    def to_json(self) -> dict:
        return {"engine": self.engine, "states": [s.label() for s in self.states], "hidden_size": self.hidden_size,
                "ids": None if self.ids is None else list(self.ids), "dtype": self.dtype}


@dataclass(frozen=True)
class Launch:
    """A launch line (``argv``), what it captures, and notes (what it cannot reach, and how that is had)."""

    role: str  # "serving" or "reference"
    argv: tuple[str, ...]
    capture: Capture | None  # None: no line of this engine captures what serving feeds (notes say why)
    notes: tuple[str, ...] = ()
    unreachable: tuple[State, ...] = ()  # boundaries the audit asked for that this engine cannot capture

    @property
    def line(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict:
        return {"role": self.role, "line": self.line, "argv": list(self.argv),
                "capture": self.capture.to_json() if self.capture else None, "notes": list(self.notes),
                "unreachable": [s.label() for s in self.unreachable]}


@dataclass(frozen=True)
class TargetShape:
    """What the launch lines need of the target: its path as the server sees it, architecture, layers,
    hidden size."""

    path: str
    architecture: str
    num_layers: int
    hidden_size: int
    extra: Mapping[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- SGLang


def _sglang_argv(target: str, ids: Sequence[int] | None, port: int, aux: bool = True) -> tuple[str, ...]:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", target]
    if aux:
        argv += ["--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3"]
        if ids is not None:
            argv += ["--return-aux-hidden-state-layer-ids", *map(str, ids)]
    else:
        argv += ["--enable-return-hidden-states"]
    # only the final prefill chunk's states are returned (batch_result_processor.py:305-309, :333-341):
    # one chunk per prompt
    argv += ["--chunked-prefill-size", "-1", "--port", str(port)]
    return tuple(argv)


def _capture_only_ok(ids: Sequence[int], n: int) -> str | None:
    """SGLang's capture-only validation (validation_hook.py:730-747, spec_aux_hidden_state.py:113-129):
    why these ids are refused, or None."""
    if not ids:
        return "an empty id list is refused"
    if any(i < 0 for i in ids):
        return f"negative ids {[i for i in ids if i < 0]} are refused (serving accepts them)"
    if len(set(ids)) != len(ids):
        return "repeated ids are refused"
    if any(i >= n for i in ids):
        return f"ids {[i for i in ids if i >= n]} >= num_hidden_layers {n} are refused"
    return None


def sglang_serving(draft_config: Mapping[str, Any], target: TargetShape, port: int = SGLANG_PORT,
                   conv: Convention | None = None) -> Launch:
    conv = conv or get_convention("sglang", "engine")
    wiring = conv.resolve(draft_config, target.architecture, target.num_layers)
    eagle = draft_config.get("eagle_config")
    if isinstance(eagle, Mapping) and eagle.get("use_aux_hidden_state", True) is False:
        # spec_aux_hidden_state.py:188-190: no aux capture; the draft is fed the final post-norm state
        argv = _sglang_argv(target.path, None, port, aux=False)
        return Launch("serving", argv, Capture("sglang", (State(target.num_layers, normed=True),), target.hidden_size),
                      ("eagle_config.use_aux_hidden_state is false: serving feeds the final post-norm state, which "
                       "--enable-return-hidden-states returns",))
    if wiring.unsupported or wiring.failure:
        why = wiring.unsupported or wiring.failure.text()
        return Launch("serving", (), None, (f"SGLang cannot serve this draft on {target.architecture}: {why}",))
    ids, place, _ = conv.read_draft_ids(draft_config)
    notes = []
    if ids is None:
        line_ids = None
        notes.append("the draft config has no eagle_config.eagle_aux_hidden_state_layer_ids: serving and this "
                     "line both capture the architecture's default")
    else:
        line_ids = tuple(dict.fromkeys(ids))  # serving collapses repeats (the `i in layers_to_capture` test)
        refused = _capture_only_ok(line_ids, target.num_layers)
        if refused:
            return Launch("serving", (), None, (
                f"serving captures {', '.join(s.label() for s in wiring.states)} from ids {list(ids)}, but the "
                f"capture-only mode cannot be given these ids: {refused}; use the reference line",))
        if len(line_ids) != len(ids):
            notes.append(f"repeated ids collapsed: {list(ids)} -> {list(line_ids)} (serving captures each once)")
    cap = Capture("sglang", tuple(wiring.states), target.hidden_size, line_ids)
    return Launch("serving", _sglang_argv(target.path, line_ids, port), cap, tuple(notes))


def sglang_reference(target: TargetShape, wanted: Sequence[State] | None = None, port: int = SGLANG_PORT,
                     conv: Convention | None = None) -> Launch:
    """The capture-only line reaching the most of ``wanted`` (default: every boundary 0..N)."""
    conv = conv or get_convention("sglang", "engine")
    n = target.num_layers
    want = sorted({s for s in (wanted or [State(k) for k in range(n + 1)]) if not s.normed})
    best: tuple[int, tuple[int, ...], tuple[State, ...]] | None = None
    for base in (list(range(0, n - 1)), list(range(0, n)), list(range(1, n - 1)), list(range(1, n))):
        if _capture_only_ok(base, n):
            continue
        w = conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": base}}, target.architecture, n)
        if w.unsupported or w.failure or w.dropped:
            continue
        ids = tuple(i for i, k in zip(base, w.capture_indices) if State(k) in want)
        if not ids or _capture_only_ok(ids, n):
            continue
        check = conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}, target.architecture, n)
        if check.failure or check.dropped:
            continue  # a sub-list that switches rules (DeepSeek's first-id heuristic)
        score = len(set(check.states) & set(want))
        if best is None or score > best[0]:
            best = (score, ids, tuple(check.states))
    if best is None:
        return Launch("reference", (), None, (f"no capture-only id list reaches these boundaries on "
                                              f"{target.architecture}",), tuple(want))
    _, ids, states = best
    missing = tuple(s for s in want if s not in states)
    notes = []
    odd = conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}, target.architecture,
                       n).not_residual
    notes += [f"capture index {k} is {what}" for k, what in odd]
    if State(0) in missing:
        notes.append("B0 (the embedding output) is unreachable: SGLang refuses negative ids and this architecture "
                     "adds 1; B0 is the target's embedding of the tokens, computed from the embedding weights "
                     "alone (model.embed_tokens.weight, one tensor of one safetensors shard)")
    if State(n) in missing:
        notes.append(f"B{n} (the last layer's output, before the final norm) is unreachable on this architecture: "
                     "the capture loop never reaches index N (only GPT-OSS, MiniMax-M3 and Gemma capture it); the "
                     "post-norm final state comes from --enable-return-hidden-states")
    cap = Capture("sglang", states, target.hidden_size, ids)
    return Launch("reference", _sglang_argv(target.path, ids, port), cap, tuple(notes), missing)


# ----------------------------------------------------------------------------- vLLM


def _vllm_argv(target: str, ids: Sequence[int], storage: str, port: int) -> tuple[str, ...]:
    spec = {"method": "extract_hidden_states", "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}}
    kv = {"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer",
          "kv_connector_extra_config": {"shared_storage_path": storage}}
    return ("vllm", "serve", target, "--speculative-config", json.dumps(spec), "--kv-transfer-config",
            json.dumps(kv), "--port", str(port))


def vllm_serving(draft_config: Mapping[str, Any], target: TargetShape, storage: str, port: int = VLLM_PORT,
                 conv: Convention | None = None) -> Launch:
    conv = conv or get_convention("vllm", "engine")
    wiring = conv.resolve(draft_config, target.architecture, target.num_layers)
    if wiring.unsupported or wiring.failure:
        why = wiring.unsupported or wiring.failure.text()
        return Launch("serving", (), None, (f"vLLM cannot serve this draft on {target.architecture}: {why}",))
    ids, _, _ = conv.read_draft_ids(draft_config)
    if ids is None:  # extract_hidden_states has no default (extract_hidden_states.py:45-49): name the default's ids
        ids = tuple(wiring.capture_indices)
    cap = Capture("vllm", tuple(wiring.states), target.hidden_size, tuple(ids))
    return Launch("serving", _vllm_argv(target.path, ids, storage, port), cap)


def vllm_reference(target: TargetShape, storage: str, wanted: Sequence[State] | None = None, port: int = VLLM_PORT,
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
    cap = Capture("vllm", tuple(w.states), target.hidden_size, tuple(ids))
    return Launch("reference", _vllm_argv(target.path, ids, storage, port), cap, notes, missing)
