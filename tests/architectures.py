"""Tiny random models of every decoder-only architecture the installed transformers registers
(``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``), for tests/test_architectures.py.

Which model types count as decoder-only is read from the registry, never from a hand list: a causal-LM
model type is left out when the same type also has a masked-LM head (an encoder, BERT-like, that
transformers can also run "as a decoder") or a sequence-to-sequence head (names only: nothing is imported
at collection); :func:`tiny_config` refuses a type whose config is an encoder-decoder (``is_encoder_decoder``).

:func:`tiny_config` shrinks the type's default config (and every sub-config) by attribute name: widths,
heads, experts, vocabulary, positions, the layer count, and every per-layer list cut to the new count.
A type whose shrunk model still has more than :data:`MAX_PARAMS` parameters, or whose config or model
cannot be built at that size, raises :class:`NoTinyModel` with the reason (the test reports it).
"""

from __future__ import annotations

import copy
from typing import Any

LAYERS = 4
VOCAB = 512
MAX_PARAMS = 25_000_000

#: attribute -> tiny value, set wherever the config has the attribute (the top config and every sub-config)
SIZES: dict[str, Any] = {
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "n_embed": 64, "embed_dim": 64, "dim": 64, "model_dim": 64,
    "intermediate_size": 128, "ffn_hidden_size": 128, "n_inner": 128, "ffn_dim": 128, "d_ff": 128,
    "ffn_embed_dim": 128, "mlp_hidden_size": 128, "block_ffn_dim": 128,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "attention_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "n_kv_heads": 2, "multi_query_group_num": 2, "kv_heads": 2,
    "head_dim": 16, "attention_head_dim": 16, "kv_channels": 16, "global_head_dim": 16,
    "vocab_size": VOCAB, "max_position_embeddings": 512, "n_positions": 512, "max_seq_len": 512,
    "seq_length": 512, "max_sequence_length": 512,
    # mixture of experts
    "num_experts": 4, "n_routed_experts": 4, "num_local_experts": 4, "moe_num_experts": 4, "n_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "moe_k": 2, "num_selected_experts": 2,
    "moe_intermediate_size": 32, "expert_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "moe_ffn_hidden_size": 32, "n_shared_experts": 1, "num_shared_experts": 1, "n_group": 1, "topk_group": 1,
    "first_k_dense_replace": 1,
    # multi-head latent attention
    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "qk_head_dim": 16,
    # state-space and linear-attention blocks
    "state_size": 8, "ssm_state_size": 8, "mamba_d_state": 8, "mamba_n_heads": 4, "mamba_d_head": 32,
    "mamba_expand": 2, "mamba_n_groups": 1, "n_groups": 1, "mamba_headdim": 16, "time_step_rank": 8,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "conv_kernel": 4, "linear_conv_kernel_dim": 4, "num_hash_buckets": 16,
    "rotary_dim": 8, "rotary_emb_base": 10000,
    "word_embed_proj_dim": 64,  # OPT: as its models but opt-350m (whose last hidden state is projected after the norm)
    "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16, "num_kv_shared_layers": 0,
    "laurel_rank": 8, "index_head_dim": 16, "index_n_heads": 2,
    "sliding_window": 16, "attention_window_size": 16, "window_size": 16, "rope_dim": 16,
    # vision / audio towers of multimodal causal LMs
    "image_size": 16, "patch_size": 4, "num_channels": 3, "vision_hidden_size": 64, "depth": 1,
    "out_hidden_size": 64, "projection_dim": 64,
}

#: layer-count attributes, set to LAYERS (sub-configs of a vision tower get 1)
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers")


class NoTinyModel(Exception):
    """This model type has no tiny random model here (the reason says why)."""


def decoder_only_types() -> dict[str, str]:
    """model type -> causal-LM class name, for the decoder-only types of the installed transformers."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                                                        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)

    skip = set(MODEL_FOR_MASKED_LM_MAPPING_NAMES) | set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    return dict(sorted((t, c) for t, c in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if t not in skip))


#: the engine releases whose served architectures the matrix must cover (tests/test_architectures.py): the newest
#: of each engine, every draft family it serves (the release data, eagle_audit/conventions/releases.py)
SERVING = (("vllm", "0.34.0"), ("vllm-dflash", "0.34.0"), ("sglang", "0.5.23"), ("sglang-dflash", "0.5.23"),
           ("sglang-dspark", "0.5.23"))


def engine_served_types() -> dict[str, tuple[str, tuple[str, ...]]]:
    """model type -> (transformers class, the engine conventions that map it to a capture rule), for every
    architecture one of :data:`SERVING` serves drafts for and the installed transformers registers, as a causal LM
    or as an image-text-to-text wrapper (the engines capture in its language model)."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

    from eagle_audit.conventions.releases import release_data

    by_class: dict[str, list[str]] = {}  # a class several model types share (LlamaForCausalLM: exaone, llama...)
    for mapping in (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES):
        for model_type, cls in mapping.items():
            for name in (cls if isinstance(cls, (list, tuple)) else (cls,)):
                by_class.setdefault(name, []).append(model_type)
    served: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name, version in SERVING:
        data = release_data(name, version)[0]
        for arch, rule in data["architectures"].items():
            if rule not in data["rules"]:  # an architecture the engine refuses, said in a sentence
                continue
            for model_type in by_class.get(arch, ()):  # engines pick the class by `architectures`
                cls, engines = served.get(model_type, (arch, ()))
                served[model_type] = (cls, engines + (f"{name}@{version}",))
    return dict(sorted(served.items()))


def _shrink(cfg, layers: int) -> None:
    old_n = next((getattr(cfg, k) for k in LAYER_KEYS if isinstance(getattr(cfg, k, None), int)), None)
    # as many key/value heads as query heads in the default (multi-head latent attention, GLM-5 Next): kept so
    mha = isinstance(cfg.__dict__.get("num_key_value_heads"), int) and \
        cfg.__dict__.get("num_key_value_heads") == cfg.__dict__.get("num_attention_heads")
    for key, value in SIZES.items():
        if key in cfg.__dict__ or (key in getattr(cfg, "attribute_map", {})):
            try:
                cur = getattr(cfg, key, None)
            except Exception:  # noqa: BLE001 - e.g. a per-layer attribute of a heterogeneous config
                continue
            if cur is None and key in ("q_lora_rank",):
                continue  # None means "no low-rank q": keep it
            if isinstance(cur, bool) or (cur is not None and not isinstance(cur, int)):
                continue
            try:
                setattr(cfg, key, value)
            except Exception:  # noqa: BLE001
                pass
    for key in LAYER_KEYS:
        if isinstance(cfg.__dict__.get(key), int) or key in getattr(cfg, "attribute_map", {}):
            try:
                setattr(cfg, key, layers)
            except Exception:  # noqa: BLE001
                pass
    if mha:
        cfg.num_key_value_heads = cfg.num_attention_heads
    _shrink_mrope(cfg)
    if isinstance(cfg.__dict__.get("qk_rope_head_dim"), int) and "head_dim" in cfg.__dict__:
        cfg.head_dim = cfg.qk_rope_head_dim  # multi-head latent attention: head_dim is the rotary part
    d = cfg.__dict__
    if all(isinstance(d.get(k), int) for k in ("expand", "num_heads", "head_dim", "hidden_size")):
        cfg.head_dim = d["hidden_size"] * d["expand"] // d["num_heads"]  # Mamba-2: heads x head_dim = expanded width
    if isinstance(d.get("per_layer_config"), dict):  # heterogeneous configs: entries for layers that remain
        cfg.per_layer_config = {k: v for k, v in d["per_layer_config"].items() if int(k) < layers}
    if old_n:  # every per-layer list (layer_types, block patterns, per-layer sizes) cut to the new count
        for key, value in list(cfg.__dict__.items()):
            if isinstance(value, (list, tuple)) and len(value) == old_n and old_n != layers:
                setattr(cfg, key, type(value)(value[:layers]))


def _shrink_mrope(cfg) -> None:
    """Multimodal rotary sections (Qwen2.5-VL: ``mrope_section`` sums to head_dim / 2) cut in proportion to the
    tiny head_dim."""
    head_dim = cfg.__dict__.get("head_dim") or (cfg.__dict__.get("hidden_size", 0) // max(cfg.__dict__.get("num_attention_heads") or 1, 1))
    for key in ("rope_parameters", "rope_scaling"):
        rope = cfg.__dict__.get(key)
        sections = rope.get("mrope_section") if isinstance(rope, dict) else None
        if not (isinstance(sections, list) and sections and head_dim):
            continue
        half, total = head_dim // 2, sum(sections)
        cut = [max(1, s * half // total) for s in sections]
        cut[-1] += half - sum(cut)
        rope["mrope_section"] = cut
    rope = cfg.__dict__.get("rope_parameters")
    if getattr(cfg, "model_type", None) in MROPE_UNSAID and isinstance(rope, dict) and "mrope_section" not in rope \
            and head_dim:  # the model's code falls back to the full-size [16, 24, 24] when the config says none
        half = head_dim // 2
        rope["mrope_section"] = [half // 4, half // 4, half - 2 * (half // 4)]


#: text configs whose multimodal rotary sections the model's code defaults to full size when the config has none
MROPE_UNSAID = ("qwen2_5_vl_text",)


def tiny_config(model_type: str):
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.for_model(model_type)
    except Exception as e:  # noqa: BLE001
        raise NoTinyModel(f"its default config cannot be built ({type(e).__name__}: {str(e)[:160]})") from None
    if getattr(cfg, "is_encoder_decoder", False):
        raise NoTinyModel("an encoder-decoder (its config's is_encoder_decoder), not a decoder-only model")
    cfg = copy.deepcopy(cfg)
    subs = [getattr(cfg, k) for k in (getattr(cfg, "sub_configs", None) or {}) if getattr(cfg, k, None) is not None]
    _shrink(cfg, LAYERS)
    text = cfg.get_text_config()
    for sub in subs:
        _shrink(sub, LAYERS if sub is text else 1)
    for sub in [cfg, *subs]:  # token ids inside the tiny vocabulary
        for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            v = getattr(sub, key, None)
            if isinstance(v, int) and not isinstance(v, bool) and v >= VOCAB:
                setattr(sub, key, VOCAB - 1 - ("pad bos eos decoder_start".split().index(key.split("_token")[0])))
            elif isinstance(v, list):
                setattr(sub, key, [x for x in v if isinstance(x, int) and x < VOCAB] or [VOCAB - 3])
    for key in (getattr(cfg, "sub_configs", None) or {}):
        sub = getattr(cfg, key, None)
        if sub is not None and getattr(sub, "is_heterogeneous", False):
            setattr(cfg, key, _rebuilt(sub))
    return _rebuilt(cfg) if getattr(cfg, "is_heterogeneous", False) else cfg


def _rebuilt(cfg):
    """A heterogeneous config (Gemma 4: per-layer overrides keyed by the full-size layer indices, fixed when the
    config was built) built again from its shrunk attributes, so the overrides follow the tiny layer count."""
    data = cfg.to_dict()
    data.pop("per_layer_config", None)
    data["global_head_dim"] = SIZES["global_head_dim"]
    return type(cfg)(**data)


def tiny_model(model_type: str, cls_name: str, seed: int = 0):
    """(model in eval mode, float32, random weights, on the CPU) for ``model_type``; :class:`NoTinyModel`
    where none can be built here."""
    try:
        return _tiny_model(model_type, cls_name, seed)
    except NoTinyModel:
        raise
    except Exception as e:  # noqa: BLE001 - building the model is transformers' code, on our tiny config
        raise NoTinyModel(f"{cls_name} cannot be built ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None


def _tiny_model(model_type: str, cls_name: str, seed: int = 0):  # noqa: C901
    import torch
    import transformers

    cfg = tiny_config(model_type)
    cls = getattr(transformers, cls_name, None)
    if cls is None:
        raise NoTinyModel(f"transformers exports no {cls_name}")
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in cls(copy.deepcopy(cfg)).parameters())
    except Exception as e:  # noqa: BLE001 - a causal LM of a composite type may take the text config alone
        text = cfg.get_text_config()
        try:
            if text is cfg:
                raise
            with torch.device("meta"):
                params = sum(p.numel() for p in cls(copy.deepcopy(text)).parameters())
            cfg = text
        except Exception:  # noqa: BLE001
            raise NoTinyModel(f"{cls_name} cannot be built from the tiny config ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None
    if params > MAX_PARAMS:
        raise NoTinyModel(f"{cls_name} still has {params:,} parameters at the tiny sizes (> {MAX_PARAMS:,})")
    validate = getattr(cfg, "validate", None)  # strict configs check themselves again when saved
    try:
        if callable(validate):
            validate()
    except Exception as e:  # noqa: BLE001
        raise NoTinyModel(f"the tiny config is inconsistent ({type(e).__name__}: {str(e).splitlines()[-1][:200]})") from None
    torch.manual_seed(seed)
    try:
        model = cls(cfg).eval()
    except Exception as e:  # noqa: BLE001
        raise NoTinyModel(f"{cls_name} cannot be built ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    return model.float()
