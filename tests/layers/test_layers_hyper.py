"""The audit of EAGLE-3 drafts for a hyper-connection target end to end, on a tiny random DeepSeek-V4 (8 layers,
4 streams): what vLLM 0.33.0 / 0.34.0 feeds (the mean over the streams, ids 1..N: probes/vllm.json
``deepseek_v4_mhc``), SGLang 0.5.23's refusal, a slot trained on one stream and served the mean
(STREAM_MISMATCH), and every command (layers, accept-rate, fingerprint, check) running on it."""

import pytest

from eagle_audit.states import State
from tests.hyper import save_tiny_v4

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def v4(tmp_path_factory, make_tokenizer):
    return save_tiny_v4(tmp_path_factory.mktemp("v4") / "v4", layers=8, streams=4, tokenizer=make_tokenizer())


def _codes(res):
    return {(f.code, f.slot) for f in res.findings}


def test_vllm_feeds_the_means_of_its_default_ids(audit, make_draft, v4):
    res = audit(v4, make_draft(nested_ids=[1, 3, 4]), engine="vllm", trained_boundaries="2,4,5")
    assert res.served.states == (State(2), State(4), State(5))  # [2, N//2, N-3], each the mean of 4 streams
    assert not [f for f in res.findings if f.severity == "error"]
    assert all(s.cosine == pytest.approx(1.0) for s in res.slots)


def test_one_stream_trained_the_mean_served_is_a_finding_of_its_own(audit, make_draft, v4):
    res = audit(v4, make_draft(nested_ids=[1, 3, 4]), engine="vllm", trained_boundaries="2.s0,4,5.mix")
    assert res.trained.states == (State(2, stream="s0"), State(4), State(5, stream="mix"))
    assert {("STREAM_MISMATCH", 0), ("STREAM_MISMATCH", 2)} <= _codes(res)
    assert not any(c == "LAYER_OFFSET" for c, _ in _codes(res))
    text = next(f for f in res.findings if f.code == "STREAM_MISMATCH").what
    assert "B2.s0 (stream 0 of the output of layer 1)" in text and "mean of the 4 hyper-connection streams" in text


def test_vllm_never_captures_id_0(audit, make_draft, v4):
    res = audit(v4, make_draft(top_level_ids=[0, 3, 8]), engine="vllm", trained_boundaries="0,3,8")
    assert ("UNREACHABLE_LAYER", 0) in _codes(res)


def test_sglang_has_no_eagle3_capture_for_deepseek_v4(audit, make_draft, v4):
    res = audit(v4, make_draft(nested_ids=[1, 3, 4]), engine="sglang", trained_boundaries="2,4,5")
    assert any(c == "ENGINE_UNSUPPORTED" for c, _ in _codes(res))


@pytest.mark.parametrize("command", ["layers"] + [pytest.param(c, marks=pytest.mark.full)
                                                  for c in ("accept-rate", "fingerprint", "check")])
def test_every_command_runs_on_a_hyper_connection_target(cli, make_draft, v4, command):
    """No internal error on any command (exit 3); the random draft's verdicts are what they are."""
    draft = make_draft(nested_ids=[1, 3, 4])
    extra = ("--trained-boundaries", "2.s0,4,5") if command in ("layers", "accept-rate") else ()
    r = cli("-t", v4, "-d", draft, "-e", "vllm", "--max-prompts", "1", *extra, command=command)
    assert r.exit_code in (0, 1), r.output
    if command == "layers":
        assert "STREAM_MISMATCH" in r.output


@pytest.mark.full
def test_a_canary_trained_on_one_stream_is_served_the_mean(cli, v4, tmp_path):
    """A tiny canary trained on stream 0 of B2, B4, B5 (seconds): its record names the views, and vLLM's default
    ids serve their means: STREAM_MISMATCH on every slot, and accept-rate simulates both wirings."""
    import json

    out = tmp_path / "canary"
    r = cli("-t", v4, "--boundaries", "2.s0,4.s0,5.s0", "--out", out, "--max-prompts", "4", "--max-new-tokens", "16",
            "--epochs", "2", "--draft-vocab", "64", "--threads", "1", command="train-canary")
    assert r.exit_code == 0, r.output
    record = json.loads((out / "config.json").read_text())["eagle_audit_canary"]
    assert record["trained_states"] == ["B2.s0", "B4.s0", "B5.s0"]
    r = cli("-t", v4, "-d", out, "-e", "vllm", "--max-prompts", "1", "--json", "-")
    assert r.exit_code == 1
    found = json.loads(r.stdout)["findings"]
    assert sorted(f["slot"] for f in found if f["code"] == "STREAM_MISMATCH") == [0, 1, 2]
    r = cli("-t", v4, "-d", out, "-e", "vllm", "--max-prompts", "1", command="accept-rate")
    assert r.exit_code in (0, 1) and "B2.s0, B4.s0, B5.s0" in r.output, r.output


# ------------------------------------------------------------------------------------------- a field case
#: SyzygyResearch/DeepSeek-V4-Flash-EAGLE3.1 as llama.cpp PR #27040 quotes its config.json (ids nested under
#: eagle_config, none at the top level) on DeepSeek-V4-Flash (43 layers). The sizes below are the tiny target's,
#: not the published draft's (its config is used as quoted; the draft's widths follow the tiny target).
V4_FLASH_LAYERS = 43


@pytest.fixture(scope="module")
def v4_flash(tmp_path_factory):
    """A config-only tiny DeepSeek-V4 with DeepSeek-V4-Flash's layer count and the published draft's config."""
    import json

    from tests.hyper import HIDDEN, VOCAB, tiny_v4_config

    root = tmp_path_factory.mktemp("v4-flash")
    tiny_v4_config(layers=V4_FLASH_LAYERS).save_pretrained(root / "target")
    (root / "draft").mkdir()
    (root / "draft" / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": HIDDEN,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 64,
        "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "rms_norm_eps": 1e-6,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 21, 40], "use_aux_hidden_state": True}}))
    return root / "target", root / "draft"


@pytest.mark.parametrize("engine", ["vllm", "vllm@0.34.0", "vllm@0.25.0"])
def test_deepseek_v4_flash_eagle3_1_nested_ids_are_not_read_by_vllm(audit, v4_flash, engine):
    """llama.cpp PR #27040's case under vLLM: the nested ids are not read (vLLM's V2 reader takes the top level,
    not eagle_config's eagle_aux_hidden_state_layer_ids), so the default [2, 21, 40] is captured, each the mean of
    the 4 streams; trained as the draft's first id 1 says (output of layer 1, SpecForge's convention, assumed
    without --trainer), slots 1 and 2 are one layer shallower, and the proven fix writes the top-level ids
    [2, 22, 41]. vLLM serves EAGLE-3 on DeepSeek-V4 from 0.25.0 (the release data)."""
    target, draft = v4_flash
    res = audit(target, draft, engine=engine, static=True)
    assert res.served.states == (State(2), State(21), State(40))
    assert res.trained.states == (State(2), State(22), State(41))
    codes = _codes(res)
    assert ("IDS_NOT_READ", None) in codes and {("LAYER_OFFSET", 1), ("LAYER_OFFSET", 2)} <= codes
    fix = res.fix
    assert fix.possible and fix.patch == {"eagle_aux_hidden_state_layer_ids": [2, 22, 41]}, fix
    assert "re-audited" in fix.proof
    # the trained side is the trainer's rule read as means: what its own capture handed fc is unknown (a warning)
    assert any(n.startswith("trainer streams:") and "concatenates the streams unreduced" in n for n in res.provenance["notes"])


def test_deepseek_v4_flash_eagle3_1_has_no_capture_on_sglang(audit, v4_flash):
    """SGLang 0.5.23 has no set_eagle3_layers_to_capture for DeepseekV4ForCausalLM (it serves DSpark only): no
    config fix exists there, said as such."""
    target, draft = v4_flash
    res = audit(target, draft, engine="sglang", static=True)
    assert any(c == "ENGINE_UNSUPPORTED" for c, _ in _codes(res))
    assert res.fix is not None and not res.fix.possible
