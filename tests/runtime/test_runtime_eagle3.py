"""The PyTorch EAGLE-3 draft runtime: shapes and SGLang 0.5.23 semantics, on tiny random drafts."""

from __future__ import annotations

import json

import pytest
import torch

from eagle_audit.runtime.rollout import rollout
from eagle_audit.runtime.eagle3 import (DraftFlags, build_draft, flags_from_config, load_draft_model, read_weights, arch_from_spec)
from eagle_audit.draft.read import read_draft
from eagle_audit.draft.write import write_draft
from eagle_audit.errors import BadCheckpoint

from tests.accept.accept_tiny import HIDDEN, VOCAB, write_tiny_draft


def _load(tiny_target, path, flags=None):
    spec = read_draft(str(path))
    return load_draft_model(spec, tiny_target, flags or flags_from_config(spec.config, spec.layout))


def _inputs(T=7, W=3 * HIDDEN, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 200, (2, T), generator=g), torch.randn(2, T, W, generator=g)


def test_shapes_and_vocab_map(tiny_target, tmp_path):
    d = _load(tiny_target, write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=10))
    ids, aux = _inputs()
    out = d(ids, aux, torch.arange(7))
    assert out.logits.shape == (2, 7, 128) and out.hidden.shape == (2, 7, HIDDEN)
    assert [kv[0].shape for kv in out.kv] == [(2, 2, 7, HIDDEN // 4)]
    d2t = read_weights(tmp_path / "d")["d2t"]
    assert torch.equal(d.to_target_ids(torch.arange(128)), torch.arange(128) + d2t)


def test_fc_only_when_width_differs(tiny_target, tmp_path):
    d = _load(tiny_target, write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4]))
    h = torch.randn(1, 3, HIDDEN)
    assert d.project(h) is h  # draft-wide recurrent hidden skips fc
    x = torch.randn(1, 3, 3 * HIDDEN)
    assert torch.allclose(d.project(x), d.fc(x))
    with pytest.raises(BadCheckpoint):
        d.project(torch.randn(1, 3, 2 * HIDDEN))


def test_norm_before_fc_and_fc_norm(tiny_target, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    w = read_weights(path)
    w["input_norm.weight"] = torch.full((3 * HIDDEN,), 2.0)
    for i in range(3):
        w[f"fc_norm.{i}.weight"] = torch.full((HIDDEN,), 0.5 + i)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update({"norm_before_fc": True, "fc_norm": True})
    write_draft(tmp_path / "n", cfg, {("midlayer." + k[9:] if k.startswith("layers.0.") else k): v for k, v in w.items()})
    d = _load(tiny_target, tmp_path / "n")
    assert d.flags.norm_before_fc and d.flags.fc_norm
    x = torch.randn(1, 2, 3 * HIDDEN)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * 2.0  # one RMSNorm over n*H_t
    chunks = [c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + 1e-5) * (0.5 + i) for i, c in enumerate(y.split(HIDDEN, -1))]
    assert torch.allclose(d.project(x), d.fc(torch.cat(chunks, -1)), atol=1e-5)


def test_layer0_residual_is_fc_output_and_norm_output(tiny_target, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=10)
    ids, aux = _inputs()
    spec = read_draft(str(path))
    base = load_draft_model(spec, tiny_target, DraftFlags())
    layer = base.layers[0]
    # manual SGLang layer 0: residual = fc(aux) un-normed
    h = base.fc(aux)
    from eagle_audit.runtime.eagle3 import rope_cos_sin
    cos, sin = rope_cos_sin(torch.arange(7)[None], base.arch.head_dim, base.arch.rope_theta, torch.float32)
    x = torch.cat([layer.input_layernorm(torch.nn.functional.embedding(ids, base.embed)), layer.hidden_norm(h)], -1)
    attn, _ = layer.self_attn(x, cos, sin, None, None)
    s = attn + h
    s = layer.mlp(layer.post_attention_layernorm(s)) + s
    out = base(ids, aux, torch.arange(7))
    assert torch.allclose(out.hidden, s, atol=1e-5)  # recurrent hidden = pre-norm sum
    assert torch.allclose(out.logits, base.lm_head(base.norm(s)), atol=1e-4)
    normed = load_draft_model(spec, tiny_target, DraftFlags(norm_output=True))(ids, aux, torch.arange(7))
    assert torch.allclose(normed.hidden, base.norm(s), atol=1e-5)
    vllm = load_draft_model(spec, tiny_target, DraftFlags(norm_before_residual=True, semantics="vllm"))(ids, aux, torch.arange(7))
    assert not torch.allclose(vllm.hidden, out.hidden, atol=1e-3)  # residual = normed h changes the result


def test_layouts_load_the_same_draft(tiny_target, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=10)
    w = read_weights(path)  # canonical names: layers.0.*
    cfg = json.loads((path / "config.json").read_text())
    layer_cfg = {k: cfg.pop(k) for k in ("num_attention_heads", "num_key_value_heads", "head_dim",
                                          "intermediate_size", "rms_norm_eps", "rope_theta", "hidden_size", "vocab_size")}
    spec_cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": 128,
                "transformer_layer_config": layer_cfg, "eagle_aux_hidden_state_layer_ids": [1, 3, 5],
                "target_hidden_size": HIDDEN}
    write_draft(tmp_path / "s", spec_cfg, w)
    a, b = _load(tiny_target, path), _load(tiny_target, tmp_path / "s")
    assert read_draft(str(tmp_path / "s")).layout == "speculators"
    ids, aux = _inputs()
    assert torch.allclose(a(ids, aux, torch.arange(7)).logits, b(ids, aux, torch.arange(7)).logits, atol=1e-6)


def test_multi_layer_draft(tiny_target, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=10)
    w = read_weights(path)
    for k in list(w):
        if k.startswith("layers.0.") and "input_layernorm" not in k:
            v = w[k]
            if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
                v = v[:, :HIDDEN]  # layers >= 1 read H-wide input
            w["layers.1." + k[9:]] = v.clone()
    cfg = json.loads((path / "config.json").read_text())
    cfg["num_hidden_layers"] = 2
    write_draft(tmp_path / "m", cfg, w)
    d = _load(tiny_target, tmp_path / "m")
    assert len(d.layers) == 2
    ids, aux = _inputs()
    out = d(ids, aux, torch.arange(7))
    assert out.logits.shape == (2, 7, 128) and len(out.kv) == 2


def test_rollout_matches_incremental_decoding(tiny_target, tmp_path):
    """Batched rollouts (step-0 prefix + own diag keys) equal a cached, token-by-token draft."""
    d = _load(tiny_target, write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4], scale=20))
    ids, aux = _inputs(T=9)
    ids, aux = ids[:1], aux[:1]
    ro = rollout(d, ids, aux, 3)
    with torch.no_grad():
        for t in (0, 4, 8):
            out = d(ids[:, :t + 1], aux[:, :t + 1], torch.arange(t + 1))
            cache, g = out.kv, out.hidden[:, -1:]
            tok = int(d.to_target_ids(out.logits[0, -1].argmax()))
            assert tok == int(ro.tokens[0][0, t])
            for k in (1, 2):
                o = d(torch.tensor([[tok]]), g, torch.tensor([t + k]), cache)
                cache = [(torch.cat([c[0], n[0]], 2), torch.cat([c[1], n[1]], 2)) for c, n in zip(cache, o.kv)]
                tok, g = int(d.to_target_ids(o.logits[0, -1].argmax())), o.hidden
                assert tok == int(ro.tokens[k][0, t])


def test_bad_vocab_map_rejected(tiny_target, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    w = read_weights(path)
    w["d2t"] = w["d2t"] + VOCAB  # every target id out of range
    write_draft(tmp_path / "b", json.loads((path / "config.json").read_text()), w)
    spec = read_draft(str(tmp_path / "b"))
    with pytest.raises(BadCheckpoint, match="d2t"):
        build_draft(arch_from_spec(spec, HIDDEN, VOCAB), DraftFlags(), read_weights(tmp_path / "b"),
                    tiny_target.model.get_input_embeddings().weight, None)
