"""eagle-audit's draft runtime (eagle_audit/runtime/eagle3.py), run with the semantics of the engine class that
serves the draft, == that class's own forward executed from the wheel (draft_forward_engine.py), on tiny random
drafts of each class: SGLang 0.5.23 kimi_k25_eagle3 (MLA), vLLM 0.33.0 deepseek_eagle3 (MLA) and qwen3_eagle3
(Qwen3 attention). The attention core on the engines' side is transformers' own module for the architecture
(the engines' kernels need CUDA): the docstring of draft_forward_engine.py says what is run and what is supplied."""

from __future__ import annotations

import pytest
import torch

from tests.engine_wheels.draft_forward_engine import sglang_kimi, sglang_llama, vllm_draft
from eagle_audit.runtime.eagle3 import arch_from_spec, build_draft, read_weights
from eagle_audit.conventions import builtin_conventions
from eagle_audit.draft.read import read_draft
from eagle_audit.draft.write import write_draft
from eagle_audit.resolution import flags_of
from tests.wheels import WheelSource

pytestmark = pytest.mark.usefixtures("one_thread")
ENGINES = builtin_conventions("engine")
H, HT, V, DV, T = 32, 24, 256, 64, 7
MLA = dict(q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)


def _draft(tmp_path, arch: str, kind: str, n_aux: int = 3, **flags):
    g = torch.Generator().manual_seed(len(tmp_path.name) + n_aux)
    heads = 2
    cfg = {"architectures": [arch], "hidden_size": H, "target_hidden_size": HT, "num_attention_heads": heads,
           "num_key_value_heads": heads, "intermediate_size": 48, "num_hidden_layers": 1, "vocab_size": V,
           "draft_vocab_size": DV, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 64,
           "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": False, **flags}
    r = lambda *s: torch.randn(*s, generator=g) * 0.3  # noqa: E731
    w = lambda n: torch.rand(n, generator=g) + 0.5  # noqa: E731  norm weights away from 1
    sd = {"fc.weight": r(H, n_aux * HT), "norm.weight": w(H), "lm_head.weight": r(DV, H),
          "layers.0.input_layernorm.weight": w(H), "layers.0.hidden_norm.weight": w(H),
          "layers.0.post_attention_layernorm.weight": w(H), "layers.0.mlp.gate_proj.weight": r(48, H),
          "layers.0.mlp.up_proj.weight": r(48, H), "layers.0.mlp.down_proj.weight": r(H, 48),
          "d2t": torch.sort(torch.randperm(V, generator=g)[:DV]).values - torch.arange(DV)}
    a = "layers.0.self_attn."
    if kind == "mla":
        cfg.update(MLA, model_type="deepseek_v3", head_dim=MLA["qk_rope_head_dim"], rope_interleave=True,
                   n_routed_experts=1, first_k_dense_replace=1)
        m = MLA
        sd.update({a + "q_a_proj.weight": r(m["q_lora_rank"], 2 * H), a + "q_a_layernorm.weight": w(m["q_lora_rank"]),
                   a + "q_b_proj.weight": r(heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]), m["q_lora_rank"]),
                   a + "kv_a_proj_with_mqa.weight": r(m["kv_lora_rank"] + m["qk_rope_head_dim"], 2 * H),
                   a + "kv_a_layernorm.weight": w(m["kv_lora_rank"]),
                   a + "kv_b_proj.weight": r(heads * (m["qk_nope_head_dim"] + m["v_head_dim"]), m["kv_lora_rank"]),
                   a + "o_proj.weight": r(H, heads * m["v_head_dim"])})
    else:
        hd = H // heads
        cfg.update(model_type=kind, head_dim=hd)
        sd.update({a + "q_proj.weight": r(heads * hd, 2 * H), a + "k_proj.weight": r(heads * hd, 2 * H),
                   a + "v_proj.weight": r(heads * hd, 2 * H), a + "o_proj.weight": r(H, heads * hd)})
        if kind == "qwen3":
            sd.update({a + "q_norm.weight": w(hd), a + "k_norm.weight": w(hd)})
    if cfg.get("fc_norm"):
        sd.update({f"fc_norm.{i}.weight": w(HT) for i in range(n_aux)})
    if cfg.get("norm_before_fc"):
        sd["input_norm.weight"] = w(n_aux * HT)
    path = write_draft(tmp_path / "draft", cfg, sd)
    return path, cfg, {**sd, "embed": r(V, H)}


def _ours(path, engine: str, embed):
    spec = read_draft(str(path))
    flags = flags_of(ENGINES[engine], spec.config)
    arch = arch_from_spec(spec, HT, V, flags.rope_scaling, flags.attention)
    return build_draft(arch, flags, read_weights(path), embed, None, str(path)), flags


def _compare(ours, theirs, n_aux: int):
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, V, (T,), generator=g)
    positions = torch.arange(T)
    aux = torch.randn(T, n_aux * HT, generator=g)
    with torch.no_grad():
        want_logits, want_hidden = theirs(ids, positions, aux)
        out = ours(ids[None], aux[None], positions, from_target=True)
        # the next draft step reads the carried hidden (H wide: no fc on either side)
        want2, _ = theirs(ids, positions, want_hidden)
        out2 = ours(ids[None], out.hidden, positions, from_target=False)
    diffs = [(out.logits[0] - want_logits).abs().max().item(), (out.hidden[0] - want_hidden).abs().max().item(),
             (out2.logits[0] - want2).abs().max().item()]
    return max(diffs), diffs


CASES = {"plain": {}, "fc_norm": {"fc_norm": True}, "norm_output": {"norm_output": True},
         "norm_before_fc": {"norm_before_fc": True}, "norm_before_residual": {"norm_before_residual": True}}


@pytest.mark.parametrize("case", list(CASES))
def test_sglang_kimi_mla_class(sglang_wheel, tmp_path, case):
    path, cfg, sd = _draft(tmp_path, "Eagle3DeepseekV2ForCausalLM", "mla", **CASES[case])
    ours, flags = _ours(path, "sglang", sd["embed"])
    assert flags.attention == "mla" and not flags.norm_before_fc and not flags.norm_before_residual
    worst, diffs = _compare(ours, sglang_kimi(WheelSource(sglang_wheel), cfg, sd), 3)
    assert worst <= 1e-4, (case, diffs)


@pytest.mark.parametrize("case", list(CASES))
def test_sglang_llama_class(sglang_wheel, tmp_path, case):
    path, cfg, sd = _draft(tmp_path, "LlamaForCausalLMEagle3", "llama", **CASES[case])
    ours, flags = _ours(path, "sglang", sd["embed"])
    assert flags.attention == "llama" and not flags.norm_before_residual
    worst, diffs = _compare(ours, sglang_llama(WheelSource(sglang_wheel), cfg, sd), 3)
    assert worst <= 1e-4, (case, diffs)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name,arch,kind", [("llama_eagle3", "LlamaForCausalLMEagle3", "llama"),
                                            ("deepseek_eagle3", "Eagle3DeepseekV3ForCausalLM", "mla"),
                                            ("qwen3_eagle3", "Eagle3Qwen3ForCausalLM", "qwen3")])
def test_vllm_draft_classes(vllm_wheel, tmp_path, name, arch, kind, case):
    path, cfg, sd = _draft(tmp_path, arch, kind, **CASES[case])
    if name == "deepseek_eagle3" and case == "norm_before_fc":
        cfg = {**cfg, "norm_before_fc": False}  # deepseek_eagle3 has no norm_before_fc (its runtime ignores it too)
    ours, flags = _ours(path, "vllm", sd["embed"])
    assert flags.attention == kind
    worst, diffs = _compare(ours, vllm_draft(WheelSource(vllm_wheel), name, cfg, sd), 3)
    assert worst <= 1e-4, (name, case, diffs)


def test_the_attention_matters(sglang_wheel, tmp_path):
    """Running an MLA draft's weights as the Llama class would is refused (no silent Llama run), and the MLA
    runtime with RoPE pairs not interleaved gives another draft (the comparison above can fail)."""
    from dataclasses import replace

    from eagle_audit.errors import BadCheckpoint

    path, cfg, sd = _draft(tmp_path, "Eagle3DeepseekV2ForCausalLM", "mla")
    spec = read_draft(str(path))
    with pytest.raises(BadCheckpoint, match="weights are for mla attention"):
        arch_from_spec(spec, HT, V, attention="llama")
    ours, flags = _ours(path, "sglang", sd["embed"])
    arch = arch_from_spec(spec, HT, V, flags.rope_scaling, flags.attention)
    plain = build_draft(replace(arch, mla=replace(arch.mla, rope_interleave=False)), flags, read_weights(path),
                        sd["embed"], None)
    worst, _ = _compare(plain, sglang_kimi(WheelSource(sglang_wheel), cfg, sd), 3)
    assert worst > 1e-3
