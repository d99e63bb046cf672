"""eagle-audit's draft runtime, run with a trainer's declared semantics, == the trainer's own draft, driven the
way its training loop drives it, over three teacher-forced steps.

SpecForge 0.2.0: ``LlamaForCausalLMEagle3`` inside ``OnlineEagle3Model.forward`` (algorithms/eagle3/model.py, the
EAGLE-3 TTT loop: fc once, backbone, compute_logits, shift the ids, carry the backbone output), with its
per-step logits read at ``_acc_and_loss``. speculators 0.9.0: ``Eagle3DraftModel.forward`` (models/eagle3/core.py),
its per-step logits read at ``lm_head``. Both drafts are saved in the trainer's own export layout (SpecForge: the
state dict and config.json SGLang loads; speculators: ``save_pretrained``) and read back by eagle-audit.
eagle-audit's side: :func:`eagle_audit.runtime.rollout.rollout` with the teacher tokens, the flags from
:func:`eagle_audit.resolution.flags_of` under the trainer's built-in convention.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import save_file

from eagle_audit.runtime.rollout import rollout
from eagle_audit.runtime.eagle3 import arch_from_spec, build_draft, read_weights
from eagle_audit.conventions import get_convention
from eagle_audit.draft.read import read_draft
from eagle_audit.resolution import flags_of

pytestmark = pytest.mark.usefixtures("one_thread")

V, DV, T, STEPS = 512, 128, 12, 3
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "beta_fast": 32.0, "beta_slow": 1.0,
        "mscale": 1.0, "mscale_all_dim": 0.0}  # SpecForge's yarn needs every parameter stated
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8}


def _randomise(model: torch.nn.Module, d2t_owner) -> None:
    """Weights far from their init (norm weights away from 1) and a real draft->target map."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2 if p.dim() > 1 else torch.rand_like(p) + 0.5)
        d2t = torch.sort(torch.randperm(V)[:DV]).values - torch.arange(DV)
        d2t_owner.d2t.copy_(d2t)
        t2d = torch.zeros(V, dtype=torch.bool)
        t2d[d2t + torch.arange(DV)] = True
        d2t_owner.t2d.copy_(t2d)


def _ours(directory, trainer: str, target_hidden: int, embed: torch.Tensor, **flag_changes):
    spec = read_draft(str(directory))
    flags = replace(flags_of(get_convention(trainer, "trainer"), spec.config), **flag_changes)
    arch = arch_from_spec(spec, target_hidden, V, flags.rope_scaling)
    return build_draft(arch, flags, read_weights(directory), embed, None, str(directory)), flags


def _compare(theirs: list[torch.Tensor], their_d2t: torch.Tensor, ours, ids, hidden) -> list[tuple[float, float]]:
    teacher = torch.cat([ids, torch.zeros(ids.shape[0], STEPS - 1, dtype=ids.dtype)], 1)  # shifted ids, zero-padded
    with torch.no_grad():
        r = rollout(ours, ids, hidden, STEPS, teacher=teacher, keep_logits=True)
    out = []
    for a, b in zip(theirs, r.logits, strict=True):
        top = a.argmax(-1)
        agree = ((top + their_d2t[top]) == ours.to_target_ids(b.argmax(-1))).float().mean().item()
        out.append(((a - b).abs().max().item(), agree))
    return out


SPECFORGE_CASES = {  # name -> (config attributes, target hidden, draft hidden, rope_scaling)
    "plain": ({}, 32, 32, None),
    "fc_norm": ({"fc_norm": True}, 32, 32, None),
    "norm_output": ({"norm_output": False}, 32, 32, None),  # absent = true = norm before lm_head only
    "norm_before_fc": ({"norm_before_fc": True}, 32, 32, None),  # not implemented by SpecForge: ignored
    "norm_before_residual": ({"norm_before_residual": True}, 32, 32, None),  # not implemented: ignored
    "fc_width_equals_hidden": ({}, 16, 48, None),  # 3 x 16 = 48: fc still applied
    "llama3_rope": ({}, 32, 32, LLAMA3),
    "yarn_rope": ({}, 32, 32, YARN),
    "linear_rope": ({}, 32, 32, {"rope_type": "linear", "factor": 4.0}),
}


def specforge_run(trainers, tmp_path, attrs: dict, target_hidden: int, hidden: int, rope):
    from transformers import LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                      vocab_size=V, num_hidden_layers=1, rms_norm_eps=1e-6, max_position_embeddings=256,
                      rope_theta=10000.0, rope_scaling=rope)
    cfg.draft_vocab_size, cfg.target_hidden_size = DV, target_hidden
    for k, v in attrs.items():
        setattr(cfg, k, v)
    draft = trainers.SpecForgeDraft(cfg).float().eval()
    _randomise(draft, draft)
    config = cfg.to_dict() | {"architectures": ["LlamaForCausalLMEagle3"],
                              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    save_file({k: v.contiguous() for k, v in draft.state_dict().items()}, str(tmp_path / "model.safetensors"))
    loop = trainers.OnlineEagle3Model(draft, length=STEPS, attention_backend="sdpa")
    logits = []

    def record(**kw):  # the per-step metrics hook of the loop: keep the logits, skip the loss
        logits.append(kw["logits"].detach().clone())
        z = torch.zeros(())
        return z, z, z, z, z, z, z

    loop._acc_and_loss = record
    ids, hs = torch.randint(0, V, (2, T)), torch.randn(2, T, 3 * target_hidden)
    with torch.no_grad():
        loop(input_ids=ids, attention_mask=torch.ones(2, T, dtype=torch.bool), target=torch.randn(2, T, V),
             loss_mask=torch.ones(2, T, 1), hidden_states=hs)
    return draft, logits, ids, hs


@pytest.mark.parametrize("case", list(SPECFORGE_CASES))
def test_runtime_under_specforge_semantics_matches_specforge(case, trainers, tmp_path):
    attrs, ht, h, rope = SPECFORGE_CASES[case]
    draft, logits, ids, hs = specforge_run(trainers, tmp_path, attrs, ht, h, rope)
    ours, flags = _ours(tmp_path, "specforge", ht, draft.embed_tokens.weight.detach())
    assert not flags.fc_skip_at_hidden_width and not flags.norm_before_fc and not flags.norm_before_residual
    assert flags.head_norm == attrs.get("norm_output", True) and not flags.norm_output
    for step, (diff, agree) in enumerate(_compare(logits, draft.d2t, ours, ids, hs)):
        assert diff <= 1e-4 and agree == 1.0, (case, step, diff, agree)
    if case == "fc_width_equals_hidden":  # SGLang's width rule would skip fc here: a different draft
        skipping, _ = _ours(tmp_path, "specforge", ht, draft.embed_tokens.weight.detach(), fc_skip_at_hidden_width=True)
        assert max(d for d, _ in _compare(logits, draft.d2t, skipping, ids, hs)) > 1e-2
    if case.endswith("_rope"):  # the scaling is exercised: default RoPE gives another draft
        plain, _ = _ours(tmp_path, "specforge", ht, draft.embed_tokens.weight.detach(), rope_scaling=())
        assert max(d for d, _ in _compare(logits, draft.d2t, plain, ids, hs)) > 1e-3


SPECULATORS_CASES = {  # name -> (config fields, aux states, rope_scaling)
    "plain": ({}, 3, None),
    "fc_norm": ({"fc_norm": True}, 3, None),
    "norm_output": ({"norm_output": True}, 3, None),
    "norm_before_fc": ({"norm_before_fc": True}, 3, None),
    "norm_before_residual": ({"norm_before_residual": True}, 3, None),
    "one_slot_fc_width_equals_hidden": ({}, 1, None),
    "llama3_rope": ({}, 3, LLAMA3),
}


@pytest.mark.parametrize("case", list(SPECULATORS_CASES))
def test_runtime_under_speculators_semantics_matches_speculators(case, trainers, tmp_path):
    from transformers import LlamaConfig

    fields, n_aux, rope = SPECULATORS_CASES[case]
    H = 32
    torch.manual_seed(0)
    layer = LlamaConfig(hidden_size=H, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, head_dim=8,
                        vocab_size=V, num_hidden_layers=1, rms_norm_eps=1e-6, max_position_embeddings=256,
                        rope_theta=10000.0, rope_scaling=rope)
    layer._attn_implementation = "eager"  # dense masks (flex attention needs compilation)
    spec_cfg = trainers.SpeculatorsConfig(
        algorithm="eagle3", proposal_methods=[trainers.GreedyTokenProposalConfig(speculative_tokens=STEPS)],
        default_proposal_method="greedy",
        verifier=trainers.VerifierConfig(name_or_path=None, architectures=["LlamaForCausalLM"]))
    cfg = trainers.Eagle3SpeculatorConfig(transformer_layer_config=layer, speculators_config=spec_cfg,
                                          draft_vocab_size=DV, eagle_aux_hidden_state_layer_ids=[2, 4, 5][:n_aux],
                                          **fields)
    draft = trainers.Eagle3DraftModel(cfg).float().eval()
    _randomise(draft, draft)
    draft.save_pretrained(tmp_path)
    logits = []
    hook = draft.lm_head.register_forward_hook(lambda mod, inp, out: logits.append(out.detach().clone()))
    ids, hs = torch.randint(0, V, (1, T)), torch.randn(1, T, n_aux * H)
    with torch.no_grad():
        draft(hidden_states=hs, input_ids=ids, document_ids=torch.zeros(1, T, dtype=torch.long), ttt_steps=STEPS)
    hook.remove()
    ours, flags = _ours(tmp_path, "speculators", H, draft.embed_tokens.weight.detach())
    assert not flags.fc_skip_at_hidden_width
    for name, value in fields.items():
        assert getattr(flags, name) is value
    for step, (diff, agree) in enumerate(_compare(logits, draft.d2t, ours, ids, hs)):
        assert diff <= 1e-4 and agree == 1.0, (case, step, diff, agree)
