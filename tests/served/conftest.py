"""Fixtures of the served-states tests: SGLang's pieces from the 0.5.23 wheel, the engine's capture code
(tests/engine/sglang_engine.py), and a tiny random Llama target (float32) the test servers run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

N_LAYERS, HIDDEN, VOCAB = 6, 32, 256


@pytest.fixture(scope="session")
def sglang_pieces(sglang_wheel, tmp_path_factory):
    from sglang_pieces import SGLangPieces

    return SGLangPieces(sglang_wheel, tmp_path_factory.mktemp("sglang-src"))


@pytest.fixture(scope="session")
def sglang_capture(sglang_wheel):
    from sglang_engine import EngineRun

    return EngineRun(sglang_wheel)


@pytest.fixture(scope="session")
def served_target(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=N_LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, eos_token_id=None,
                      bos_token_id=None, pad_token_id=None, architectures=["LlamaForCausalLM"])
    model = LlamaForCausalLM(cfg)
    path = tmp_path_factory.mktemp("served") / "target"
    model.save_pretrained(path)
    return path


def prompts(n: int = 3, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (5 + 3 * i,), generator=g).tolist() for i in range(n)]
