"""The fixed copy of issue 42 item 1 loaded by vLLM 0.33.0's own code (tests/engine_wheels/draft_classes_engine.py:
its speculators config loader, algos.py, run whole, and llama_eagle3.py's LlamaModel.__init__ compiled out of the
wheel): the draft's fc is sized for the four aux states the checkpoint holds only with the fix's placement."""

from __future__ import annotations

import json

import pytest

from eagle_audit import audit_layers
from tests.engine_wheels.draft_classes_engine import hf, vllm_draft_reads, vllm_view
from tests.wheels import WheelSource

from .test_fix_proof import _speculators_draft


@pytest.fixture(scope="module")
def vllm_src(vllm_wheel) -> WheelSource:
    return WheelSource(vllm_wheel)


def _fc_in(src: WheelSource, config: dict) -> int:
    view = vllm_view(src, config)
    return vllm_draft_reads(src, "llama_eagle3", hf({k: v for k, v in view.items() if k != "model_type"}))["fc_in"]


def test_vllm_sizes_fc_for_four_states_from_the_fixed_copy(tiny_targets, make_draft, vllm_src):
    draft = _speculators_draft(make_draft, [1, 3, 5, 6])
    r = audit_layers(tiny_targets["llama"].path, draft, engine="vllm", trainer="speculators", static=True,
                     use_installed_engine=False)
    config = json.loads((draft / "config.json").read_text())
    assert _fc_in(vllm_src, config) == 3 * 32  # the load crash of speculators #1065: fc for 3, weights for 4
    assert _fc_in(vllm_src, {**config, "num_aux_hidden_states": 4}) == 3 * 32  # the earlier fix: dropped
    assert _fc_in(vllm_src, r.fix.apply(config)) == 4 * 32  # the proven fix
