"""What the draft was trained on (eagle_audit/resolution.py): boundaries given directly, a canary's record, a
trainer named or assumed from the layout (and the notes saying why), a trainer's pipeline picked from the ids, an
unknown trainer version given the known version's facts. The tiny Llama target: N = 8, hidden 32."""

from __future__ import annotations

import json

import pytest

from eagle_audit.draft.read import read_draft
from eagle_audit.resolution import CANARY_KEY, resolve_trained, trainer_convention
from eagle_audit.states import State
from eagle_audit.target import target_info


@pytest.fixture
def info(tiny_targets):
    return target_info(str(tiny_targets["llama"].path))


def labels(side) -> list[str]:
    return [s.label() for s in side.states]


def test_boundaries_given_directly_win_as_text_or_states(info, make_draft):
    draft = read_draft(str(make_draft(nested_ids=[1, 2, 3])))
    for given in ("0,3,8", (State(0), 3, State(8))):
        notes: list[str] = []
        side, conv = resolve_trained(draft, info, notes, trained_boundaries=given)
        assert labels(side) == ["B0", "B3", "B8"] and conv is None
        assert notes == ["trained states given directly: ['B0', 'B3', 'B8']"]


def test_a_canary_record_is_read_before_any_convention(info, make_draft):
    path = make_draft(nested_ids=[1, 2, 3], extra={CANARY_KEY: {"trained_boundaries": [2, 5, 7]}})
    notes: list[str] = []
    side, conv = resolve_trained(read_draft(str(path)), info, notes)
    assert labels(side) == ["B2", "B5", "B7"] and conv is None
    assert "canary record" in notes[0]
    side, _ = resolve_trained(read_draft(str(path)), info, [], trainer="specforge")  # a named trainer overrides it
    assert labels(side) == ["B2", "B3", "B4"]  # SpecForge's ids are layer outputs: id k = B(k+1)


def test_the_trainer_assumed_from_the_layout_is_said(info, make_draft):
    notes: list[str] = []
    side, conv = resolve_trained(read_draft(str(make_draft(nested_ids=[1, 2, 3]))), info, notes)
    assert conv.name == "specforge" and labels(side) == ["B2", "B3", "B4"]
    assert notes[0] == "trainer not given: assumed specforge from the draft's sglang layout"
    notes = []
    resolve_trained(read_draft(str(make_draft(speculators=True, top_level_ids=[1, 2, 3]))), info, notes)
    assert notes[0].startswith("trainer not given: assumed speculators from the draft's speculators layout")
    assert any("also what a conversion writes" in n for n in notes)  # speculators convert writes it too


def test_an_id_equal_to_n_rules_specforge_out(info, make_draft):
    """SpecForge 0.2.0 never captures index N: a SGLang-layout draft whose nested ids contain N = 8 was trained by an
    IN-k pipeline (modelopt offline), and the note says why."""
    notes: list[str] = []
    side, conv = resolve_trained(read_draft(str(make_draft(nested_ids=[1, 4, 8]))), info, notes)
    assert conv.name == "modelopt-offline" and "contain N = 8" in notes[0]
    assert labels(side) == ["B1", "B4", "B8"]


def test_modelopt_named_picks_its_pipeline_from_the_ids(info, make_draft):
    notes: list[str] = []
    _, conv = resolve_trained(read_draft(str(make_draft(nested_ids=[1, 4, 8]))), info, notes, trainer="modelopt")
    assert conv.name == "modelopt-offline" and "assumed its pipeline modelopt-offline" in " ".join(notes)
    notes = []
    _, conv = resolve_trained(read_draft(str(make_draft(nested_ids=[1, 4, 6]))), info, notes, trainer="modelopt")
    assert conv.name == "modelopt" and "no id equals N = 8" in " ".join(notes)


def test_an_unknown_trainer_version_gets_the_known_facts_and_says_so():
    notes: list[str] = []
    conv = trainer_convention("specforge@9.9.9", notes)
    assert conv.name == "specforge" and notes == [
        f"{conv.title} 9.9.9 is not a version eagle-audit knows: used the facts of {conv.title} {conv.version} "
        f"({conv.path})"]
    assert json.loads(json.dumps(conv.to_json()))["name"] == "specforge"


# ---------------------------------------------------------------------------- a trainer's export layout

KIMI_IDS = [2, 30, 58]  # lightseekorg/kimi-k2.5-eagle3-mla: TorchSpec's default [1, 29, 57] exported + 1 (PR #25454)


def kimi_draft(make_draft, weights: str = "layers.0.", **extra):
    """A TorchSpec kimi_k2 draft as its exporter writes it: ``layers.0.*`` weights with --vllm, else ``midlayer.*``."""
    def rename(sd):
        for k in [k for k in sd if k.startswith("midlayer.")]:
            sd[weights + k[len("midlayer."):]] = sd.pop(k)

    cfg = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", **extra}
    return make_draft(nested_ids=KIMI_IDS, top_level_ids=KIMI_IDS, extra=cfg, edit=rename)


@pytest.mark.parametrize("trainer", ["torchspec-hf", None])
def test_torchspec_vllm_export_is_read_as_its_own_convention(config_only_target, make_draft, audit, trainer):
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    r = audit(target, kimi_draft(make_draft, _torchspec_version="0.1.0"), trainer=trainer, engine="sglang",
              static=True)
    assert r.verdict == "match", [f.what for f in r.findings]
    assert [s.label() for s in r.trained.states] == [s.label() for s in r.served.states] == ["B2", "B30", "B58"]
    assert r.trained.convention == "torchspec-hf-vllm-export" and r.fix is None
    assert any("TorchSpec's export for vLLM" in n and "layers.0.*" in n for n in r.provenance["notes"])
    if trainer is None:
        assert any("_torchspec_version" in n for n in r.provenance["notes"])


def test_torchspec_native_export_keeps_the_training_ids(config_only_target, make_draft, audit):
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    r = audit(target, kimi_draft(make_draft, "midlayer."), trainer="torchspec-hf", engine="sglang", static=True)
    assert r.trained.convention == "torchspec-hf"
    assert [s.label() for s in r.trained.states] == ["B3", "B31", "B59"]  # OUT-k: trained on ids [2, 30, 58]
    assert any("native export" in n for n in r.provenance["notes"])


def test_a_config_only_kimi_draft_is_the_export_when_its_first_id_is_not_1(config_only_target, tmp_path, audit):
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    cfg = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 32,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": KIMI_IDS}}
    (tmp_path / "kimi").mkdir()
    (tmp_path / "kimi" / "config.json").write_text(json.dumps(cfg))
    r = audit(target, tmp_path / "kimi", trainer="torchspec-hf", engine="sglang", static=True)
    assert r.trained.convention == "torchspec-hf-vllm-export"
    assert [s.label() for s in r.trained.states] == ["B2", "B30", "B58"]


def test_other_torchspec_drafts_are_never_rewritten(config_only_target, make_draft, audit):
    r = audit(config_only_target("LlamaForCausalLM", 30), make_draft(nested_ids=[1, 14, 26],
              edit=lambda sd: sd.update({k.replace("midlayer.", "layers.0."): sd.pop(k) for k in list(sd) if
                                         k.startswith("midlayer.")})), trainer="torchspec-hf", static=True)
    assert r.trained.convention == "torchspec-hf"
