"""SGLang's launch lines: the serving line (captures what serving this draft feeds it) and the reference line
(every boundary the capture-only mode reaches); the shared objects and the rules are in
:mod:`eagle_audit.engines.launch`'s docstring."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...conventions import Convention, get_convention
from ...errors import AuditError
from ...states import State
from ..launch import Capture, Launch, TargetShape

PORT = 30000


def _sglang_argv(target: str, ids: Sequence[int] | None, port: int, aux: bool = True,
                 algorithm: str = "EAGLE3") -> tuple[str, ...]:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", target]
    if aux:
        argv += ["--enable-return-aux-hidden-states", "--speculative-algorithm", algorithm]
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
    from ...draft.family import draft_family
    from ...kinds import kind

    if any(draft_family(kind(k)).blocks for k in conv.draft_kinds):  # a block kind's convention (draft/family.py)
        return _block_serving(draft_config, target, port, conv)
    wiring = conv.resolve(draft_config, target.architecture, target.num_layers)
    eagle = draft_config.get("eagle_config")
    if isinstance(eagle, Mapping) and eagle.get("use_aux_hidden_state", True) is False:
        # spec_aux_hidden_state.py:188-190: no aux capture; the draft is fed the final post-norm state
        argv = _sglang_argv(target.path, None, port, aux=False)
        return Launch("serving", argv, Capture("sglang", (State(target.num_layers, normed=True),), target.hidden_size),
                      ("eagle_config.use_aux_hidden_state is false: serving feeds the final post-norm state, which "
                       "--enable-return-hidden-states returns",))
    if wiring.unsupported or wiring.failure:
        return _cannot_serve(wiring, target)
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


def _cannot_serve(wiring, target: TargetShape) -> Launch:
    """No serving line: SGLang refuses this draft on the target (the wiring says why)."""
    why = wiring.unsupported or wiring.failure.text()
    return Launch("serving", (), None, (f"SGLang cannot serve this draft on {target.architecture}: {why}",))


def _block_serving(draft_config: Mapping[str, Any], target: TargetShape, port: int, conv: Convention) -> Launch:
    """The capture-only line of a DFlash / DSpark draft: ``--speculative-algorithm DFLASH`` (``DSPARK``) with the ids
    serving hands ``set_dflash_layers_to_capture`` (``set_dspark_layers_to_capture``), which the capture-only mode
    requires explicitly for these algorithms and hands to the same setter (``validation_hook.py:697-753``,
    ``attention_backend_setup.py:40-72``): the ids as the convention reads them, or its default (SGLang's
    ``build_target_layer_ids``) written out, checked to resolve to the very states serving feeds."""
    from ...conventions import ID_PLACES, draft_layer_count
    from ... import expr

    kind = next(iter(conv.draft_kinds))
    algorithm = ALGORITHMS.get(kind, kind.upper())
    wiring = conv.resolve(draft_config, target.architecture, target.num_layers)
    if wiring.unsupported or wiring.failure:
        return _cannot_serve(wiring, target)
    ids, place, _ = conv.read_draft_ids(draft_config)
    notes = []
    if ids is None:
        rule = conv.rule_for(target.architecture)
        ids = tuple(int(v) for v in expr.evaluate(rule.default_ids, N=target.num_layers,
                                                   D=draft_layer_count(draft_config)))
        place = conv.reads()[0].place
        notes.append(f"the draft names no ids: serving takes SGLang's default {rule.default_ids} = {list(ids)}, "
                     f"which the capture-only mode needs written out for {algorithm}")
    written = dict(draft_config)
    keys = ID_PLACES[place]
    node = written
    for key in keys[:-1]:
        node[key] = dict(node.get(key) or {})
        node = node[key]
    node[keys[-1]] = list(ids)
    check = conv.resolve(written, target.architecture, target.num_layers)
    line_ids = tuple(dict.fromkeys(ids))
    refused = _capture_only_ok(line_ids, target.num_layers)
    if check.states != wiring.states or refused:
        why = refused or f"ids {list(ids)} capture {', '.join(s.label() for s in check.states)}"
        return Launch("serving", (), None, (
            f"serving captures {', '.join(s.label() for s in wiring.states)}, but no capture-only line does: {why}; "
            "use the reference line",))
    cap = Capture("sglang", tuple(wiring.states), target.hidden_size, line_ids, role="serving")
    return Launch("serving", _sglang_argv(target.path, line_ids, port, algorithm=algorithm), cap, tuple(notes))


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


#: draft kind -> SGLang's --speculative-algorithm (``srt/speculative/spec_info.py:39-43`` SpeculativeAlgorithm,
#: upper case): EAGLE3 loads a DFlash or DSpark draft (``models/dflash.py:671``, ``models/dspark.py:967``) under the
#: EAGLE worker, whose ``init_lm_head`` calls ``set_embed`` on it (``speculative/eagle_worker_v2.py:352-363``), a
#: method neither class has: refused at start-up
ALGORITHMS = {"dflash": "DFLASH", "dspark": "DSPARK"}


def sglang_speculative(target: str, draft: str, num_steps: int = 3, port: int = PORT,
                       draft_config: Mapping[str, Any] | None = None) -> Launch:
    """SGLang serving the draft with speculative decoding: what `accept-rate --server` measures (docs/server.md,
    "How to start each engine"). The algorithm follows the draft's kind (:data:`ALGORITHMS`, else ``EAGLE3``;
    ``draft_config`` defaults to the draft directory's ``config.json``). EAGLE-3: a chain, ``--speculative-eagle-topk
    1`` with ``num_steps + 1`` draft tokens (topk 1 forces that count, ``arg_groups/speculative_hook.py:1255-1266``).
    A block draft gets no ``--speculative-num-steps`` / ``--speculative-eagle-topk``: SGLang forces both to 1 for
    DFLASH and DSPARK (``:336-377``, ``:757-794``). DFLASH verifies ``--speculative-num-draft-tokens`` = the draft's
    ``block_size`` (what SGLang infers from the draft config when the flag is absent, ``:389-423``, 16 when the
    draft declares none); DSPARK's is left to SGLang, which takes the draft's gamma + 1 (``:798-850``) and refuses
    any other count (``:826-836``)."""
    from ...draft.block import read_block
    from ...kinds import detect
    from ..vllm.launch import _draft_config

    cfg = _draft_config(draft) if draft_config is None else draft_config
    kind = detect(cfg)
    algorithm = ALGORITHMS.get(kind.name, "EAGLE3")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", target, "--speculative-algorithm", algorithm,
            "--speculative-draft-model-path", draft]
    notes = []
    if algorithm == "EAGLE3":
        argv += ["--speculative-num-steps", str(num_steps), "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", str(num_steps + 1)]
    else:
        try:
            block = read_block(cfg, str(draft))
        except AuditError:
            block = None
        size = block.block_size if block is not None else None
        if algorithm == "DSPARK":
            notes.append("--speculative-num-draft-tokens left to SGLang: a DSpark draft's is its gamma + 1, read from "
                         "the draft config (arg_groups/speculative_hook.py:798-836; 8 when it declares none, :815-822); "
                         "num_steps and topk are 1 (:757-794)")
        elif size is not None and size > 1:
            argv += ["--speculative-num-draft-tokens", str(size)]
            if size - 1 != num_steps:
                notes.append(f"--speculative-num-draft-tokens {size}: the draft's block_size (SGLang verifies "
                             f"[bonus, {size - 1} drafts]); not {num_steps} steps (SGLang forces num_steps to 1 for "
                             "DFLASH, arg_groups/speculative_hook.py:336-348)")
        else:
            argv += ["--speculative-num-draft-tokens", str(num_steps + 1)]
            notes.append(f"the draft declares no block_size: --speculative-num-draft-tokens {num_steps + 1} (SGLang "
                         "would take 16, arg_groups/speculative_hook.py:415-421; give the block the draft was "
                         "trained on)")
    argv += ["--port", str(port)]
    return Launch("speculative", tuple(argv), None, tuple(notes))
