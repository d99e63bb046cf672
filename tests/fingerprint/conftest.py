"""Fixtures: the SmolLM2 canaries of known wirings (trained once, cached in the test cache), one shared
corpus (prompts the canaries were trained on, and the target's continuations), and a memoised
fingerprint of a draft against a target."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.fingerprint.fp_canaries import train_all
from tests.fingerprint.fp_corpus import corpus as _corpus


@pytest.fixture(scope="session")
def fp_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core machine: one thread is faster for these sizes
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def fp_canaries(smollm2, audit_cache, fp_threads) -> dict[str, Path]:
    from tests import artefacts

    artefacts.ensure("fp-canaries")  # built once, keyed by its code (tests/artefacts.py)
    return train_all(smollm2, audit_cache, log=lambda m: None)


@pytest.fixture(scope="session")
def fp_corpus(audit_cache, fp_threads):
    """tests/fingerprint/fp_corpus.py's corpus on SmolLM2, built once into the test cache (artefact fp-corpus)."""
    from tests import artefacts
    from tests.fingerprint import fp_corpus as corpus_file

    artefacts.ensure("fp-corpus")
    return corpus_file.load(artefacts.cache_root())


@pytest.fixture(scope="session")
def other_target(smollm2, fp_threads):
    """A target of SmolLM2's exact shape with other (random, seeded) weights, and its corpus."""
    from transformers import LlamaForCausalLM

    from eagle_audit.target import LoadedTarget, find_layer_stack

    torch.manual_seed(0)
    model = LlamaForCausalLM(smollm2.model.config).eval()
    info = dataclasses.replace(smollm2.info, name="random-weights SmolLM2-shaped target")
    target = LoadedTarget(model, smollm2.tokenizer, find_layer_stack(model, info.num_layers), info, "cpu", "float32")
    return target, _corpus(target, slice(8, 10), 24)


@pytest.fixture(scope="session")
def fingerprint_of(smollm2, fp_corpus, fp_threads):
    """``fingerprint_of(draft_dir, target=None, corpus=None)`` -> (Inference, declared Wiring), memoised."""
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.resolution import resolve_trained

    memo = {}

    def run(draft_dir, target=None, corpus=None):
        target, corpus = target or smollm2, corpus or fp_corpus
        key = (str(draft_dir), id(target), id(corpus))
        if key not in memo:
            spec = read_draft(str(draft_dir))
            declared, _ = resolve_trained(spec, target.info, [])
            starts = starting_points(spec, target.info, declared.wiring, get_convention("sglang", "engine"))
            memo[key] = (infer_wiring(target, spec, corpus, starts, declared.flags, ttt_steps=3), declared.wiring)
        return memo[key]

    return run


def rotate_residual(model, seed: int = 0):
    """A copy of a Llama-family model whose residual stream is rotated by a random orthogonal Q (x -> x Q),
    computing the same function: every norm weight is folded into the linear layer after it, reading
    layers take W Q, writing layers Q^T W, the embedding E Q, the head (W diag(w_final)) Q (untied)."""
    import copy

    import torch.nn as nn

    m = copy.deepcopy(model)
    H = m.config.hidden_size
    q, _ = torch.linalg.qr(torch.randn(H, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    Q = q.float()
    inner = m.model
    with torch.no_grad():
        head = m.lm_head.weight.detach().clone()
        inner.embed_tokens.weight = nn.Parameter(inner.embed_tokens.weight.detach() @ Q)
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            for norm, readers in ((layer.input_layernorm, (attn.q_proj, attn.k_proj, attn.v_proj)),
                                  (layer.post_attention_layernorm, (mlp.gate_proj, mlp.up_proj))):
                w = norm.weight.detach().clone()
                for lin in readers:
                    lin.weight.copy_((lin.weight * w) @ Q)
                norm.weight.fill_(1.0)
            for writer in (attn.o_proj, mlp.down_proj):
                writer.weight.copy_(Q.T @ writer.weight)
        m.lm_head.weight = nn.Parameter((head * inner.norm.weight.detach()) @ Q)
        inner.norm.weight.fill_(1.0)
    m.config.tie_word_embeddings = False
    return m.eval()


@pytest.fixture(scope="session")
def rotated_target(smollm2, fp_threads):
    """SmolLM2 with its residual stream rotated (same function, other states), and its corpus."""
    from eagle_audit.target import LoadedTarget, find_layer_stack

    model = rotate_residual(smollm2.model)
    info = dataclasses.replace(smollm2.info, name="SmolLM2 with a rotated residual stream")
    target = LoadedTarget(model, smollm2.tokenizer, find_layer_stack(model, info.num_layers), info, "cpu", "float32")
    return target, _corpus(target, slice(8, 10), 24)
