"""accept-rate and fingerprint run every draft class the engines serve (MLA, Qwen3 attention, no aux states), and
say in one line what they cannot run (P-EAGLE's parallel drafting; a fingerprint of a draft without aux states)."""

from __future__ import annotations

import json

import pytest
import torch

from eagle_audit import accept_rate
from eagle_audit.draft.write import write_draft
from eagle_audit.errors import AuditError

pytestmark = pytest.mark.usefixtures("one_thread")
H, V, DV = 32, 512, 128
PROMPTS = [[5, 17, 33, 2, 41, 9, 77, 12], [3, 8, 21, 60, 14, 2, 30]]


def _mla_draft(path, arch="Eagle3DeepseekV2ForCausalLM", **extra):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g) * 0.1  # noqa: E731
    m = dict(q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
    heads = 2
    cfg = {"architectures": [arch], "model_type": "deepseek_v3", "hidden_size": H, "target_hidden_size": H,
           "num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": 48,
           "num_hidden_layers": 1, "vocab_size": V, "draft_vocab_size": DV, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "max_position_embeddings": 256, **m, **extra}
    a = "layers.0.self_attn."
    sd = {"fc.weight": r(H, 3 * H), "norm.weight": torch.ones(H), "lm_head.weight": r(DV, H),
          "layers.0.input_layernorm.weight": torch.ones(H), "layers.0.hidden_norm.weight": torch.ones(H),
          "layers.0.post_attention_layernorm.weight": torch.ones(H), "layers.0.mlp.gate_proj.weight": r(48, H),
          "layers.0.mlp.up_proj.weight": r(48, H), "layers.0.mlp.down_proj.weight": r(H, 48),
          a + "q_a_proj.weight": r(16, 2 * H), a + "q_a_layernorm.weight": torch.ones(16),
          a + "q_b_proj.weight": r(heads * 12, 16), a + "kv_a_proj_with_mqa.weight": r(16, 2 * H),
          a + "kv_a_layernorm.weight": torch.ones(12), a + "kv_b_proj.weight": r(heads * 16, 12),
          a + "o_proj.weight": r(H, heads * 8), "d2t": torch.zeros(DV, dtype=torch.long),
          "t2d": torch.cat([torch.ones(DV, dtype=torch.bool), torch.zeros(V - DV, dtype=torch.bool)])}
    return write_draft(path, cfg, sd)


@pytest.mark.parametrize("topk", [1, 2])
def test_accept_rate_runs_the_sglang_mla_class(tiny_targets, tmp_path, topk):
    draft = _mla_draft(tmp_path / "mla")
    r = accept_rate(tiny_targets["deepseek_v3"].path, draft, prompt_ids=PROMPTS, max_new_tokens=6, topk=topk,
                    num_draft_tokens=4 if topk > 1 else None,
                    use_installed_engine=False)
    notes = "\n".join(r.provenance["notes"])
    assert "kimi_k25_eagle3" in notes
    assert r.al("trained") >= 1.0 and r.al("served") >= 1.0 and not r.failures


def test_accept_rate_runs_a_draft_without_aux_states(tiny_targets, make_draft, tmp_path):
    def drop_fc(sd):
        del sd["fc.weight"]

    draft = make_draft(extra={"eagle_config": {"use_aux_hidden_state": False}}, edit=drop_fc)
    r = accept_rate(tiny_targets["llama"].path, draft, prompt_ids=PROMPTS, max_new_tokens=6, use_installed_engine=False)
    assert [s.label() for s in r.served.states] == [f"B{tiny_targets['llama'].num_layers}+norm"]
    assert r.al("trained") == pytest.approx(r.al("served")) and not r.failures


def test_peagle_parallel_drafting_is_one_clear_line(tiny_targets, tmp_path, make_draft):
    base = make_draft(top_level_ids=[1, 2, 3], speculators=True)
    cfg = json.loads((base / "config.json").read_text())
    cfg.update(speculators_model_type="peagle", mask_token_id=3,
               transformer_layer_config={"model_type": "llama", "hidden_size": H, "num_attention_heads": 4,
                                         "num_key_value_heads": 2, "intermediate_size": 64, "num_hidden_layers": 1,
                                         "vocab_size": V, "head_dim": 8})
    (base / "config.json").write_text(json.dumps(cfg))
    r = accept_rate(tiny_targets["llama"].path, base, engine="vllm", prompt_ids=PROMPTS, max_new_tokens=4,
                    use_installed_engine=False)
    why = r.failures["served"]
    assert "parallel drafting (P-EAGLE" in why and "\n" not in why
    assert r.al("served") is None and r.al("trained") >= 1.0  # the trained side (speculators) still runs


def test_fingerprint_of_a_draft_without_aux_states_is_one_clear_line(tiny_targets, make_draft):
    from eagle_audit.fingerprint.api import fingerprint

    def drop_fc(sd):
        del sd["fc.weight"]

    draft = make_draft(extra={"eagle_config": {"use_aux_hidden_state": False}}, edit=drop_fc)
    with pytest.raises(AuditError, match="no wiring in its weights to fingerprint"):
        fingerprint(str(tiny_targets["llama"].path), str(draft), prompt_ids=PROMPTS, use_installed_engine=False)


def test_fingerprint_runs_the_mla_class(tiny_targets, tmp_path):
    from eagle_audit.fingerprint.api import fingerprint

    draft = _mla_draft(tmp_path / "mla-fp")
    r = fingerprint(str(tiny_targets["deepseek_v3"].path), str(draft), prompt_ids=PROMPTS, use_installed_engine=False)
    assert r.to_json()["draft"]["path"] == str(draft)
