"""SGLang's launch lines: the serving line (captures what serving this draft feeds it) and the reference line
(every boundary the capture-only mode reaches); the shared objects and the rules are in
:mod:`eagle_audit.engines.launch`'s docstring."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...conventions import Convention, get_convention
from ...states import State
from ..launch import Capture, Launch, TargetShape

PORT = 30000


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


def sglang_serving(draft_config: Mapping[str, Any], target: TargetShape, port: int = PORT,
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


def sglang_reference(target: TargetShape, wanted: Sequence[State] | None = None, port: int = PORT,
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


def sglang_speculative(target: str, draft: str, num_steps: int = 3, port: int = PORT) -> Launch:
    """SGLang serving the draft with EAGLE-3 chain speculative decoding: what `accept-rate --server` measures
    (docs/server.md, "How to start each engine"; ``--speculative-eagle-topk 1`` forces num_draft_tokens to
    num_steps + 1, arg_groups/speculative_hook.py)."""
    argv = ("python", "-m", "sglang.launch_server", "--model-path", target, "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", draft, "--speculative-num-steps", str(num_steps),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(num_steps + 1), "--port", str(port))
    return Launch("speculative", argv, None)
