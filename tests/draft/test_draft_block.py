"""DFlash and DSpark drafts (issue 17): reading, the conventions picked for them, and `layers` on them, with the
published cases as regression tests (ids, engine, expected states). Static audits over config-only targets; the
engines' and trainers' own code that these rules stand for runs in tests/engine_wheels/test_block_engine.py and
tests/trainers/test_block_trainers.py.

Drafts are written as their trainers write them: z-lab ``dflash`` / SpecForge / modelopt (``DFlashDraftModel``,
``dflash_config.target_layer_ids``, ``block_size``, ``num_target_layers``; modelopt's
``export/plugins/hf_spec_export.py:359-370``), speculators (``speculators_model_type: dflash``,
``aux_hidden_state_layer_ids``, ``transformer_layer_config``), DSpark (``dspark_target_layer_ids`` /
``dspark_config``, ``markov_rank``); weights ``fc.weight`` [hidden, n x hidden], ``hidden_norm``, ``norm``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from eagle_audit.draft.block import convention_for, draft_kind, read_block
from eagle_audit.draft.family import family_facts
from eagle_audit.conventions import get_convention
from eagle_audit.draft.read import read_draft
from eagle_audit.errors import AuditError
from eagle_audit.states import State

H = 32


@pytest.fixture
def block_draft(tmp_path):
    """``block_draft(n_slots, **config)``: a DFlash-family draft directory as its trainer writes it."""
    counter = iter(range(1000))

    def make(n_slots: int, layout: str = "zlab", **config) -> Path:
        base = dict(hidden_size=H, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                    rms_norm_eps=1e-6, model_type="qwen3")
        if layout == "zlab":
            base.update(architectures=["DFlashDraftModel"], num_hidden_layers=n_slots, block_size=16)
        elif layout == "speculators":
            base = {"architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash", "block_size": 8,
                    "draft_vocab_size": 512, "mask_token_id": 3, "transformer_layer_config": {**base, "num_hidden_layers": 1},
                    "speculators_config": {"algorithm": "dflash", "verifier": {"name_or_path": "tiny"}}}
        base.update(config)
        path = tmp_path / f"draft{next(counter)}"
        path.mkdir()
        (path / "config.json").write_text(json.dumps(base))
        save_file({"fc.weight": torch.zeros(H, n_slots * H), "hidden_norm.weight": torch.ones(H),
                   "norm.weight": torch.ones(H)}, str(path / "model.safetensors"))
        return path

    return make


def static(audit, target, draft, engine, **kw):
    return audit(target, draft, engine=engine, static=True, **kw)


def states(wiring) -> list[str]:
    return [s.label() for s in wiring.states]


def codes(result) -> set[str]:
    return {f.code for f in result.findings}


# ---------------------------------------------------------------------------- reading


def test_kinds_and_what_a_config_declares():
    assert draft_kind({"architectures": ["LlamaForCausalLMEagle3"]}) == "eagle3"
    assert draft_kind({"architectures": ["DFlashDraftModel"], "dflash_config": {}}) == "dflash"
    assert draft_kind({"architectures": ["MuseGlimmerAssistantModel"]}) == "dflash"
    assert draft_kind({"speculators_model_type": "dflash"}) == "dflash"
    assert draft_kind({"architectures": ["Qwen3DSparkModel"]}) == "dspark"
    assert draft_kind({"architectures": ["DFlashDraftModel"], "dspark_target_layer_ids": [1, 5]}) == "dspark"
    b = read_block({"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "block_size": 16,
                    "num_target_layers": 36, "dflash_config": {"target_layer_ids": [1, 9], "block_size": 8},
                    "eagle_aux_hidden_state_layer_ids": [2, 10]}, "config.json")
    assert (b.kind, dict(b.ids), b.num_draft_layers, b.block_size, b.num_target_layers) == (
        "dflash", {"dflash_target_layer_ids": (1, 9)}, 5, 8, 36)  # dflash_config.block_size wins, as SGLang reads it
    assert dict(b.eagle_ids) == {"top_level": (2, 10)}
    assert family_facts({"architectures": ["X"]}, "c") is None  # an EAGLE-3 config: its family reads nothing more


def test_draft_spec_and_json_carry_the_kind(block_draft):
    d = read_draft(str(block_draft(5, dflash_config={"target_layer_ids": [1, 9, 17, 25, 33]})))
    assert (d.kind, d.layout, d.aux_count(H)) == ("dflash", "dflash", 5)  # the slot count from fc.weight
    j = d.to_json()
    assert j["kind"] == "dflash" and j["block"]["ids"] == {"dflash_config.target_layer_ids": [1, 9, 17, 25, 33]}
    s = read_draft(str(block_draft(3, layout="speculators", aux_hidden_state_layer_ids=[2, 18, 33])))
    assert (s.kind, s.layout, s.hidden_size) == ("dflash", "speculators", H)


def test_a_malformed_id_list_is_one_line_naming_the_file(block_draft):
    with pytest.raises(AuditError, match=r"config.json: dflash_config.target_layer_ids must be a list of integers"):
        read_draft(str(block_draft(2, dflash_config={"target_layer_ids": "1,2"})))


def test_each_pipeline_has_its_block_convention():
    assert convention_for(get_convention("sglang", "engine"), "dflash").name == "sglang-dflash"
    assert convention_for(get_convention("sglang", "engine"), "dspark").name == "sglang-dspark"
    assert convention_for(get_convention("vllm", "engine"), "dspark").name == "vllm-dflash"
    assert convention_for(get_convention("modelopt", "trainer"), "dflash").name == "modelopt-dflash"
    with pytest.raises(AuditError, match="has no rules for dflash drafts"):
        convention_for(get_convention("trtllm", "engine"), "dflash")


# ---------------------------------------------------------------------------- published cases


def test_vllm_pr_40727_dflash_ids_get_plus_one(config_only_target, block_draft, audit):
    """vLLM PR #40727: DFlash ids are HF hidden_states[k + 1]; vLLM adds +1 (before: verbatim, one layer short,
    mt-bench accept length 3.92-4.03 -> 4.11-4.16 with the fix)."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(5, dflash_config={"target_layer_ids": [1, 9, 17, 25, 33]})
    for engine in ("vllm", "sglang"):
        r = static(audit, target, draft, engine)
        assert states(r.served) == ["B2", "B10", "B18", "B26", "B34"] == states(r.trained), engine
        assert r.verdict == "match"
    # a speculators DFlash draft: the loader maps aux ids to top-level EAGLE-3 ids, read verbatim (IN-k)
    spec = block_draft(3, layout="speculators", aux_hidden_state_layer_ids=[2, 18, 33])
    r = static(audit, target, spec, "vllm")
    assert r.served.ids_source == "aux_hidden_state_layer_ids" and states(r.served) == ["B2", "B18", "B33"]
    assert r.trained.convention == "speculators-dflash" and r.verdict == "match"


def test_default_count_follows_the_draft_depth_in_sglang_but_is_three_in_vllm(config_only_target, block_draft, audit):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(5, dflash_config={"mask_token_id": 3})  # no ids anywhere: each engine's default
    r = static(audit, target, draft, "sglang")
    assert states(r.served) == ["B2", "B10", "B18", "B26", "B34"]  # build_target_layer_ids(36, 5) + 1
    assert r.verdict == "match"  # the z-lab default is the same formula
    r = static(audit, target, draft, "vllm")
    assert states(r.served) == ["B2", "B18", "B33"]  # the target model's EAGLE-3 default, verbatim
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")
    assert "ValueError" in crash.what and "expects 5" in crash.what and "received 3" in crash.what


def test_dflash_id_minus_one_is_the_embedding_in_vllm_and_rejected_by_sglang(config_only_target, block_draft, audit):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(3, dflash_config={"target_layer_ids": [-1, 17, 33]})
    r = static(audit, target, draft, "vllm")
    assert states(r.served) == ["B0", "B18", "B34"] == states(r.trained)  # z-lab: hidden_states[0], the embedding
    r = static(audit, target, draft, "sglang")
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")
    assert "ValueError" in crash.what and "out-of-range" in crash.what and "start-up" in crash.what
    assert r.fix is not None and r.fix.possible is False


def test_sglang_ignores_dspark_config_target_layer_ids(config_only_target, block_draft, audit):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(3, architectures=["Qwen3DSparkModel"], markov_rank=8,
                        dspark_config={"target_layer_ids": [3, 20, 30]})
    r = static(audit, target, draft, "sglang", trained_boundaries="4,21,31")
    assert r.served.convention == "sglang-dspark" and r.served.ids_source == "default"
    assert states(r.served) == ["B2", "B18", "B34"]  # build_target_layer_ids(36, 3) + 1, not the dspark_config ids
    ignored = next(f for f in r.findings if f.code == "IDS_NOT_READ")
    assert "dspark_config.target_layer_ids" in ignored.what
    # the fix writes the ids where SGLang reads them
    assert r.fix.possible and r.fix.key == "dspark_target_layer_ids" and list(r.fix.ids) == [3, 20, 30]
    assert [s.label() for s in r.fix.resolved] == ["B4", "B21", "B31"]


def test_a_draft_the_v1_runner_refuses_stops_at_config_validation(config_only_target, block_draft, audit):
    """probes/vllm-v1-dflash.json ``refuses``: the V1 runner refuses a DSpark draft in VllmConfig's validation, before
    it loads the target: the finding says so, not that it crashed setting capture layers; an id crash keeps its
    wording."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    r = static(audit, target, block_draft(3, architectures=["Qwen3DSparkModel"], markov_rank=8), "vllm-v1")
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")
    assert "Model Runner V1 does not support: dspark speculative decoding at config validation" in crash.what
    assert "whatever its ids" in crash.what and "capture layers" not in crash.what.split("(")[0]
    r = static(audit, target, block_draft(3, dflash_config={"target_layer_ids": [-1, 17, 33]}), "sglang")
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")
    assert "at start-up, while it sets the capture layers" in crash.what and "config validation" not in crash.what


def test_vllm_reads_dspark_ids_verbatim_for_deepseek_v41_only(config_only_target, block_draft, audit):
    target = config_only_target("LlamaForCausalLM", 36, "llama")
    for model_type, served in (("deepseek_v41", ["B1", "B17", "B33"]), ("qwen3", ["B2", "B18", "B34"])):
        draft = block_draft(3, architectures=["Qwen3DSparkModel"], model_type=model_type,
                            dspark_target_layer_ids=[1, 17, 33])
        r = static(audit, target, draft, "vllm", trained_boundaries="2,18,34")
        assert states(r.served) == served, model_type


def test_sglang_feeds_dspark_deepseek_v4_the_stream_means_its_ids_name(config_only_target, block_draft, audit):
    """SGLang 0.5.23 deepseek_v4.py:4203-4212: before layer i runs ("the attention input of its target layers"),
    the mean over the mHC streams entering layer i (Bi on a hyper-connection target); ids verbatim (:4861)."""
    target = config_only_target("DeepseekV4ForCausalLM", 36, "deepseek_v4")
    draft = block_draft(3, architectures=["DSparkDraftModel"], dspark_target_layer_ids=[1, 17, 33])
    r = static(audit, target, draft, "sglang-dspark", trained_boundaries="1,17,33")
    assert states(r.served) == ["B1", "B17", "B33"] and r.verdict == "match", codes(r)


def test_hf_id_n_minus_1_is_the_post_norm_state_sglang_cannot_serve(config_only_target, block_draft, audit):
    """NeMo Automodel PR #3083: in an HF-convention trainer, id N-1 is hidden_states[N], after the final norm."""
    draft = block_draft(3, dflash_config={"target_layer_ids": [1, 17, 35]})
    r = static(audit, config_only_target("Qwen3ForCausalLM", 36, "qwen3"), draft, "sglang", trainer="modelopt")
    assert r.trained.convention == "modelopt-dflash" and states(r.trained) == ["B2", "B18", "B36+norm"]
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")  # capture index 36 is past SGLang's Qwen3 loop:
    assert "feature dim mismatch" in crash.what and "[2, 18, 36]" in crash.what  # 2 states reach fc's 3 planes
    assert r.fix.possible is False and "final norm" in r.fix.explanation
    r = static(audit, config_only_target("GptOssForCausalLM", 36, "gpt_oss"), draft, "sglang", trainer="dflash")
    assert states(r.served)[-1] == "B36" and "NORM_MISMATCH" in codes(r)  # GPT-OSS captures B36, but pre-norm


def test_speculators_705_an_appended_final_id_gives_one_plane_more_than_fc(config_only_target, block_draft, audit):
    """speculators #705 (GLM-5.2 DFlash: the appended N gives 6 planes where the draft has 5): vLLM sizes the DFlash
    fc for every id it reads, so ids that carry the verifier's N do not fit the trained fc."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(5, layout="speculators", aux_hidden_state_layer_ids=[2, 10, 18, 26, 33, 36])
    r = static(audit, target, draft, "vllm", trained_boundaries="2,10,18,26,33")
    counts = [f.what for f in r.findings if f.code == "AUX_COUNT_MISMATCH"]
    assert any("sizes the draft's fc for 6" in w and "holds 5" in w for w in counts), counts
    # the converter itself adds +1 and drops the id whose aux would be N (tests/trainers/test_block_trainers.py)
    converted = block_draft(2, layout="speculators", aux_hidden_state_layer_ids=[2, 18])
    assert static(audit, target, converted, "vllm").verdict == "match"


def test_sglang_nvfp4_layout_check_compares_the_eagle_ids_of_a_mixed_config(config_only_target, block_draft, audit):
    """A mixed config names its states twice: SGLang's Nemotron 3.5 check (dflash_utils.py:470-496) expects
    eagle_aux_hidden_state_layer_ids == target_layer_ids + 1; vLLM reads the top-level EAGLE-3 ids first."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    same = block_draft(3, dflash_config={"target_layer_ids": [1, 17, 33]}, eagle_aux_hidden_state_layer_ids=[2, 18, 34])
    r = static(audit, target, same, "vllm")
    assert r.served.ids_source == "top_level" and states(r.served) == ["B2", "B18", "B34"]
    assert "BLOCK_IDS_DISAGREE" not in codes(r) and r.verdict == "match"
    off = block_draft(3, dflash_config={"target_layer_ids": [1, 17, 33]}, eagle_aux_hidden_state_layer_ids=[1, 17, 33])
    r = static(audit, target, off, "vllm")
    assert states(r.served) == ["B1", "B17", "B33"] and "LAYER_OFFSET" in codes(r)
    f = next(f for f in r.findings if f.code == "BLOCK_IDS_DISAGREE")
    assert f.severity == "error" and "[2, 18, 34]" in f.fix
    r = static(audit, target, off, "sglang")  # SGLang reads the DFlash ids only: served right, the mismatch a warning
    assert r.verdict == "match" and states(r.served) == ["B2", "B18", "B34"]
    assert next(f for f in r.findings if f.code == "BLOCK_IDS_DISAGREE").severity == "warning"


def test_sglang_muse_drafts_get_another_plus_one_on_muse_glimmer(config_only_target, block_draft, audit):
    target = config_only_target("MuseGlimmerForCausalLM", 36, "muse_glimmer")
    legacy = block_draft(2, dflash_config={"target_layer_ids": [2, 18]})  # DFlashDraftModel: layer-input ids
    assert states(static(audit, target, legacy, "sglang", trained_boundaries="2,18").served) == ["B2", "B18"]
    muse = block_draft(2, architectures=["MuseGlimmerAssistantModel"], dflash_config={"target_layer_ids": [1, 17]})
    assert states(static(audit, target, muse, "sglang", trained_boundaries="2,18").served) == ["B2", "B18"]


def test_sglang_qwen3_moe_raises_at_start_up_on_id_n_minus_1(config_only_target, block_draft, audit):
    draft = block_draft(2, dflash_config={"target_layer_ids": [1, 35]})
    r = static(audit, config_only_target("Qwen3MoeForCausalLM", 36, "qwen3_moe"), draft, "sglang")
    crash = next(f for f in r.findings if f.code == "ENGINE_CRASH")
    assert "IndexError" in crash.what and "index 36" in crash.what


def test_an_architecture_without_dflash_capture_is_engine_unsupported(config_only_target, block_draft, audit):
    draft = block_draft(2, dflash_config={"target_layer_ids": [1, 17]})
    r = static(audit, config_only_target("Glm4ForCausalLM", 36, "glm4"), draft, "sglang")
    assert "ENGINE_UNSUPPORTED" in codes(r) and "set_dflash_layers_to_capture" in r.served.unsupported


def test_the_fix_for_each_engine_feeds_the_trained_states(config_only_target, block_draft, audit):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(3, dflash_config={"target_layer_ids": [2, 18, 34]})
    for engine in ("sglang", "vllm"):
        r = static(audit, target, draft, engine, trained_boundaries="2,18,34")
        assert r.fix.possible, engine
        assert [s.label() for s in r.fix.resolved] == ["B2", "B18", "B34"], engine
        assert r.fix.key == "dflash_config.target_layer_ids" and list(r.fix.ids) == [1, 17, 33]


def test_accept_rate_and_fingerprint_refuse_block_drafts_in_one_line(cli, config_only_target, block_draft):
    """accept-rate simulates DFlash and DSpark drafting (tests/accept/test_accept_block.py) with SpecForge's Markov
    heads; fingerprint runs DFlash drafts (tests/fingerprint/test_fingerprint_dflash.py) and DSpark drafts with them;
    both refuse, before loading anything, another head, another layout, DFlash2, and a DFlash draft whose block they
    cannot build (no mask token)."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    dflash = block_draft(2, dflash_config={"target_layer_ids": [1, 17]})
    dspark = block_draft(2, architectures=["Qwen3DSparkModel"], dspark_target_layer_ids=[1, 17],
                         dflash_config={"mask_token_id": 3, "markov_rank": 8, "markov_head_type": "prefix_gru"})
    dflash2 = block_draft(2, architectures=["DFlash2DraftModel"], dflash_config={"mask_token_id": 3})
    spec = block_draft(2, layout="speculators", aux_hidden_state_layer_ids=[2, 18], sample_from_anchor=True)
    spec_dspark = block_draft(2, layout="speculators", speculators_model_type="dspark", aux_hidden_state_layer_ids=[2, 18])
    for command, draft, said in (("accept-rate", dspark, "Markov heads (vanilla, gated, rnn"),
                                 ("fingerprint", dflash, "no mask_token_id"),
                                 ("fingerprint", dspark, "Markov heads (vanilla, gated, rnn"),
                                 ("fingerprint", dflash2, "candidate selector"),
                                 ("fingerprint", spec, "sample_from_anchor: true"),
                                 ("accept-rate", spec, "sample_from_anchor: true"),
                                 ("fingerprint", spec_dspark, "DSpark draft in the speculators layout")):
        res = cli("-t", target, "-d", draft, command=command)
        assert res.exit_code == 2 and said in res.stderr and "Traceback" not in res.output, res.output
        assert len(res.stderr.strip().splitlines()) <= 2


def test_a_default_over_the_draft_s_layer_count_without_one_is_one_line(cli, config_only_target, block_draft):
    """SGLang's DFlash default ids are an expression over the draft's own layer count D (top-level or text_config
    num_hidden_layers); a speculators-layout config keeps its layers in transformer_layer_config, which SGLang's
    reader does not look in: one line naming the config, exit 2 (it was "D is not available here in expression",
    no file). vLLM reads the layout's own ids and audits it."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(2, layout="speculators", aux_hidden_state_layer_ids=[2, 18])
    res = cli("-t", target, "-d", draft, "--static", "--engine", "sglang", command="layers")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert f"{draft}/config.json" in res.stderr and "own layer count" in res.stderr, res.stderr
    res = cli("-t", target, "-d", draft, "--static", "--engine", "vllm", command="layers")
    assert res.exit_code in (0, 1) and "ids [2, 18]" in res.output, res.output


def test_layers_json_has_the_draft_kind(cli, config_only_target, block_draft):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = block_draft(2, architectures=["Qwen3DSparkModel"], dspark_target_layer_ids=[1, 17])
    res = cli("-t", target, "-d", draft, "--static", "--json", "-", "--builtin-rules")
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    assert data["draft"]["kind"] == "dspark" and data["served"]["convention"] == "sglang-dspark"
    assert [s["boundary"] for s in data["served"]["states"]] == [2, 18]
    assert State(2).label() == "B2"


def test_layers_on_a_tiny_target_measures_the_slots(tiny_targets, block_draft, audit):
    """With the target loaded, the states are captured: a z-lab draft served as trained has cosine 1 in every
    slot; id N-1 (trained on the post-norm state) served pre-norm by vLLM is a norm mismatch."""
    tiny = tiny_targets["llama"]  # N = 8
    ok = audit(tiny.path, block_draft(2, dflash_config={"target_layer_ids": [0, 4]}), engine="sglang")
    assert states(ok.served) == ["B1", "B5"] and ok.verdict == "match"
    assert all(abs(s.cosine - 1.0) < 1e-4 for s in ok.slots)
    last = audit(tiny.path, block_draft(2, dflash_config={"target_layer_ids": [0, 7]}), engine="vllm")
    assert states(last.trained) == ["B1", "B8+norm"] and states(last.served) == ["B1", "B8"]
    # the cosine is measured; a random target's final RMSNorm has unit weight, so it only rescales (cosine ~1):
    # the mismatch is the scale, which the cosine does not show and the finding does
    assert last.slots[1].verdict == "norm" and last.slots[1].cosine is not None and "NORM_MISMATCH" in codes(last)
