"""`eagle-audit probe vllm | vllm-v1 | vllm-dflash | vllm-v1-dflash` on real wheels of older and newer vLLM releases
(tests/wheels.py VLLM_RELEASES, fetched once into the test cache; full tier): every source layout is read, the
DFlash release boundaries of shared/reference/releases.md come out of the probe, and what a release lacks is said
in one line (exit 2), never guessed.

Layouts: 0.11.0 (V1 runner only; it hands the model's default to the setter and reads no draft ids; capture
``idx in aux`` before each layer), 0.18.0 (EagleModelMixin; V2 reader without DFlash ids; no DFlash draft model),
0.20.0 / 0.22.0 / 0.24.0 (DFlash: the V1 and V2 readers change), 0.34.0 (no V1 runner).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_audit.errors import AuditError
from eagle_audit.probe import builtin_base, probe_engine, to_convention
from eagle_audit.probe.results import SUPPORTED
from tests import wheels

#: a z-lab-style DFlash draft on Qwen3-8B (36 layers): ids in the DFlash convention (id k = output of layer k)
DFLASH = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 1, "dflash_config": {"target_layer_ids": [1, 17, 33]}}
N = 36


@pytest.fixture(scope="session", params=wheels.VLLM_RELEASES)
def release_wheel(request) -> Path:
    return wheels.vllm_release_wheel(request.param)


def _wheel(version: str) -> Path:
    return wheels.vllm_release_wheel(version)


@pytest.fixture(scope="session")
def conventions_wheel():
    """name@version -> the probed convention, loaded as a file would be (each probed once)."""
    cache: dict = {}

    def get(name: str, version: str):
        if (name, version) not in cache:
            cache[name, version] = to_convention(probe_engine(name, _wheel(version)), builtin_base(name))
        return cache[name, version]
    return get


def _served(conv, config, arch="Qwen3ForCausalLM", n=N):
    w = conv.resolve(config, arch, n)
    return [s.boundary for s in w.states], w


def test_every_release_layout_is_read(release_wheel):
    """Each release gives the variants it has, each with a Llama rule and file:line; the others are one line."""
    version = release_wheel.name.split("-")[1]
    have = {}
    for name in ("vllm", "vllm-v1", "vllm-dflash", "vllm-v1-dflash"):
        try:
            have[name] = probe_engine(name, release_wheel)
        except AuditError as e:
            assert str(release_wheel) in e.message and version in e.message, e.message
            have[name] = e.message
    expected = {"0.11.0": {"vllm-v1"}, "0.18.0": {"vllm", "vllm-v1"},
                "0.34.0": {"vllm", "vllm-dflash"}}.get(version, {"vllm", "vllm-v1", "vllm-dflash", "vllm-v1-dflash"})
    assert {n for n, r in have.items() if not isinstance(r, str)} == expected
    for name in expected:
        result = have[name]
        assert result.version == version
        llama = result.get("LlamaForCausalLM")
        assert llama.status == SUPPORTED, llama.reason
        assert llama.rule.default_ids == "[2, N // 2, N - 3]" and llama.setter.line > 0
        assert not [s for s in result.skipped if "ids reader" in s]
        to_convention(result, builtin_base(name))  # loads as a file would


def test_0_11_reads_no_draft_ids_and_replaces_a_same_shape_head(conventions_wheel):
    v1 = probe_engine("vllm-v1", _wheel("0.11.0"))
    assert v1.ids_from == () and v1.ids_site.path == "vllm/v1/worker/gpu_model_runner.py"
    llama = v1.get("LlamaForCausalLM").rule
    # `if idx in self.aux_hidden_state_layers: aux.append(hidden_states + residual)` before each layer
    assert (llama.reach.min_capture, llama.reach.max_capture) == ("1", "N - 1") and llama.reach.none_add
    conv = conventions_wheel("vllm-v1", "0.11.0")
    served, wiring = _served(conv, {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}, "LlamaForCausalLM", 8)
    assert served == [2, 4, 5] and wiring.ids_source == "default"  # [2, N//2, N-3], whatever the config says
    assert {w: p["policy"] for w, p in conv.draft_weights.items()} == \
        {"embed_tokens": "target_if_same_shape", "lm_head": "target_if_same_shape"}  # before vLLM PR #28549
    assert [r.kinds for r in conv.refuses] == [("dflash",), ("dspark",)]
    with pytest.raises(AuditError, match="vLLM 0.11.0 has no V2 model runner"):
        probe_engine("vllm", _wheel("0.11.0"))


def test_draft_weights_from_0_20_are_the_drafts_own(conventions_wheel):
    for name in ("vllm", "vllm-v1"):
        conv = conventions_wheel(name, "0.20.0")
        assert {w: p["policy"] for w, p in conv.draft_weights.items()} == \
            {"embed_tokens": "own_if_in_checkpoint", "lm_head": "own_if_in_checkpoint"}
        assert all(p["source"].startswith("vllm/v1/") for p in conv.draft_weights.values())


def test_0_18_serves_no_dflash_draft(conventions_wheel):
    with pytest.raises(AuditError, match=r"vLLM 0.18.0 serves no DFlash draft \(no qwen3_dflash.py"):
        probe_engine("vllm-dflash", _wheel("0.18.0"))
    v2 = conventions_wheel("vllm", "0.18.0")
    assert v2.ids_from == ("top_level",)  # eagle3_utils.py reads no DFlash ids
    assert {r.kinds for r in v2.refuses} == {("dflash",), ("dspark",)}  # not a SpeculativeMethod of 0.18.0


@pytest.mark.parametrize("version, served", [("0.20.0", [1, 17, 33]), ("0.22.0", [2, 18, 34]), ("0.24.0", [2, 18, 34])])
def test_v1_runner_dflash_ids_verbatim_in_0_20_then_plus_one(conventions_wheel, version, served):
    """gpu_model_runner.py _get_eagle3_aux_layers_from_config: `layer_ids = dflash_config.get("target_layer_ids")`
    in 0.20.0, `[i + 1 for i in ...]` from 0.22.0 (vLLM PR #40727)."""
    conv = conventions_wheel("vllm-v1-dflash", version)
    got, wiring = _served(conv, DFLASH)
    assert wiring.ids_source == "dflash_target_layer_ids" and got == served
    dflash = next(r for r in conv.reads() if r.place == "dflash_target_layer_ids")
    assert dflash.shift == (0 if version == "0.20.0" else 1)
    # from 0.22.0 a non-empty eagle_config overrides the DFlash ids even without ids of its own
    assert dflash.unless_truthy == (None if version == "0.20.0" else "eagle_config")


@pytest.mark.parametrize("version, served", [("0.20.0", [2, 18, 33]), ("0.22.0", [2, 18, 33]), ("0.24.0", [2, 18, 34])])
def test_v2_runner_reads_no_dflash_ids_up_to_0_22_then_plus_one(conventions_wheel, version, served):
    """eagle3_utils.py get_eagle3_aux_layers_from_config: only the top-level key up to 0.22.0 (the DFlash draft is
    fed the model's default [2, N//2, N-3]); dflash_config.target_layer_ids + 1 from 0.24.0."""
    conv = conventions_wheel("vllm-dflash", version)
    got, wiring = _served(conv, DFLASH)
    assert got == served
    assert wiring.ids_source == ("default" if version != "0.24.0" else "dflash_target_layer_ids")
    assert ("dflash_target_layer_ids" in conv.ids_from) == (version == "0.24.0")


def test_0_34_has_no_v1_runner_and_reads_dspark_ids(conventions_wheel):
    with pytest.raises(AuditError, match="vLLM 0.34.0 has no V1 model runner"):
        probe_engine("vllm-v1", _wheel("0.34.0"))
    v2 = conventions_wheel("vllm", "0.34.0")
    dspark = next(r for r in v2.reads() if r.place == "dspark_target_layer_ids")
    assert dspark.shift == 1 and dspark.verbatim_model_types == ("deepseek_v41",)
    assert v2.refuses == ()  # DFlash and DSpark are both speculative methods of 0.34.0
    # V2's eagle/utils.py: `draft_head = target_lm_head ... eagle_model.lm_head = draft_head` under _should_share
    assert {w: p["policy"] for w, p in v2.draft_weights.items()} == \
        {"embed_tokens": "own_if_in_checkpoint", "lm_head": "own_if_in_checkpoint"}
    deepseek = v2.rules[v2.architectures["DeepseekV3ForCausalLM"]]
    assert (deepseek.min_capture, deepseek.max_capture) == ("1", "N")


def test_0_34_deepseek_v32_is_read_from_its_own_model_class_never_v4s(conventions_wheel):
    """DeepseekV32ForCausalLM (vllm/models/deepseek_v32, CUDA default) inherits DeepseekV2's setter but builds its
    own ``model_cls`` (DeepseekV32Model: ``hidden_states if residual is None else ...`` before each layer, nothing
    after the loop): ids 0..N-1. The probe once resolved the holder on the setter's class (DeepseekV2Model, 1..N)
    and dropped the index failure when the package picks a platform, which merged the rule with DeepSeek-V4's
    mean over the hyper-connection streams."""
    v2 = conventions_wheel("vllm", "0.34.0")
    v32, v4 = v2.architectures["DeepseekV32ForCausalLM"], v2.architectures["DeepseekV4ForCausalLM"]
    assert v32 != v4 and v2.architectures["GlmMoeDsaForCausalLM"] == v32
    assert (v2.rules[v32].min_capture, v2.rules[v32].max_capture) == ("0", "N - 1")
    assert "deepseek_v32/__init__.py" in v2.rules[v32].source
    assert v4 == "deepseek_v4_mhc" and (v2.rules[v4].min_capture, v2.rules[v4].max_capture) == ("1", "N")
    v3 = v2.rules[v2.architectures["DeepseekV3ForCausalLM"]]
    assert [f.error for f in v3.index_failures] == ["TypeError"]  # hidden_states + residual, residual None at 0
