"""The probe against the real SGLang 0.5.23 wheel reproduces the hand-written probes/sglang.json."""

from __future__ import annotations

import pytest

from eagle_audit.conventions import load_convention_file, probes_dir
from eagle_audit.probe import DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, to_convention

BUILTIN = load_convention_file(probes_dir() / "sglang.json")


def _key(rule) -> tuple:
    return (rule.default_ids, rule.default_shift, tuple((c.when, c.shift) for c in rule.explicit),
            rule.min_capture, rule.max_capture)


def test_version_and_where_ids_are_read(wheel_probe):
    assert wheel_probe.version == BUILTIN.version == "0.5.23"
    assert wheel_probe.ids_from == BUILTIN.ids_from == ("nested",)
    assert wheel_probe.ids_site.path == \
        "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
    assert not wheel_probe.skipped


@pytest.mark.parametrize("arch", sorted(BUILTIN.architectures))
def test_reproduces_builtin_rule(wheel_probe, arch):
    a = wheel_probe.get(arch)
    assert a is not None, f"{arch} is not registered in the wheel"
    assert a.status == SUPPORTED, a.reason
    name = BUILTIN.architectures[arch]
    assert a.rule.key()[:5] == _key(BUILTIN.rules[name])
    # the built-in file keeps the unguarded-setattr models (index N raises at start-up) apart
    assert (a.rule.reach.unguarded is not None) == (name == "moe_unguarded")


def test_named_special_cases(wheel_probe):
    for arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM",
                 "KimiK25ForConditionalGeneration"):
        rule = wheel_probe.get(arch).rule
        assert [(c.when, c.shift) for c in rule.explicit] == [("ids[0] == 1", 1), (None, 0)], arch
        assert rule.reach.max_capture == "N - 1"
    kimi = wheel_probe.get("KimiK25ForConditionalGeneration")
    assert [s.short() for s in kimi.via] == ["kimi_k25.py:939"] and kimi.setter.file == "deepseek_v2.py"
    assert wheel_probe.get("Glm4MoeLiteForCausalLM").setter.file == "glm4_moe_lite.py"
    gpt = wheel_probe.get("GptOssForCausalLM").rule
    assert [(c.when, c.shift) for c in gpt.explicit] == [("max(ids) == N", 0), (None, 1)]
    assert gpt.reach.max_capture == "N"
    vl = wheel_probe.get("MiniMaxM3SparseForConditionalGeneration").rule
    assert vl.default_shift == 1 and vl.reach.max_capture == "N"
    assert vl.n_from == "self.config.text_config.num_hidden_layers"
    assert wheel_probe.get("MiniMaxM3SparseForCausalLM").rule.default_shift == 0


def test_architectures_without_capture_are_listed(wheel_probe):
    for arch in BUILTIN.unsupported:
        a = wheel_probe.get(arch)
        assert a is not None and a.status == UNSUPPORTED, arch
        assert "has no set_eagle3_layers_to_capture" in a.reason
    # drafts inherit the target setter but never read what it stores
    draft = wheel_probe.get("LlamaForCausalLMEagle3")
    assert draft.status == UNSUPPORTED and "never reads layers_to_capture" in draft.reason
    assert len(wheel_probe.by_status(UNSUPPORTED)) > 100


def test_nothing_guessed(wheel_probe):
    assert not wheel_probe.by_status(UNRECOGNISED)
    (mindspore,) = wheel_probe.by_status(DELEGATING_UNRESOLVED)
    assert mindspore.arch == "MindSporeForCausalLM" and "mindspore.py:193" in mindspore.reason


def test_emitted_convention_matches_builtin(wheel_probe):
    conv = to_convention(wheel_probe, BUILTIN)
    assert conv.ids_from == BUILTIN.ids_from and conv.draft_flags == BUILTIN.draft_flags
    assert set(BUILTIN.unsupported) <= set(conv.unsupported)
    for arch, name in BUILTIN.architectures.items():
        probed_name = conv.architectures[arch]
        assert _key(conv.rules[probed_name]) == _key(BUILTIN.rules[name])
        twins = [r for r in BUILTIN.rules if _key(BUILTIN.rules[r]) == _key(BUILTIN.rules[name])]
        if twins == [name] or name in ("common", "moe_unguarded"):
            assert probed_name == name  # a rule that means the same keeps its built-in name
        for n in (28, 61):
            for ids in (None, (1, n // 2, n - 1), (2, n // 2, n), (0, 5, n - 4)):
                draft = {} if ids is None else {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}
                probed, builtin = conv.resolve(draft, arch, n), BUILTIN.resolve(draft, arch, n)
                assert (probed.states, probed.dropped) == (builtin.states, builtin.dropped), (arch, n, ids)
