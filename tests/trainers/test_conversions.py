"""speculators 0.9.0's EAGLE-3 converter, run from the wheel on a SpecForge-layout draft (written the way SpecForge
exports one: ``LlamaForCausalLMEagle3``, nested ids, ``midlayer.*``): it drops the source's ids, so the converted
config says nothing of how the draft was trained; eagle-audit says so where it assumes a trainer from that layout.
SpecForge 0.2.0's own resolver, run from the wheel, refuses exactly the ids eagle-audit says it refuses."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from transformers import AutoConfig

from eagle_audit.conventions import get_convention
from eagle_audit.draft.read import read_draft

pytestmark = pytest.mark.usefixtures("one_thread")


def test_converted_specforge_draft_loses_its_ids(eagle3_converter, tiny_targets, make_draft, tmp_path, audit):
    target = tiny_targets["llama"]
    n = target.num_layers
    source = make_draft(nested_ids=[1, 2, n - 2])  # SpecForge-layout ids (OUT-k), not SpecForge's default
    out = tmp_path / "converted"
    eagle3_converter().convert(source, out, base_model=str(target.path), validate=False)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3"
    assert cfg.get("eagle_aux_hidden_state_layer_ids") is None and "eagle_config" not in cfg  # the ids are gone
    text = json.dumps(cfg)
    assert "specforge" not in text.lower() and "convert" not in text.lower()  # no provenance field records it
    spec = read_draft(str(out))
    assert spec.layout == "speculators" and spec.fc_in == read_draft(str(source)).fc_in
    r = audit(target, out, engine="vllm", static=True)
    notes = "\n".join(r.provenance["notes"])
    assert "trainer not given: assumed speculators from the draft's speculators layout" in notes
    assert "also what a conversion writes" in notes and "eagle3_converter.py" in notes and "fingerprint" in notes
    # served by vLLM's default, while SpecForge trained the source on B2, B3, B(N-1)
    assert [s.label() for s in r.served.states] == [f"B{b}" for b in (2, n // 2, n - 3)]
    sf = audit(target, source, engine="sglang", trainer="specforge", static=True)
    assert [s.label() for s in sf.trained.states] == ["B2", "B3", f"B{n - 1}"]


@pytest.mark.parametrize("ids", [[1, 2, 3], [0, 1, 2], [-1, 2, 3], [1, 2], [1, 2, 3, 4], [2, 2, 3], []])
def test_specforge_refuses_what_its_resolver_refuses(trainers, tiny_targets, ids):
    target = tiny_targets["llama"]
    cfg = SimpleNamespace(model=SimpleNamespace(aux_hidden_state_layer_ids=None))
    draft = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}
    try:
        trainers.resolve_eagle_capture_layers(cfg, draft, AutoConfig.from_pretrained(target.path))
        refused = None
    except ValueError as e:
        refused = str(e)
    w = get_convention("specforge", "trainer").resolve(draft, target.architecture, target.num_layers)
    ours = w.failure.message if w.failure is not None and w.failure.error == "ValueError" else None
    assert ours == refused, (ids, ours, refused)
