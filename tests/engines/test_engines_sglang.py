"""The SGLang client against a test server that answers as SGLang 0.5.23 does (tests/served/sglang_server.py:
the wheel's parser, capture-only validation, setters, capture loop, packing, appending and cutting, run from
the wheel; the states from a tiny float32 Llama). Every launch line the tool prints is accepted by the wheel's
parser and validation, and captures what the tool says; faults injected in the server are found with the
right code on the right slot, or refused with one line; never misread."""

from __future__ import annotations

import pytest

from tests.served.served_tiny import HIDDEN, N_LAYERS, prompts
from eagle_audit.engines.http import BadServerReply
from eagle_audit.engines.options import ServerOptions
from eagle_audit.served.compare import compare_slots, served_findings
from eagle_audit.engines.sglang.states import read_sglang_states
from eagle_audit.engines.sglang.launch import sglang_reference, sglang_serving
from eagle_audit.served.compare import local_boundaries, thresholds_for
from eagle_audit.engines.launch import TargetShape
from eagle_audit.states import State
from tests.engine_wheels.sglang_engine import ARCHS
from tests.served.sglang_server import FakeSGLang, Faults, serving

pytestmark = pytest.mark.usefixtures("one_thread")

FP32 = thresholds_for("float32", "float32")  # the test server and the local capture both compute in float32

DRAFTS = {
    "no ids": {}, "OUT-k": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    "IN-k": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 3, 4]}},
    "first id 0": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 5]}},
    "repeated": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 1, 4]}},
    "negative": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 2, 4]}},
    "top level only": {"eagle_aux_hidden_state_layer_ids": [0, 2, 4]},
}


def _labels(launch) -> tuple[str, ...]:
    return tuple(s.label() for s in launch.capture.states)


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("n", [8, 32])
def test_every_line_is_accepted_by_the_wheel_and_captures_what_it_says(sglang_pieces, sglang_capture, arch, n):
    target = TargetShape("/models/target", arch, n, HIDDEN)
    lines = [sglang_reference(target)] + [sglang_serving(d, target) for d in DRAFTS.values()]
    for name, launch in zip(["reference", *DRAFTS], lines):
        if launch.capture is None:  # no capture-only line can reproduce serving: said, and why
            assert launch.notes and not launch.argv, name
            continue
        assert launch.argv[:3] == ("python", "-m", "sglang.launch_server")
        ns = sglang_pieces.parse(list(launch.argv[3:]))
        declared = sglang_pieces.validate_capture(ns, n)
        assert declared == {"speculative_algorithm": None, "aux_hidden_state_capture": "eagle3"}, name
        assert ns.chunked_prefill_size == -1 and ns.model_path == "/models/target"
        run = sglang_capture.run(arch, n, ns.return_aux_hidden_state_layer_ids)
        assert run.failed_at is None, (name, run)
        got = tuple(lab if lab.startswith("B") else f"B{int(lab[6:]) + 1}" for lab in run.captured)  # gemma branch<j>
        assert got == _labels(launch), (name, launch.line)
    for name, draft in DRAFTS.items():  # the serving line captures what serving this draft feeds
        launch = sglang_serving(draft, target)
        use_aux, ids = sglang_capture.resolve_ids(draft)
        served = sglang_capture.run(arch, n, ids)
        if launch.capture is None or served.failed_at:
            continue
        got = tuple(lab if lab.startswith("B") else f"B{int(lab[6:]) + 1}" for lab in served.captured)
        assert got == _labels(launch), (name, arch)


def test_a_line_the_engine_refuses_is_refused_here(sglang_pieces):
    with pytest.raises(ValueError, match="non-negative"):
        sglang_pieces.validate_capture(sglang_pieces.parse(
            ["--model-path", "m", "--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3",
             "--return-aux-hidden-state-layer-ids", "-1", "2"]), 8)
    with pytest.raises(SystemExit):
        sglang_pieces.parse(["--model-path", "m", "--no-such-flag"])


def test_negative_serving_ids_have_no_capture_only_line():
    launch = sglang_serving(DRAFTS["negative"], TargetShape("t", "LlamaForCausalLM", 8, HIDDEN))
    assert launch.capture is None and "negative ids" in launch.notes[0]


def test_reference_line_names_what_it_cannot_reach():
    launch = sglang_reference(TargetShape("t", "LlamaForCausalLM", 8, HIDDEN))
    assert _labels(launch) == tuple(f"B{k}" for k in range(1, 8))
    assert {s.label() for s in launch.unreachable} == {"B0", "B8"}
    assert any("embedding" in n for n in launch.notes)
    deep = sglang_reference(TargetShape("t", "DeepseekV3ForCausalLM", 8, HIDDEN))
    assert _labels(deep) == tuple(f"B{k}" for k in range(0, 8))


# ----------------------------------------------------------------------------- the test server


def _server(pieces, capture, target_path, launch, faults=Faults()):
    return FakeSGLang(pieces, capture, list(launch.argv[3:]), target_path, "LlamaForCausalLM", faults)


@pytest.fixture(scope="module")
def shape(served_target):
    return TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN)


@pytest.fixture(scope="module")
def local(served_target):
    from eagle_audit.target import load_target

    return load_target(str(served_target), dtype="float32")


def _read(url, launch, ps, n=1):
    return read_sglang_states(ServerOptions(url, "sglang", timeout=60, deadline=120), ps, launch.capture,
                              max_new_tokens=n)


def test_clean_server_states_equal_the_local_capture_exactly(sglang_pieces, sglang_capture, served_target, shape,
                                                             local):
    launch = sglang_reference(shape)
    ps = prompts(3) + [prompts(1)[0]]  # the same prompt twice: its own extra_key, no prefix hit
    with serving(_server(sglang_pieces, sglang_capture, served_target, launch)) as url:
        got = _read(url, launch, ps, n=4)
    assert [g.states.shape for g in got] == [(len(p) + 3, launch.capture.slots, HIDDEN) for p in ps]
    base = local_boundaries(local, got, launch.capture.states)
    for i, s in enumerate(launch.capture.states):
        import numpy as np

        assert np.array_equal(np.concatenate([g.slot(i) for g in got]), base[s])  # float32 through JSON: exact
    matches = compare_slots([g.states for g in got], base, launch.capture.states, *FP32)
    assert [m.verdict for m in matches] == ["ok"] * launch.capture.slots
    assert served_findings(matches, "SGLang", url) == ()


FAULTS = {
    "partial sums, 2 ranks": (Faults(partial=(1, 2)), 1, "ENGINE_STATE_MISMATCH"),
    "partial sums, 8 ranks": (Faults(partial=(3, 8)), 3, "ENGINE_STATE_MISMATCH"),
    "zeroed slot": (Faults(zero=2), 2, "ENGINE_STATE_MISMATCH"),
    "one boundary deeper": (Faults(deeper=1), 1, "ENGINE_STATE_SHIFTED"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_state_faults_are_found_on_their_slot(sglang_pieces, sglang_capture, served_target, shape, local, fault):
    faults, slot, code = FAULTS[fault]
    launch = sglang_serving(DRAFTS["OUT-k"], shape)  # B2 B3 B4, as serving captures
    launch = sglang_reference(shape) if slot >= launch.capture.slots else launch
    with serving(_server(sglang_pieces, sglang_capture, served_target, launch, faults)) as url:
        got = _read(url, launch, prompts(3))
    everything = [State(k) for k in range(N_LAYERS + 1)]
    matches = compare_slots([g.states for g in got], local_boundaries(local, got, everything), launch.capture.states,
                             *FP32)
    findings = served_findings(matches, "SGLang", url)
    assert [(f.code, f.slot) for f in findings] == [(code, slot)], [m.to_json() for m in matches]
    if code == "ENGINE_STATE_SHIFTED":
        want = launch.capture.states[slot]
        assert matches[slot].matched == State(want.boundary + 1)
        assert f"serves B{want.boundary + 1} where its rules say {want.label()}" in findings[0].what


def test_two_swapped_slots_are_both_shifted(sglang_pieces, sglang_capture, served_target, shape, local):
    launch = sglang_serving(DRAFTS["OUT-k"], shape)
    with serving(_server(sglang_pieces, sglang_capture, served_target, launch, Faults(swap=(0, 2)))) as url:
        got = _read(url, launch, prompts(2))
    everything = [State(k) for k in range(N_LAYERS + 1)]
    matches = compare_slots([g.states for g in got], local_boundaries(local, got, everything), launch.capture.states,
                             *FP32)
    assert [(m.verdict, m.matched) for m in matches] == [("shifted", State(4)), ("ok", State(3)), ("shifted", State(2))]


@pytest.mark.parametrize("chunk", [2, 3, 7])
def test_chunked_prefill_at_odd_places_is_refused_never_misread(sglang_pieces, sglang_capture, served_target, shape,
                                                                 chunk):
    launch = sglang_reference(shape)
    argv = list(launch.argv[3:])
    argv[argv.index("--chunked-prefill-size") + 1] = str(chunk)
    fake = FakeSGLang(sglang_pieces, sglang_capture, argv, served_target, "LlamaForCausalLM")
    with serving(fake) as url, pytest.raises(BadServerReply, match=r"the first \d+ are missing \(chunked prefill"):
        _read(url, launch, [prompts(3)[2]], n=3)  # 11 tokens: chunks of 2, 3, 7 all leave a remainder


def test_a_chunk_longer_than_the_prompt_reads_whole(sglang_pieces, sglang_capture, served_target, shape):
    launch = sglang_reference(shape)
    argv = list(launch.argv[3:])
    argv[argv.index("--chunked-prefill-size") + 1] = "64"
    with serving(FakeSGLang(sglang_pieces, sglang_capture, argv, served_target, "LlamaForCausalLM")) as url:
        assert _read(url, launch, prompts(3))[2].states.shape[0] == len(prompts(3)[2])


@pytest.mark.parametrize("hide", [False, True])
def test_a_prefix_cache_hit_is_refused_never_misread(sglang_pieces, sglang_capture, served_target, shape, hide):
    launch = sglang_reference(shape)
    first = prompts(1)[0]
    fake = _server(sglang_pieces, sglang_capture, served_target, launch, Faults(ignore_extra_key=True, hide_cached=hide))
    why = "chunked prefill" if hide else "radix-cache prefix hit of 4 tokens"
    with serving(fake) as url:
        _read(url, launch, [first])
        with pytest.raises(BadServerReply, match=rf"prompt 0\): \d+ prompt states for 9 prompt tokens: .*{why}"):
            _read(url, launch, [first[:4] + [7, 8, 9, 10, 11]])


@pytest.mark.parametrize("faults, message", [
    (Faults(cut_at=0.5), r"ended|closed mid-reply"),
    (Faults(drop_decode=1), r"the reply ends early: 2 decoded-token states for 4 output tokens"),
    (Faults(extra_slot=True), rf"row 0 holds {6 * HIDDEN} floats, expected {5 * HIDDEN} \(= 5 slots x {HIDDEN}\)"),
])
def test_short_or_wrong_replies_are_one_line(sglang_pieces, sglang_capture, served_target, shape, faults, message):
    launch = sglang_reference(shape)
    with serving(_server(sglang_pieces, sglang_capture, served_target, launch, faults)) as url:
        with pytest.raises(BadServerReply, match=message) as e:
            _read(url, launch, prompts(1), n=4)
    assert "\n" not in str(e.value)
