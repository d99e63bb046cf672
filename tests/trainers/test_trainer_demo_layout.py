"""The shipped demo draft's config (eagle_audit/data/demo-draft-v2, bench/demo_canary.py ``demo_config``) is what
speculators 0.9.0 itself writes: its own ``Eagle3SpeculatorConfig`` (from the wheel, tests/trainers/conftest.py)
built from the demo's values and saved with ``save_pretrained`` gives the same config.json key for key (the
transformers version it records aside), and reads the demo's config back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from eagle_audit.demo import demo_draft

VERSIONED = ("transformers_version",)


def _strip(cfg: dict) -> dict:
    out = {k: v for k, v in cfg.items() if k not in VERSIONED and k != "eagle_audit_demo"}
    if isinstance(out.get("transformer_layer_config"), dict):
        out["transformer_layer_config"] = {k: v for k, v in out["transformer_layer_config"].items()
                                           if k not in VERSIONED}
    return out


def test_demo_config_is_what_speculators_writes(trainers, tmp_path):
    from transformers import LlamaConfig

    demo = json.loads((Path(demo_draft()) / "config.json").read_text())
    assert "model_type" not in demo  # vLLM reads a speculators config only without one
    layer = demo["transformer_layer_config"]
    t = trainers
    cfg = t.Eagle3SpeculatorConfig(
        transformer_layer_config=LlamaConfig(**{k: v for k, v in layer.items() if k not in VERSIONED}),
        draft_vocab_size=demo["draft_vocab_size"], norm_before_residual=demo["norm_before_residual"],
        target_hidden_size=demo["target_hidden_size"],
        eagle_aux_hidden_state_layer_ids=demo["eagle_aux_hidden_state_layer_ids"],
        speculators_config=t.SpeculatorsConfig(
            algorithm="eagle3", proposal_methods=[t.GreedyTokenProposalConfig(speculative_tokens=3)],
            default_proposal_method="greedy",
            verifier=t.VerifierConfig(**demo["speculators_config"]["verifier"])))
    cfg.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert _strip(written) == _strip(demo)
    # and speculators reads the shipped config as that same config
    back = t.Eagle3SpeculatorConfig.from_dict({k: v for k, v in demo.items() if k != "eagle_audit_demo"})
    assert back.eagle_aux_hidden_state_layer_ids == [0, 3, 16] and back.norm_before_residual is False
    assert back.speculators_config.proposal_methods[0].speculative_tokens == 3
    assert back.transformer_layer_config.hidden_size == 576 and back.draft_vocab_size == 1536
