"""Tiny random DeepSeek-V4 targets (hyper-connections: ``hc_mult`` streams) for the mHC tests.

:func:`tiny_v4_config` shrinks transformers' ``DeepseekV4Config`` (hidden 32, vocab 512, 4 streams by default) to
a model that runs on the CPU in well under a second; :func:`save_tiny_v4` writes it (and the tests' tiny
tokenizer) with ``save_pretrained``. Where transformers has no ``deepseek_v4`` (before 5.25) the caller skips.
"""

from __future__ import annotations

from pathlib import Path

VOCAB, HIDDEN = 512, 32


def tiny_v4_config(layers: int = 4, streams: int = 4):
    import pytest

    T = pytest.importorskip("transformers")
    if not hasattr(T, "DeepseekV4Config"):
        pytest.skip(f"transformers {T.__version__} has no deepseek_v4 (5.25 has)")
    return T.DeepseekV4Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, moe_intermediate_size=32, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8, q_lora_rank=16, num_experts_per_tok=2,
        n_routed_experts=4, n_shared_experts=1, max_position_embeddings=512, hc_mult=streams, sliding_window=16,
        o_groups=2, o_lora_rank=16, index_n_heads=2, index_head_dim=8, index_topk=8, num_nextn_predict_layers=1,
        bos_token_id=VOCAB - 2, eos_token_id=VOCAB - 3, pad_token_id=None,
        architectures=["DeepseekV4ForCausalLM"])


def tiny_v4_model(layers: int = 4, streams: int = 4, seed: int = 0):
    import torch
    from transformers import DeepseekV4ForCausalLM

    torch.manual_seed(seed)
    return DeepseekV4ForCausalLM(tiny_v4_config(layers, streams)).eval()


def save_tiny_v4(path: Path, layers: int = 4, streams: int = 4, seed: int = 0, tokenizer=None) -> Path:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tiny_v4_model(layers, streams, seed).save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return Path(path)
