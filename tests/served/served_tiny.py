"""The tiny target of the served-states tests: a random Llama (float32) with the test suite's byte-level
tokenizer's vocabulary size, saved with and without its weights."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

N_LAYERS, HIDDEN, VOCAB = 6, 32, 512  # HIDDEN and VOCAB as tests/conftest.py's tiny drafts expect


def prompts(n: int = 3, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (5 + 3 * i,), generator=g).tolist() for i in range(n)]


def tokenizer():
    """A byte-level tokenizer with exactly VOCAB ids (every byte a token, no merges)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    while len(vocab) < VOCAB:
        vocab[f"<|unused_{len(vocab)}|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def write_target(path: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=N_LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, eos_token_id=None,
                      bos_token_id=None, pad_token_id=None, architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(cfg).save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


def without_weights(target: Path, out: Path) -> Path:
    """config.json and the tokenizer of ``target``, plus ``embed_tokens.safetensors``: the embedding and
    head alone, which the local draft runtime borrows (eagle_audit/source/server.py)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    out.mkdir(parents=True)
    for f in target.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy2(f, out / f.name)
    with safe_open(str(target / "model.safetensors"), "pt") as f:
        keep = {k: f.get_tensor(k) for k in ("model.embed_tokens.weight", "lm_head.weight") if k in f.keys()}
    save_file(keep, str(out / "embed_tokens.safetensors"))
    return out
