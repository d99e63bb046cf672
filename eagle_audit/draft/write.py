"""Write EAGLE-3 draft checkpoints in the SGLang/SpecForge layout (used by the demo, the tests and
canary training). Weight names and shapes follow SGLang 0.5.23 ``models/llama_eagle3.py``:

  ======================================  ===========================  ===========================
  name                                    shape                        meaning
  ======================================  ===========================  ===========================
  ``fc.weight``                           [H, n_aux * H_t]             aux states -> draft width
  ``midlayer.input_layernorm.weight``     [H]                          norm of the token embedding
  ``midlayer.hidden_norm.weight``         [H]                          norm of the fc output
  ``midlayer.self_attn.q_proj.weight``    [heads * hd, 2H]             layer 0 reads cat(embed, h)
  ``midlayer.self_attn.{k,v}_proj.weight`` [kv_heads * hd, 2H]
  ``midlayer.self_attn.o_proj.weight``    [H, heads * hd]
  ``midlayer.post_attention_layernorm``   [H]
  ``midlayer.mlp.{gate,up}_proj.weight``  [I, H]; ``down_proj`` [H, I]
  ``norm.weight``                         [H]                          final draft norm
  ``lm_head.weight``                      [V_d, H]                     draft vocabulary head
  ``d2t``                                 [V_d] int64                  target id = i + d2t[i]
  ``t2d``                                 [V] bool                     target ids in the draft vocab
  ======================================  ===========================  ===========================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import torch


def draft_config(*, hidden_size: int, target_hidden_size: int, num_aux: int, vocab_size: int,
                 draft_vocab_size: int | None, num_heads: int, num_kv_heads: int, intermediate_size: int,
                 nested_ids: list[int] | None = None, top_level_ids: list[int] | None = None,
                 rope_theta: float = 10000.0, max_position_embeddings: int = 2048,
                 extra: Mapping[str, Any] | None = None) -> dict:
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden_size,
        "target_hidden_size": target_hidden_size, "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads, "head_dim": hidden_size // num_heads,
        "intermediate_size": intermediate_size, "num_hidden_layers": 1, "hidden_act": "silu",
        "rms_norm_eps": 1e-5, "vocab_size": vocab_size, "draft_vocab_size": draft_vocab_size,
        "max_position_embeddings": max_position_embeddings, "rope_theta": rope_theta,
        "tie_word_embeddings": False, "torch_dtype": "float32",
    }
    if nested_ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(nested_ids), "use_aux_hidden_state": True}
    if top_level_ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(top_level_ids)
    if extra:
        cfg.update(extra)
    return cfg


def random_weights(config: Mapping[str, Any], num_aux: int, seed: int = 0,
                   vocab_ids: torch.Tensor | None = None, with_d2t: bool = True) -> dict[str, torch.Tensor]:
    """Random draft weights of the right shapes (std 0.02), plus a valid vocab map over ``vocab_ids``
    (default: the first ``draft_vocab_size`` target ids)."""
    g = torch.Generator().manual_seed(seed)
    H, Ht = config["hidden_size"], config["target_hidden_size"]
    heads, kv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    inter, V = config["intermediate_size"], config["vocab_size"]
    Vd = config.get("draft_vocab_size") or V

    def w(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    sd = {
        "fc.weight": w(H, num_aux * Ht),
        "midlayer.input_layernorm.weight": torch.ones(H), "midlayer.hidden_norm.weight": torch.ones(H),
        "midlayer.post_attention_layernorm.weight": torch.ones(H),
        "midlayer.self_attn.q_proj.weight": w(heads * hd, 2 * H), "midlayer.self_attn.k_proj.weight": w(kv * hd, 2 * H),
        "midlayer.self_attn.v_proj.weight": w(kv * hd, 2 * H), "midlayer.self_attn.o_proj.weight": w(H, heads * hd),
        "midlayer.mlp.gate_proj.weight": w(inter, H), "midlayer.mlp.up_proj.weight": w(inter, H),
        "midlayer.mlp.down_proj.weight": w(H, inter), "norm.weight": torch.ones(H), "lm_head.weight": w(Vd, H),
    }
    if with_d2t and Vd != V:
        sd.update(vocab_map(vocab_ids if vocab_ids is not None else torch.arange(Vd), V))
    return sd


def vocab_map(used_target_ids: torch.Tensor, target_vocab: int) -> dict[str, torch.Tensor]:
    """``d2t`` (offsets) and ``t2d`` (mask) for the sorted target ids the draft vocabulary keeps."""
    used = torch.sort(used_target_ids.long()).values
    t2d = torch.zeros(target_vocab, dtype=torch.bool)
    t2d[used] = True
    return {"d2t": used - torch.arange(used.shape[0]), "t2d": t2d}


def write_draft(out_dir: str | Path, config: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]) -> Path:
    """``config.json`` and ``model.safetensors`` in ``out_dir`` (created if needed), each written
    atomically (a temporary file beside it, then a rename)."""
    import os
    import tempfile

    from safetensors.torch import save_file

    from ..outputs import write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.json", json.dumps(dict(config), indent=2) + "\n")
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".model.safetensors.", suffix=".tmp")
    os.close(fd)
    try:
        save_file({k: v.contiguous() for k, v in state_dict.items()}, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out / "model.safetensors")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def write_canary(out_dir: str | Path, config: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]) -> Path:
    """A draft written by ``train-canary``: :func:`write_draft` plus the marker file that lets a later
    run replace it (:func:`eagle_audit.outputs.check_canary_out`). A new or empty directory is built
    under a temporary name and renamed into place, so a killed run leaves no half canary."""
    from ..version import __version__
    from ..outputs import mark_canary, new_directory

    out = Path(out_dir)
    marker = {"written_by": "eagle-audit train-canary", "eagle_audit": __version__}
    if out.is_dir() and any(out.iterdir()):  # a canary being replaced (or a directory the user forced)
        write_draft(out, config, state_dict)
        mark_canary(out, marker)
        return out
    with new_directory(out) as tmp:
        write_draft(tmp, config, state_dict)
        mark_canary(tmp, marker)
    return out
