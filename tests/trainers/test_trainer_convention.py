"""probes/specforge.json is derived, not written: regenerating it from the SGLang 0.5.14 wheel gives the file."""

from __future__ import annotations

import json

from eagle_audit.conventions import get_convention, probes_dir
from eagle_audit.probe import probe_engine
from eagle_audit.probe.trainer import SPECFORGE, trainer_convention_data

from tests import wheels


def test_specforge_convention_is_the_sglang_0_5_14_probe_plus_specforge_facts():
    data = trainer_convention_data(SPECFORGE, probe_engine("sglang", wheels.sglang_wheel(wheels.SPECFORGE_SGLANG_VERSION)))
    committed = json.loads((probes_dir() / "specforge.json").read_text())
    data.pop("generated_by"), committed.pop("generated_by")
    assert data == committed, "regenerate: eagle-audit probe specforge --source <sglang 0.5.14 wheel> --out probes/specforge.json"
    conv = get_convention("specforge", "trainer")
    assert conv.captures_through["engine"] == "sglang" and conv.captures_through["version"] == "0.5.14"
    assert conv.architectures["DeepseekV3ForCausalLM"] != conv.architectures["LlamaForCausalLM"]
    assert conv.order == "ascending" and conv.rules[conv.architectures["LlamaForCausalLM"]].max_capture == "N - 1"
