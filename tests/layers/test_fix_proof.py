"""A fix is proven before it is offered (eagle_audit/layers/reaudit.py, fix.py): its fixed copy, audited again with
the same engine release and trainer, the original trained states pinned, is a match; the count key goes where the
engine's loader reads it; a fix is a fixed point; a release without a config fix names the first later one with
one (issue 42 items 1, 2, 8; issue 41 item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle_audit import audit_layers, write_fixed_config
from eagle_audit.conventions import Wiring, get_convention
from eagle_audit.draft.read import read_draft
from eagle_audit.errors import AuditError
from eagle_audit.layers.fix import plan_fix
from eagle_audit.layers.result import Fix, merge_patch
from eagle_audit.resolution import FIX_KEY, Resolution, given_side, side_of
from eagle_audit.states import State
from eagle_audit.target import TargetInfo

LLAMA, DSV3 = "LlamaForCausalLM", "DeepseekV3ForCausalLM"


def states(*bs):
    return tuple(State(b) for b in bs)


def given(draft, trained):
    return given_side(Wiring("user", "trainer", "-", "given", None, "boundaries", "test", tuple(trained),
                             states(*trained)), draft, None)


def test_merge_patch_is_rfc7386():
    """RFC 7386 section 3's cases that a plain dict.update (and the earlier merge) got wrong."""
    assert merge_patch({"a": "b"}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}  # nulls inside a new object
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}  # arrays replace
    assert merge_patch({"a": "foo"}, "bar") == "bar"
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    config = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "use_aux_hidden_state": True}}
    fix = Fix("sglang", True, "x", {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31]}})
    assert fix.apply(config) == {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31],
                                                  "use_aux_hidden_state": True}}
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    with pytest.raises(ValueError, match="no config change fixes this"):
        Fix("sglang", False, "why").apply(config)


def test_a_fix_whose_copy_is_still_a_mismatch_is_not_offered(make_draft):
    """The ids alone would make SGLang feed the trained states, but the draft's reduced vocabulary has no d2t: the
    fixed copy re-audits as a mismatch, so no fix is offered, with the one line why."""
    draft = read_draft(str(make_draft(nested_ids=[0, 1, 2], with_d2t=False)))
    res = Resolution(given(draft, (2, 4, 5)), side_of(get_convention("sglang", "engine"), draft.config, LLAMA, 8),
                     LLAMA, 8)
    target = TargetInfo("tiny", "", LLAMA, "llama", 8, 32, 512, "")
    fix = plan_fix(res, draft, 32, target)
    assert not fix.possible and fix.patch == {}
    assert fix.explanation.startswith("No config fix on SGLang 0.5.23: none is offered: "
                                      "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 4] would feed the trained "
                                      "states, but the fixed copy audited under SGLang 0.5.23 is still a mismatch: "
                                      "VOCAB_MAP_MISSING")
    assert "\n" not in fix.explanation
    # with the map, the same ids are proven and offered
    draft = read_draft(str(make_draft(nested_ids=[0, 1, 2])))
    res = Resolution(given(draft, (2, 4, 5)), res.served, LLAMA, 8)
    fix = plan_fix(res, draft, 32, target)
    assert fix.possible and fix.ids == (1, 3, 4) and fix.proof.startswith("re-audited: the fixed copy is a match")


def test_torchspec_kimi_fix_is_a_fixed_point(tiny_targets, make_draft, tmp_path):
    """TorchSpec's HF backend reads the nested ids as layer outputs (+1), the ids SGLang's DeepSeek rule reads
    verbatim: the fix [3, 31, 59] moved the trained side to [B4, B32, B60] on the next audit (issue 42 item 2). The
    fix now pins the trained states; the fixed copy audits as a match with the same trainer and has no fix."""
    target, draft = tiny_targets["deepseek_v3"].path, make_draft(nested_ids=[2, 30, 58])
    kw = dict(engine="sglang", trainer="torchspec-hf", static=True, use_installed_engine=False)
    r = audit_layers(target, draft, **kw)
    assert [s.label() for s in r.trained.states] == ["B3", "B31", "B59"]
    assert r.verdict == "mismatch" and r.fix.possible and r.fix.ids == (3, 31, 59)
    assert r.fix.patch[FIX_KEY]["trained_states"] == ["B3", "B31", "B59"]
    assert "pins the trained states" in r.fix.explanation and "pinned" in r.fix.proof
    assert all(f.config_fix is r.fix for f in r.findings if f.fix == "see the fix below")
    fixed = write_fixed_config(r, tmp_path / "fixed")
    config = json.loads((tmp_path / "fixed" / "config.json").read_text())
    assert config == r.fix.apply(json.loads((draft / "config.json").read_text()))
    again = audit_layers(target, fixed, **kw)
    assert again.verdict == "match" and again.fix is None
    assert [s.label() for s in again.trained.states] == ["B3", "B31", "B59"]
    assert any(FIX_KEY in n for n in again.provenance["notes"])


def _speculators_draft(make_draft, ids):
    layer = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 8, "intermediate_size": 64, "num_hidden_layers": 1, "vocab_size": 512, "hidden_act": "silu",
             "rms_norm_eps": 1e-5, "max_position_embeddings": 2048}
    flags = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
    return make_draft(speculators=True, n_aux=len(ids), top_level_ids=ids,
                      extra={"transformer_layer_config": layer, **flags})


def test_speculators_four_aux_count_goes_where_vllms_loader_reads_it(tiny_targets, make_draft, tmp_path):
    """Issue 42 item 1: a speculators-layout draft with four aux ids; vLLM builds the draft's config from
    transformer_layer_config (its speculators loader, probes/vllm.json), so a top-level num_aux_hidden_states is
    dropped and fc stays sized for 3. The count goes into transformer_layer_config; the fixed copy is a match."""
    target, draft = tiny_targets["llama"].path, _speculators_draft(make_draft, [1, 3, 5, 6])
    kw = dict(engine="vllm", trainer="speculators", static=True, use_installed_engine=False)
    r = audit_layers(target, draft, **kw)
    assert "AUX_COUNT_MISMATCH" in [f.code for f in r.errors]
    assert r.fix.possible, r.fix.explanation
    assert r.fix.patch["transformer_layer_config"] == {"num_aux_hidden_states": 4}
    assert "num_aux_hidden_states" not in r.fix.patch
    assert "transformer_layer_config.num_aux_hidden_states = 4" in r.fix.explanation
    again = audit_layers(target, write_fixed_config(r, tmp_path / "fixed"), **kw)
    assert again.verdict == "match", [(f.code, f.what) for f in again.errors]


def test_write_fixed_config_refuses_what_it_cannot_write(tiny_targets, make_draft, tmp_path):
    target = tiny_targets["llama"].path
    r = audit_layers(target, make_draft(nested_ids=[1, 3, 4]), engine="sglang", trainer="specforge", static=True,
                     use_installed_engine=False)
    assert r.verdict == "match"
    with pytest.raises(AuditError, match="nothing to fix"):
        write_fixed_config(r, tmp_path / "x")
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------- the user's release (issue 41 item 4)

@pytest.fixture(scope="module")
def sglang_056_wheel():
    from tests import wheels

    return wheels.sglang_wheel("0.5.6")


@pytest.fixture(scope="module")
def sglang_0514_wheel():
    from tests import wheels

    return wheels.sglang_wheel("0.5.14")


def _probed(wheel):
    from eagle_audit.probe import builtin_base, probe_engine, to_convention

    return to_convention(probe_engine("sglang", wheel), builtin_base("sglang"))


def test_seed_case_on_sglang_056(make_draft, sglang_056_wheel, sglang_0514_wheel):
    """The seed: a DeepSeek-V3 draft declaring [2, 30, 58], trained on [embedding, out 2, out 30]. SGLang 0.5.6
    (probed from its wheel) adds 1 always and raises TypeError at capture index 0, so no config fix exists there
    ([-1, 2, 30] was offered before). 0.5.13 (PR #25454) reads [0, 3, 31] verbatim but still raises at index 0;
    0.5.14, which captures inside the decoder layer, is the first that feeds B0, B3, B31."""
    old, new = _probed(sglang_056_wheel), _probed(sglang_0514_wheel)
    assert (old.version, new.version) == ("0.5.6", "0.5.14")
    draft = read_draft(str(make_draft(nested_ids=[2, 30, 58])))
    served = side_of(old, draft.config, DSV3, 61)
    assert served.states == states(3, 31, 59)  # what the seed observed
    res = Resolution(given(draft, (0, 3, 31)), served, DSV3, 61)
    alone = plan_fix(res, draft, 32)
    assert not alone.possible and alone.upgrade is None and alone.patch == {}
    assert alone.explanation.startswith("No config fix on SGLang 0.5.6: ")
    assert "captures only boundaries 1..60; training used B0" in alone.explanation
    assert any("PR #25454, first in SGLang 0.5.13" in b for b in alone.engine_bugs)
    assert any("first in SGLang 0.5.14" in b and "TypeError" in b for b in alone.engine_bugs)
    fix = plan_fix(res, draft, 32, releases=[("0.5.14", new)])
    assert not fix.possible and fix.upgrade is not None and fix.upgrade.possible
    assert fix.upgrade.release == "SGLang 0.5.14" and fix.upgrade.ids == (0, 3, 31)
    assert "Upgrade to SGLang 0.5.14, then: Write eagle_config.eagle_aux_hidden_state_layer_ids = [0, 3, 31]" \
        in fix.explanation
    assert side_of(new, fix.upgrade.apply(draft.config), DSV3, 61).states == states(0, 3, 31)
    # an earlier release is never an upgrade
    assert plan_fix(res, draft, 32, releases=[("0.5.5", old)]).upgrade is None


def test_seed_case_names_the_upgrade_from_the_release_data(tiny_targets, make_draft, sglang_056_wheel, tmp_path):
    """`layers --engine FILE` probed from the 0.5.6 wheel: no config fix there; the first later release of the
    release data (eagle_audit.conventions.releases) with a proven fix is named, and its ids."""
    from eagle_audit.probe import builtin_base, probe_engine, to_convention_data

    rules = tmp_path / "sglang-0.5.6.json"
    rules.write_text(json.dumps(to_convention_data(probe_engine("sglang", sglang_056_wheel), builtin_base("sglang"))))
    r = audit_layers(tiny_targets["deepseek_v3"].path, make_draft(nested_ids=[2, 30, 58]), engine=str(rules),
                     trained_boundaries=[0, 3, 31], static=True, use_installed_engine=False)
    assert [s.label() for s in r.served.states] == ["B3", "B31", "B59"]
    assert not r.fix.possible and r.fix.release == "SGLang 0.5.6" and r.fix.upgrade.possible
    # the first later release of the data whose rules (as the data holds them) take a fix, proven under them
    from eagle_audit.conventions.registry import release_convention
    from eagle_audit.layers.engine_bugs import later

    version = r.fix.upgrade.release.removeprefix("SGLang ")
    assert later(version, "0.5.6") and version == "0.5.14"  # 0.5.13 reads [0, 3, 31] verbatim, raises at index 0
    config = json.loads((Path(r.draft["path"]) / "config.json").read_text())
    assert side_of(release_convention("sglang", version), r.fix.upgrade.apply(config), DSV3, 61).states == \
        states(0, 3, 31)
    assert f"Upgrade to {r.fix.upgrade.release}, then: Write eagle_config" in r.fix.explanation
