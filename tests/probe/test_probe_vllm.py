"""`eagle-audit probe vllm`: the real vLLM 0.33.0 wheel, fetched once into a cache outside the repo, and a
synthetic source tree for an ids reader the probe does not recognise.

The cache root is ``$EAGLE_AUDIT_TEST_CACHE`` (default ``~/.cache/eagle-audit-test``); the wheel lives in its
``vllm/`` folder (see conftest.py). Without network access the wheel tests skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_audit.conventions import builtin_conventions
from eagle_audit.probe import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, PROBERS, ProbeResult, builtin_base,
                               probe_engine, to_convention)

VLLM_VERSION = "0.33.0"  # the fixture vllm_wheel (conftest.py) fetches this release


@pytest.fixture(scope="session")
def v2(vllm_wheel: Path) -> ProbeResult:
    return probe_engine("vllm", vllm_wheel)


@pytest.fixture(scope="session")
def v1(vllm_wheel: Path) -> ProbeResult:
    return probe_engine("vllm-v1", vllm_wheel)


def _rule(conv, arch):
    name = conv.architectures.get(arch, conv.fallback_rule)
    r = conv.rules[name]
    return (r.default_ids, r.default_shift, tuple((c.when, c.shift) for c in r.explicit), r.min_capture, r.max_capture)


def test_registered():
    assert {"sglang", "vllm", "vllm-v1"} <= set(PROBERS)


def test_version_and_ids_places(v2, v1):
    assert v2.version == v1.version == VLLM_VERSION
    hand = builtin_conventions("engine")
    assert v2.ids_from == hand["vllm"].ids_from == ("top_level", "nested_layer_ids")
    assert v2.ids_site.path.endswith("spec_decode/eagle/eagle3_utils.py")
    assert v1.ids_from == hand["vllm-v1"].ids_from == ("top_level", "nested")
    assert v1.ids_site.path.endswith("gpu_model_runner.py")
    assert not [s for s in v2.skipped + v1.skipped if "ids reader" in s]


@pytest.mark.parametrize("engine", ["vllm", "vllm-v1"])
@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV2ForCausalLM",
                                  "DeepseekV3ForCausalLM"])
def test_rules_agree_with_the_hand_written_file(v2, v1, engine, arch):
    result = v2 if engine == "vllm" else v1
    a = result.get(arch)
    assert a.status == SUPPORTED, a.reason
    assert a.rule.default_ids == "[2, N // 2, N - 3]"  # SupportsEagle3.get_eagle3_default_aux_hidden_state_layers
    hand = builtin_conventions("engine")[engine]
    probed = to_convention(result, builtin_base(engine))
    assert _rule(probed, arch) == _rule(hand, arch)


def test_capture_shapes(v2):
    llama, deepseek = v2.get("LlamaForCausalLM"), v2.get("DeepseekV3ForCausalLM")
    assert (llama.rule.reach.min_capture, llama.rule.reach.max_capture) == ("0", "N")
    assert "_maybe_add_hidden_state" in llama.rule.reach.how and llama.rule.reach.site.file == "llama.py"
    assert (deepseek.rule.reach.min_capture, deepseek.rule.reach.max_capture) == ("1", "N")
    assert deepseek.rule.reach.site.file == "deepseek_v2.py" and deepseek.setter.file == "deepseek_v2.py"


def test_emitted_convention(v2):
    conv = to_convention(v2, builtin_base("vllm"))
    assert set(conv.rules) >= {"in_k", "deepseek_in_k"}
    assert conv.architectures["LlamaForCausalLM"] == "in_k"
    assert conv.architectures["DeepseekV2ForCausalLM"] == "deepseek_in_k"
    # what the probe cannot settle statically is named, never guessed
    kimi = v2.get("KimiK25ForConditionalGeneration")
    assert kimi.status == DELEGATING_UNRESOLVED and "kimi_k25.py" in kimi.reason
    assert v2.get("DeepseekV32ForCausalLM").status == UNRECOGNISED


def test_cli_prints_the_table(vllm_wheel):
    import typer
    from typer.testing import CliRunner

    from eagle_audit.cli.probe import probe

    app = typer.Typer()
    app.command()(probe)
    res = CliRunner().invoke(app, ["vllm", "--source", str(vllm_wheel)])
    assert res.exit_code == 0, res.output
    assert "LlamaForCausalLM" in res.output and "draft ids read from: top_level, nested_layer_ids" in res.output


# ---------------------------------------------------------------------------------------- synthetic

REGISTRY = '''
_TEXT_GENERATION_MODELS = {
    "TinyForCausalLM": ("tiny", "TinyForCausalLM"),
}
'''
INTERFACES = '''
class EagleModelMixin:
    def _maybe_add_hidden_state(self, aux, layer_idx, hidden_states, residual):
        return aux


class SupportsEagle3:
    def set_aux_hidden_state_layers(self, layers):
        self.model._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self):
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)
'''
TINY = '''
from .interfaces import EagleModelMixin, SupportsEagle3


class TinyModel(EagleModelMixin):
    def forward(self, hidden_states):
        residual = None
        aux = self._maybe_add_hidden_state([], self.start_layer, hidden_states, residual)
        for idx, layer in enumerate(self.layers):
            hidden_states, residual = layer(hidden_states, residual)
            self._maybe_add_hidden_state(aux, idx + 1, hidden_states, residual)
        return hidden_states, aux


class TinyForCausalLM(SupportsEagle3):
    def __init__(self):
        self.model = TinyModel()
'''
ODD_READER = '''
def get_eagle3_aux_layers_from_config(spec_config):
    return spec_config.draft_model_config.hf_config.to_dict().pop("aux_ids", None)
'''


def test_synthetic_tree_with_an_unrecognised_ids_reader(tmp_path):
    models = tmp_path / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "registry.py").write_text(REGISTRY)
    (models / "interfaces.py").write_text(INTERFACES)
    (models / "tiny.py").write_text(TINY)
    reader = tmp_path / "vllm" / "v1" / "worker" / "gpu" / "spec_decode" / "eagle" / "eagle3_utils.py"
    reader.parent.mkdir(parents=True)
    reader.write_text(ODD_READER)
    result = probe_engine("vllm", tmp_path)
    tiny = result.get("TinyForCausalLM")
    assert tiny.status == SUPPORTED
    assert (tiny.rule.default_ids, tiny.rule.reach.min_capture, tiny.rule.reach.max_capture) == \
        ("[2, N // 2, N - 3]", "0", "N")
    assert result.ids_from is None and result.ids_site is None
    odd = [s for s in result.skipped if "ids reader unrecognised" in s]
    assert odd and "eagle3_utils.py:2" in odd[0] and "unrecognised" in odd[0]
    # the emitted file still loads, with the ids places copied from the built-in convention and said so
    conv = to_convention(result, builtin_base("vllm"))
    assert conv.ids_from == builtin_conventions("engine")["vllm"].ids_from
