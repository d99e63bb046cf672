"""`check --server`: the served stage against the SGLang 0.5.23 test server of tests/served (built from the
wheel's pieces, states from the same tiny transformers target): a clean server matches, a server whose slot
is one boundary deeper is ENGINE_STATE_SHIFTED on that slot, shown by the served stage; the served stage runs
no forward of its own (the captured stage's states, from the source's memo)."""


import pytest

from eagle_audit.engines.options import Server
from eagle_audit.check.run import CheckOptions, run_check

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def sglang_parts(sglang_wheel, tmp_path_factory):
    from tests.engine_wheels.sglang_engine import EngineRun
    from tests.served.sglang_pieces import SGLangPieces

    return SGLangPieces(sglang_wheel, tmp_path_factory.mktemp("sglang-src")), EngineRun(sglang_wheel)


def _check(target, draft, url, **kw):
    return run_check(CheckOptions(target=str(target), draft=str(draft), use_installed_engine=False, max_prompts=2,
                                  max_tokens=16, max_new_tokens=6, trained_boundaries="2,4,6",
                                  states_server=Server(url, "sglang", timeout=60, deadline=120), **kw))


@pytest.mark.parametrize("fault", ["clean", "deeper"])
def test_served_stage_finds_what_the_engine_feeds(sglang_parts, tiny_targets, make_draft, fault):
    from eagle_audit.engines.sglang.launch import sglang_serving
    from eagle_audit.engines.launch import TargetShape
    from tests.served.sglang_server import FakeSGLang, Faults, serving

    t = tiny_targets["llama"]
    draft = make_draft(nested_ids=[1, 3, 5])  # SGLang feeds B2 B4 B6
    import json

    config = json.loads((draft / "config.json").read_text())
    launch = sglang_serving(config, TargetShape(str(t), t.architecture, t.num_layers, t.hidden_size))
    pieces, engine = sglang_parts
    faults = Faults(deeper=1) if fault == "deeper" else Faults()
    fake = FakeSGLang(pieces, engine, list(launch.argv[3:]), str(t), t.architecture, faults)
    with serving(fake) as url:
        r = _check(t, draft, url)
    st = r.stage("served")
    assert st.ran, st.why
    assert st.result.expected == launch.capture.states and "ids [1, 3, 5]" in st.result.launch
    assert st.result.requests == 2
    c = r.source["counts"]
    # 2 prompts (captured) + 2 prompt+continuation (accept-rate); the served stage's 2 from the memo
    assert c["forwards"] == 4 and c["memo_hits"] >= 2 and c["loads"] == 1
    if fault == "clean":
        assert [m.verdict for m in st.result.matches] == ["ok"] * 3 and st.verdict == "match"
        assert r.verdict.status == "match" and r.verdict.problems == ()
    else:
        codes = [(f.code, f.slot) for f in st.result.errors]
        assert codes == [("ENGINE_STATE_SHIFTED", 1)]
        p, = [p for p in r.verdict.problems if p.code == "ENGINE_STATE_SHIFTED"]
        assert p.slot == 1 and p.shown_by == ("served",) and r.verdict.sure == "served"
        assert r.verdict.status == "mismatch"


def test_a_server_that_cannot_be_reached_stops_the_check_before_the_target_loads(tiny_targets, make_draft, monkeypatch):
    """Issue 43: refused at once (exit 2 at the CLI), not after the target loaded and every state was captured."""
    import eagle_audit.target as target_mod
    from eagle_audit.engines.http import ServerError

    def never(*a, **kw):
        raise AssertionError("the target was loaded")

    monkeypatch.setattr(target_mod, "load_target", never)
    with pytest.raises(ServerError, match="127.0.0.1:9"):
        _check(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 5]), "http://127.0.0.1:9")


def test_no_weights_every_stage_from_the_server(sglang_parts, make_draft, tmp_path):
    """A target directory of config + tokenizer (+ the embedding shard) and a reference server: the stages ask
    the server backend for every state (eagle_audit/source/server.py) and give the local check's verdicts."""
    from eagle_audit.engines.sglang.launch import sglang_reference
    from eagle_audit.engines.launch import TargetShape
    from tests.served.served_tiny import HIDDEN, N_LAYERS, without_weights, write_target
    from tests.served.sglang_server import FakeSGLang, serving

    target = write_target(tmp_path / "target")
    bare = without_weights(target, tmp_path / "bare")
    draft = make_draft(nested_ids=[1, 2, 3])
    pieces, engine = sglang_parts
    launch = sglang_reference(TargetShape(str(target), "LlamaForCausalLM", N_LAYERS, HIDDEN))
    opts = dict(use_installed_engine=False, max_prompts=2, max_tokens=16, max_new_tokens=6, trained_boundaries="2,3,4",
                dtype="float32")
    local = run_check(CheckOptions(target=str(target), draft=str(draft), **opts))
    with serving(FakeSGLang(pieces, engine, list(launch.argv[3:]), target, "LlamaForCausalLM")) as url:
        r = run_check(CheckOptions(target=str(bare), draft=str(draft),
                                   states_server=Server(url, "sglang", timeout=60, deadline=120), **opts))
        # --states-from server beside weights: every state from the server, the weights never loaded (the choice
        # reaches the check: source.states_from decides for every command)
        chosen = run_check(CheckOptions(target=str(target), draft=str(draft),
                                        states_server=Server(url, "sglang", timeout=60, deadline=120, use="server"),
                                        **opts))
    assert chosen.source["spec"]["backend"] == "server", chosen.source
    assert "`states_from='server'` chosen" in chosen.source["spec"]["origin"]
    assert r.source["spec"]["backend"] == "server"
    assert r.stage("served").why.startswith("every state came from the server")
    cap, ref = r.stage("captured"), local.stage("captured")
    assert cap.ran, cap.why
    assert cap.verdict == ref.verdict
    assert [(f.code, f.slot) for f in cap.result.findings] == [(f.code, f.slot) for f in ref.result.findings]
    acc, ref_acc = r.stage("accept_rate"), local.stage("accept_rate")
    assert acc.ran, acc.why  # continuations and teacher-forced states from the server, the draft run here
    for side in ("trained", "served"):
        assert acc.result.al(side) == pytest.approx(ref_acc.result.al(side), abs=1e-9)
    assert r.verdict.status == local.verdict.status
