"""End-to-end ``run_layers`` scenarios on tiny real architectures: verdict, finding codes, fix.

Capture runs (non-static) use the targets' tiny byte-level tokenizer with 2 prompts x 32 tokens;
``static=True`` is used where only the configs matter.
"""

import pytest

from eagle_audit.errors import BadCheckpoint
from eagle_audit.states import State

pytestmark = pytest.mark.usefixtures("one_thread")

NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
TOP = "eagle_aux_hidden_state_layer_ids"


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def slot_codes(result, code):
    return [f.slot for f in result.findings if f.code == code]


def labels(states):
    return [s.label() for s in states]


# ---------------------------------------------------------------------------- a. match


@pytest.mark.parametrize("key, ids, trained", [
    ("llama", None, [2, 4, 5]),  # no ids: SpecForge's [1, N//2-1, N-4] +1 == SGLang's default [2, N//2, N-3]
    ("llama", [1, 3, 4], [2, 4, 5]),  # the formula written out
    ("llama", [0, 3, 6], [1, 4, 7]),
    ("deepseek_v3", [1, 29, 57], [2, 30, 58]),  # the shipped DeepSeek-V3 config: ids[0] == 1, so +1
    ("qwen3_moe", [0, 1, 2], [1, 2, 3]),
    ("gpt_oss", [1, 2, 3], [2, 3, 4]),
    ("qwen3_vl", [0, 1, 2], [1, 2, 3]),
])
def test_specforge_draft_served_by_sglang_matches(tiny_targets, make_draft, audit, key, ids, trained):
    r = audit(tiny_targets[key], make_draft(nested_ids=ids))
    assert r.verdict == "match"
    assert codes(r, "error") == []
    assert r.fix is None
    assert labels(r.trained.states) == labels(r.served.states) == [f"B{b}" for b in trained]
    assert [s.verdict for s in r.slots] == ["ok"] * 3
    # capture ran: each slot's served state is its trained state, so cosine 1 and nearest = itself
    for s in r.slots:
        assert s.cosine == pytest.approx(1.0, abs=1e-5)
        assert s.nearest == s.trained
    n = tiny_targets[key].num_layers
    assert len(r.heatmap.states) == n + 2 and len(r.heatmap.rows) == 3
    assert r.provenance["num_prompts"] == 2 and 0 < r.provenance["tokens"] <= 64
    assert "trainer not given: assumed specforge from the draft's sglang layout" in r.provenance["notes"]


# ---------------------------------------------------------------------------- b, c. vLLM


def test_specforge_draft_under_vllm_v1_is_one_layer_shallower(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4]), engine="vllm-v1")
    assert r.verdict == "mismatch"
    assert codes(r) == ["LAYER_OFFSET"] * 3
    assert slot_codes(r, "LAYER_OFFSET") == [0, 1, 2]
    assert [s.verdict for s in r.slots] == ["offset -1"] * 3
    assert all(s.cosine < 0.9999 and s.nearest == s.trained for s in r.slots)
    assert r.fix.possible and (r.fix.key, r.fix.ids) == (TOP, (2, 4, 5))
    assert r.fix.patch == {TOP: [2, 4, 5]}
    assert r.fix.resolved == r.trained.states


def test_nested_ids_are_not_read_by_vllm_v2(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[0, 2, 5]), engine="vllm", static=True)
    assert r.verdict == "mismatch"
    assert codes(r) == ["IDS_NOT_READ", "LAYER_OFFSET", "LAYER_OFFSET", "LAYER_OFFSET"]
    assert [f.severity for f in r.findings] == ["error"] * 4
    assert labels(r.trained.states) == ["B1", "B3", "B6"]
    assert labels(r.served.states) == ["B2", "B4", "B5"] and r.served.ids_source == "default"
    assert r.fix.patch == {TOP: [1, 3, 6]} and r.fix.key == TOP
    assert r.heatmap is None and r.provenance["static"] is True and r.provenance["tokens"] == 0


# ---------------------------------------------------------------------------- d. DeepSeek


def test_deepseek_embedding_draft_fix_uses_the_verbatim_branch(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["deepseek_v3"], make_draft(nested_ids=[2, 30, 58]), trained_boundaries="0,3,31")
    assert r.verdict == "mismatch"
    assert r.target["first_k_dense_replace"] == 3 and r.target["num_layers"] == 61
    assert r.served.rule == "deepseek_first_id" and labels(r.served.states) == ["B2", "B30", "B58"]
    assert slot_codes(r, "EMBEDDING_COMPOSITION") == [0]
    assert slot_codes(r, "LAYER_OFFSET") == [1, 2]
    assert "IDS_NOT_READ" not in codes(r)
    assert r.slots[0].nearest == State(0)
    # ids[0] != 1 selects DeepSeek's verbatim branch: [0, 3, 31], not the +1 inverse [-1, 2, 30]
    assert r.fix.possible and r.fix.ids == (0, 3, 31) and r.fix.key == NESTED
    assert r.fix.resolved == (State(0), State(3), State(31))


def test_same_trained_boundaries_on_a_llama_rule_target(config_only_target, make_draft, audit):
    target = config_only_target("LlamaForCausalLM", 61)
    r = audit(target, make_draft(nested_ids=[2, 30, 58]), trained_boundaries="0,3,31", static=True)
    assert labels(r.served.states) == ["B3", "B31", "B59"]
    assert slot_codes(r, "EMBEDDING_COMPOSITION") == [0]
    assert r.fix.ids == (-1, 2, 30) and "Id -1 addresses the embedding output" in r.fix.explanation


# ---------------------------------------------------------------------------- e. the final boundary


def test_gpt_oss_final_boundary_is_served_verbatim(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["gpt_oss"], make_draft(nested_ids=[2, 4, 6]), trained_boundaries="2,4,N")
    assert r.verdict == "match" and codes(r, "error") == []
    assert r.served.rule == "gpt_oss_boundary" and r.served.case == "explicit ids, verbatim if max(ids) == N"
    assert labels(r.served.states) == ["B2", "B4", "B6"]
    # B6 is the pre-norm output of the last layer, which is what was captured, not HF's post-norm state
    assert r.slots[2].cosine == pytest.approx(1.0, abs=1e-5)
    assert r.heatmap.states[-2] == State(6) and r.heatmap.rows[2][-2] == pytest.approx(1.0, abs=1e-4)


def test_an_id_past_the_loop_is_unreachable_on_llama(tiny_targets, make_draft, audit):
    # SpecForge 0.2.0 captures through the same SGLang loop: it could not have trained on B8 either
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 7]), static=True)
    assert codes(r) == ["UNREACHABLE_LAYER", "AUX_COUNT_MISMATCH"] and r.trained.dropped == (8,)
    # the removed HF backend did train on B8
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 7]), trainer="specforge-hf", static=True)
    assert r.verdict == "mismatch"
    assert codes(r) == ["UNREACHABLE_LAYER"] and slot_codes(r, "UNREACHABLE_LAYER") == [2]
    assert r.served.dropped == (8,)
    assert not r.fix.possible and "captures only boundaries 0..7" in r.fix.explanation


# ---------------------------------------------------------------------------- f. top-level ids under SGLang


def test_top_level_ids_under_sglang(tiny_targets, make_draft, audit):
    # as speculators 0.9.0 writes it: the decoder's model_type in transformer_layer_config only
    layer = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 64}
    r = audit(tiny_targets["llama"], make_draft(top_level_ids=[1, 3, 6], speculators=True,
                                                extra={"transformer_layer_config": layer}))
    assert "trainer not given: assumed speculators from the draft's speculators layout" in r.provenance["notes"]
    assert r.verdict == "mismatch" and codes(r)[0] == "IDS_NOT_READ"
    assert r.served.ignored_places == ("top_level",)
    # SGLang 0.5.23 registers no Eagle3Speculator: the fix names the class it is audited with, so SGLang loads it
    # and copies model_type to the top level, where that class's AutoConfig reads it (else DRAFT_CONFIG_KEY)
    assert r.fix.patch == {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 2, 5]}}
    assert "set architectures to 'LlamaForCausalLMEagle3'" in r.fix.explanation and r.fix.proof
    # when SGLang's default happens to be what was trained, it is only a warning
    r = audit(tiny_targets["llama"], make_draft(top_level_ids=[2, 4, 5]), trainer="speculators", static=True)
    assert r.verdict == "match" and [(f.code, f.severity) for f in r.findings] == [("IDS_NOT_READ", "warning")]
    assert r.fix is None


# ---------------------------------------------------------------------------- g, h. draft-side failures


def test_one_slot_draft_skips_fc(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["qwen3_moe"], make_draft(n_aux=1, nested_ids=[2]))
    assert r.verdict == "mismatch" and codes(r, "error") == ["FC_SKIPPED"]
    assert codes(r, "warning") == ["TRAINER_REFUSES_IDS"]  # the assumed SpecForge 0.2.0 takes exactly three ids
    assert [s.verdict for s in r.slots] == ["ok"]
    assert not r.fix.possible and "already feeds the trained states" in r.fix.explanation


def test_reduced_vocab_without_d2t(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(with_d2t=False), static=True)
    assert r.verdict == "mismatch" and codes(r, "error") == ["VOCAB_MAP_MISSING"]
    assert not r.fix.possible


def test_absolute_ids_in_d2t(tiny_targets, make_draft, audit):
    import torch

    used = torch.arange(128) * 2 + 256

    def absolute(sd):  # d2t holds the target ids themselves instead of offsets
        sd["d2t"], sd["t2d"] = used.clone(), torch.zeros(512, dtype=torch.bool).index_fill_(0, used, True)

    r = audit(tiny_targets["llama"], make_draft(edit=absolute), static=True)
    assert codes(r, "error") == ["VOCAB_MAP_INVALID"]
    assert "outside the target vocab 0..511 (absolute ids stored where offsets are expected?)" in r.findings[0].what


# ---------------------------------------------------------------------------- i. order, norm, counts, hidden size


def test_unsorted_specforge_ids_under_sglang(tiny_targets, make_draft, audit):
    # SpecForge 0.2.0 captures through SGLang's own loop: layer order on both sides, nothing to find
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[6, 1, 3]), trainer="specforge", static=True)
    assert r.verdict == "match" and codes(r) == []
    assert labels(r.trained.states) == labels(r.served.states) == ["B2", "B4", "B7"]
    # the removed HF-hook backend concatenated in config order
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[6, 1, 3]), trainer="specforge-hf", static=True)
    assert codes(r) == ["ORDER_MISMATCH"]
    assert labels(r.trained.states) == ["B7", "B2", "B4"] and labels(r.served.states) == ["B2", "B4", "B7"]
    assert not r.fix.possible and "permute the column blocks of fc.weight" in r.fix.explanation


def test_deepseek_ids_not_starting_at_1_specforge_under_sglang(tiny_targets, make_draft, audit):
    # both sides keep DeepSeek ids verbatim unless ids[0] == 1 (SpecForge 0.2.0 captures through SGLang's setter)
    r = audit(tiny_targets["deepseek_v3"], make_draft(nested_ids=[2, 30, 58]), trainer="specforge", static=True)
    assert r.verdict == "match" and codes(r) == []
    assert labels(r.trained.states) == labels(r.served.states) == ["B2", "B30", "B58"]


@pytest.mark.parametrize("flag, where", [
    ("norm_output", "the hidden carried to the next draft step (draft steps >= 1)"),
    ("norm_before_fc", "the norm over fc's whole input"),
])
def test_specforge_norm_flags_served_by_sglang(tiny_targets, make_draft, audit, flag, where):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4], extra={flag: True}), trainer="specforge",
              static=True)
    assert codes(r) == ["NORM_MISMATCH"]
    (f,) = r.findings
    assert where in f.what
    if flag == "norm_output":  # SpecForge norms only before lm_head; SGLang carries the normed hidden
        assert "training carries the pre-norm hidden" in f.what and "carries the normed hidden" in f.what
        assert f.fix == "Set norm_output = false in config.json." and r.fix.patch["norm_output"] is False
    else:  # SpecForge has no input_norm: SGLang would apply a norm training never saw
        assert "training used False, SGLang 0.5.23 uses True" in f.what
        assert f.fix == "Set norm_before_fc = false in config.json."


def test_an_unknown_trainer_version_says_whose_facts_it_used(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4]), trainer="specforge@0.1.0", static=True)
    assert r.verdict == "match"
    assert any("SpecForge 0.1.0 is not a version eagle-audit knows: used the facts of SpecForge 0.2.0" in n
               for n in r.provenance["notes"])
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4]), trainer="specforge@0.2.0", static=True)
    assert any("capturing through sglang 0.5.14" in n for n in r.provenance["notes"])


def test_semantic_differences_are_measured_when_the_target_is_loaded(tiny_targets, make_draft, audit):
    # one aux state whose width is the draft's: trained with fc (speculators applies it), served without (SGLang)
    r = audit(tiny_targets["llama"], make_draft(n_aux=1, nested_ids=[3]), trained_boundaries="4", trainer="speculators")
    (f,) = [f for f in r.findings if f.code == "FC_SKIPPED"]
    assert "Measured on the audit prompts" in f.what and f.what.count("%") == 3
    assert "at draft steps 0 / 1 / 2" in f.what
    static = audit(tiny_targets["llama"], make_draft(n_aux=1, nested_ids=[3]), trained_boundaries="4",
                   trainer="speculators", static=True)
    assert "Measured" not in [f for f in static.findings if f.code == "FC_SKIPPED"][0].what


def test_trained_on_the_post_norm_state(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 6]), trained_boundaries="2,4,final")
    assert codes(r) == ["NORM_MISMATCH"] and slot_codes(r, "NORM_MISMATCH") == [2]
    assert r.slots[2].trained == State(8, normed=True) and r.slots[2].served == State(7)
    assert r.slots[2].nearest != State(8, normed=True)  # the post-norm state is never servable
    assert not r.fix.possible and "never applies the final norm" in r.fix.explanation


def test_norm_before_residual_under_sglang(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4], extra={"norm_before_residual": True}),
              trained_boundaries="2,4,5", static=True)
    assert r.verdict == "mismatch" and codes(r) == ["NORM_MISMATCH"]
    assert "norm_before_residual" in r.findings[0].what
    assert not r.fix.possible


def test_num_aux_disagrees_with_fc(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4], extra={"num_aux_hidden_states": 2}), static=True)
    assert codes(r) == ["AUX_COUNT_MISMATCH"]
    assert r.fix.possible and r.fix.patch["num_aux_hidden_states"] == 3


def test_draft_hidden_differs_without_target_hidden_size(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(hidden=48, nested_ids=[1, 3, 4], drop=("target_hidden_size",)),
              static=True)
    assert codes(r) == ["HIDDEN_SIZE_MISMATCH"]
    assert r.fix.possible and r.fix.patch["target_hidden_size"] == 32


# ---------------------------------------------------------------------------- options


def test_trained_ids_override_the_config(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4]), trainer="specforge", trained_ids=(0, 2, 5),
              static=True)
    assert r.trained.ids_source == "override" and labels(r.trained.states) == ["B1", "B3", "B6"]
    assert r.fix.ids == (0, 2, 5)


def test_tokenizerless_target_needs_static(tiny_targets, make_draft, audit):
    with pytest.raises(BadCheckpoint, match="the target has no tokenizer .* checked before its weights load"):
        audit(tiny_targets["qwen3"], make_draft(nested_ids=[0, 1, 2]))
    assert audit(tiny_targets["qwen3"], make_draft(nested_ids=[0, 1, 2]), static=True).verdict == "match"


def test_no_scan_captures_only_the_needed_states(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["deepseek_v3"], make_draft(nested_ids=[2, 30, 58]), trained_boundaries="0,3,31", scan=False)
    assert r.heatmap is None
    # nearest is searched among the captured states only (trained and served), and the trained one wins
    assert [s.nearest for s in r.slots] == [State(0), State(3), State(31)]
    assert all(s.cosine < 0.9999 for s in r.slots)


def test_a_canary_record_is_the_trained_wiring(tiny_targets, make_draft, audit):
    """train-canary records the true wiring; layers reads it before guessing a trainer from the layout."""
    t = tiny_targets["llama"]  # N = 8
    record = {"eagle_audit_canary": {"trained_boundaries": [0, 3, 5]}}
    ok = audit(t, make_draft(nested_ids=[-1, 2, 4], extra=record), static=True)
    assert ok.verdict == "match" and ok.trained.ids_source == "boundaries"
    assert labels(ok.trained.states) == ["B0", "B3", "B5"]
    assert any("canary record" in n for n in ok.provenance["notes"])
    # the same canary with its ids left at the default: SGLang feeds [2, 4, 5], the record says [0, 3, 5]
    bad = audit(t, make_draft(extra=record), static=True)
    assert bad.verdict == "mismatch" and codes(bad, "error")[:1] == ["EMBEDDING_COMPOSITION"]
    assert bad.fix.patch == {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 2, 4]}}
