"""probes/sglang-dflash.json, sglang-dspark.json and vllm-dflash.json are derived, not written: probing the wheels
gives the files (issue 17). What the probe reads and how: eagle_audit/probe/block.py."""

from __future__ import annotations

import json

import pytest

from eagle_audit.conventions import probes_dir
from eagle_audit.probe import builtin_base, probe_engine, to_convention_data
from eagle_audit.probe.results import SUPPORTED, UNRECOGNISED

pytestmark = pytest.mark.full


def derived(name: str, wheel) -> dict:
    data = to_convention_data(probe_engine(name, wheel), builtin_base(name))
    data.pop("generated_by")
    return json.loads(json.dumps(data).replace(str(wheel), wheel.name))  # the files name the wheel, not its folder


@pytest.mark.parametrize("name", ["sglang-dflash", "sglang-dspark"])
def test_sglang_block_conventions_are_the_probe_of_the_wheel(name, sglang_wheel):
    committed = json.loads((probes_dir() / f"{name}.json").read_text())
    committed.pop("generated_by")
    assert derived(name, sglang_wheel) == committed, f"regenerate: eagle-audit probe {name} --source <wheel> --out probes/{name}.json"


def test_vllm_block_convention_is_the_probe_of_the_wheel(vllm_wheel):
    committed = json.loads((probes_dir() / "vllm-dflash.json").read_text())
    committed.pop("generated_by")
    assert derived("vllm-dflash", vllm_wheel) == committed


def test_what_the_sglang_probe_finds(sglang_wheel):
    dflash = probe_engine("sglang-dflash", sglang_wheel)
    setters = {a.setter.file for a in dflash.archs if a.setter}
    assert len(setters | {a.reason.split(" ")[0] for a in dflash.by_status(UNRECOGNISED)}) >= 25
    rule = lambda arch: dflash.get(arch).rule  # noqa: E731
    assert rule("LlamaForCausalLM").explicit_text() == "+1" and rule("LlamaForCausalLM").reach.max_capture == "N - 1"
    assert rule("MuseGlimmerForCausalLM").explicit_text() == "verbatim"  # Muse's own setter; the +1 is the reader's
    assert rule("BeamForCausalLM").explicit_text() == "+1"  # verbatim setter, capture after the layer
    assert rule("GptOssForCausalLM").reach.max_capture == "N"
    assert rule("DeepseekV3ForCausalLM").reach.count_check is not None
    assert rule("Qwen3MoeForCausalLM").reach.unguarded is not None  # id N-1 -> IndexError at start-up
    assert dflash.get("Glm4ForCausalLM").status == "unsupported"
    assert dflash.get("KimiK3LinearForCausalLM").status == UNRECOGNISED  # attn-res bank taps: not read, said so
    dspark = probe_engine("sglang-dspark", sglang_wheel)
    for arch in ("KimiLinearForCausalLM", "BailingMoeV3ForCausalLM"):  # DSpark setters, capture after the layer
        a = dspark.get(arch)
        assert a.status == SUPPORTED and a.setter.file != "llama.py" and a.rule.explicit_text() == "+1", arch
    # DeepSeek-V4: ids verbatim, captured before layer i runs (the attention input of the target layer): the mean
    # over the mHC streams entering layer i, Bi on a hyper-connection target, 0..N-1, count-checked
    v4 = dspark.get("DeepseekV4ForCausalLM").rule
    assert v4.explicit_text() == "verbatim" and (v4.reach.min_capture, v4.reach.max_capture) == ("0", "N - 1")
    assert v4.reach.branch is None and v4.reach.count_check is not None
    assert len(dflash.by_status(SUPPORTED)) == 53 and len(dspark.by_status(SUPPORTED)) == 57
