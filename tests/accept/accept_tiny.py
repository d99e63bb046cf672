"""Tiny random models for the accept and runtime tests: a Llama target built from a config, and drafts for it;
the session fixtures ``tiny_target_dir`` / ``tiny_target`` (imported by tests/accept/conftest.py and
tests/runtime/conftest.py: one instance per folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle_audit.draft.write import draft_config, random_weights, write_draft

TINY_BOUNDARIES = (1, 3, 5)
SMOL_BOUNDARIES = (2, 15, 27)  # SGLang's default for N = 30
SMOL_MISWIRED = (0, 3, 16)  # the demo draft's wiring
SMOL_CANARY_VERSION = 4

N_LAYERS, HIDDEN, VOCAB = 6, 64, 49152  # SmolLM2's vocabulary, so its tokenizer can be reused


@pytest.fixture(scope="session")
def tiny_target_dir(tmp_path_factory) -> Path:
    return write_tiny_target(tmp_path_factory.mktemp("tiny") / "target")


@pytest.fixture(scope="session")
def tiny_target(tiny_target_dir):
    from eagle_audit.target import load_target

    return load_target(str(tiny_target_dir))


def build_smol_canary(target, cache: Path) -> Path:
    """The SmolLM2 canary on :data:`SMOL_BOUNDARIES` (short schedule: built-in prompts 9-16, 96 new tokens) under
    ``cache``, trained where missing (tests/artefacts.py ``smol-canary`` keys it by this file)."""
    from eagle_audit.accept.canary import CanaryOptions, train_canary
    from eagle_audit.prompts import encode, load_prompts

    out = cache / f"test-canary-smol-v{SMOL_CANARY_VERSION}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    ids = encode(load_prompts(None)[8:16], target.tokenizer)
    tmp = out.with_name(out.name + ".tmp")
    train_canary(target, ids, CanaryOptions(boundaries=SMOL_BOUNDARIES, epochs=30, max_new_tokens=96,
                                            draft_vocab=2048, lr=3e-3, batch_size=2), tmp)
    tmp.rename(out)
    return out


def tiny_prompts(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (4 + i % 20,), generator=g).tolist() for i in range(n)]


def write_tiny_target(out: Path, seed: int = 0) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=N_LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, eos_token_id=None,
                      bos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # larger weights: a peaked, deterministic greedy output
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    model.save_pretrained(out)
    _copy_tokenizer(out)
    return out


def _copy_tokenizer(out: Path) -> None:
    """SmolLM2's tokenizer (from the default target's cache), so CLI tests can encode prompts."""
    import shutil

    from eagle_audit.target import default_target, materialise

    src = materialise(default_target())
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (src / name).is_file():
            shutil.copy(src / name, out / name)


def write_tiny_draft(out: Path, *, nested_ids=None, top_level_ids=None, seed: int = 1, num_aux: int = 3,
                     draft_vocab: int | None = 128, extra=None, scale: float = 1.0) -> Path:
    cfg = draft_config(hidden_size=HIDDEN, target_hidden_size=HIDDEN, num_aux=num_aux, vocab_size=VOCAB,
                       draft_vocab_size=draft_vocab, num_heads=4, num_kv_heads=2, intermediate_size=128,
                       nested_ids=nested_ids, top_level_ids=top_level_ids, extra=extra)
    sd = random_weights(cfg, num_aux=num_aux, seed=seed)
    for k in sd:
        if sd[k].is_floating_point() and sd[k].dim() == 2:
            sd[k] = sd[k] * scale
    write_draft(out, cfg, sd)
    return out
