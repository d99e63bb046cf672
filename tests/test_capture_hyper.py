"""Capture of a hyper-connection (mHC) target's views (docs/coordinate.md) on tiny random DeepSeek-V4 targets,
against transformers' own ``output_hidden_states`` ([batch, tokens, streams, hidden] per boundary) and the
model's own hyper-connection modules, bit for bit."""

import pytest
import torch

from eagle_audit.capture import capture, capture_states, hooks_left, run_forward
from eagle_audit.errors import AuditError
from eagle_audit.states import MIX, State, all_states, parse_states, stream_states
from eagle_audit.target import load_target, target_info
from tests.hyper import save_tiny_v4

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def v4(tmp_path_factory):
    return load_target(str(save_tiny_v4(tmp_path_factory.mktemp("v4") / "v4", layers=4, streams=4)))


def _ids(seed=0):
    return torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(seed))


def test_info_counts_the_streams(v4, tmp_path):
    info = target_info(str(v4.info.source))
    assert (info.streams, info.num_layers, info.model_type) == (4, 4, "deepseek_v4")
    assert v4.stack.streams == 4 and info.to_json()["streams"] == 4


@torch.inference_mode()
def test_every_view_equals_transformers(v4):
    n, ids = 4, _ids()
    out = v4.model(input_ids=ids, output_hidden_states=True, use_cache=False)
    hf = out.hidden_states  # [batch, tokens, 4, hidden] for k < N, [N] post-norm [batch, tokens, hidden]
    pre_head = {}
    h = v4.model.model.hc_head.register_forward_pre_hook(lambda m, a: pre_head.setdefault("x", a[0]))
    try:
        v4.model(input_ids=ids, use_cache=False)
    finally:
        h.remove()
    before = hooks_left(v4.model)  # transformers' own output_hidden_states leaves hooks of its own
    caps = capture_states(v4, ids, all_states(n) + stream_states(n, 4))
    assert hooks_left(v4.model) == before
    for k in range(n):
        assert torch.equal(caps[State(k)], hf[k].mean(dim=2)), k
        for i in range(4):
            assert torch.equal(caps[State(k, stream=f"s{i}")], hf[k][:, :, i])
        assert torch.equal(caps[State(k, stream=MIX)], v4.stack.layers[k].attn_hc(hf[k])[-1])
    assert torch.equal(caps[State(n)], pre_head["x"].mean(dim=2))  # BN: the streams before the hyper-head
    assert torch.equal(caps[State(n, stream="s3")], pre_head["x"][:, :, 3])
    assert torch.equal(caps[State(n, True)], hf[n]) and torch.equal(caps[State(n, True)], out.hidden_states[n])
    assert torch.equal(caps[State(0)], v4.model.get_input_embeddings()(ids))  # B0: 4 copies of the embedding


@torch.inference_mode()
@pytest.mark.parametrize("states", [[State(1, stream=MIX)], [State(2, stream="s0"), State(2, stream=MIX)],
                                    [State(3), State(2, stream=MIX)], [State(2, stream="s1")]])
def test_an_early_stop_still_captures_every_view(v4, states):
    ids, before = _ids(1), hooks_left(v4.model)
    full = capture_states(v4, ids, states, stop_early=False)
    early = capture_states(v4, ids, states)
    assert set(early) == set(states) and all(torch.equal(early[s], full[s]) for s in states)
    assert hooks_left(v4.model) == before


def test_a_view_that_does_not_exist_is_one_line(v4, tiny_targets):
    before = hooks_left(v4.model)
    with pytest.raises(AuditError, match=r"B1\.s4: this target has 4 hyper-connection streams \(s0\.\.s3\)"):
        with capture(v4.stack, [State(1, stream="s4")]):
            pass
    with pytest.raises(ValueError, match="B4.mix does not exist"):
        with capture(v4.stack, [State(4, stream=MIX)]):
            pass
    assert hooks_left(v4.model) == before
    llama = load_target(str(tiny_targets["llama"].path))
    with pytest.raises(AuditError, match=r"B3\.s0 names a hyper-connection view; this target has a single residual"):
        capture_states(llama, torch.tensor([[1, 2]]), [State(3, stream="s0")])
    assert hooks_left(llama.model) == 0


def test_views_parse_and_print():
    got = parse_states("0, 3.s1, B3.mix, 2.mean, N, final", 4)
    assert got == (State(0), State(3, stream="s1"), State(3, stream=MIX), State(2), State(4), State(4, True))
    assert [s.label() for s in got] == ["B0", "B3.s1", "B3.mix", "B2", "B4", "B4+norm"]
    assert parse_states(",".join(s.label() for s in got), 4) == got  # labels parse back
    for bad, why in (("3.x", "the view after the dot"), ("4.mix", "layer 4 does not exist"),
                     ("final.s0", "post-norm state has no stream view"), ("4+norm.mix", "post-norm state has no stream view")):
        with pytest.raises(AuditError, match=why):
            parse_states(bad, 4)
    assert State(3, stream="s0").to_json() == {"boundary": 3, "normed": False, "label": "B3.s0", "stream": "s0"}
    assert State(3).to_json() == {"boundary": 3, "normed": False, "label": "B3"}  # single-stream JSON unchanged
    assert State(3).describe(4, streams=4) == "mean of the 4 hyper-connection streams of the output of layer 2"
    with pytest.raises(AuditError):
        State(3, stream="t1")
    with pytest.raises(AuditError):
        State(4, True, "s0")


def test_run_forward_with_hooks_removes_them(v4):
    before = hooks_left(v4.model)
    with capture(v4.stack, [State(2, stream=MIX)]) as store:
        run_forward(v4.model, input_ids=_ids(), use_cache=False)
    assert store[State(2, stream=MIX)].shape == (2, 9, 32) and hooks_left(v4.model) == before


def test_a_hyper_connection_type_transformers_lacks_is_one_line(v4, tmp_path):
    """DeepSeek-V4.1 (vLLM 0.34.0 serves it; no transformers release builds it): refused in one line, exit 2."""
    import json

    from pathlib import Path

    cfg = json.loads((Path(v4.info.source) / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "deepseek_v41",
                                                      "architectures": ["DeepseekV41ForCausalLM"]}))
    with pytest.raises(AuditError, match=r"DeepSeek-V4\.1 \(model_type deepseek_v41\) is not in the installed "
                                         r"transformers [0-9.]+: it cannot build this hyper-connection target") as e:
        target_info(str(tmp_path))
    assert "\n" not in e.value.message and e.value.exit_code == 2
