"""The fingerprint tests' shared corpus: the 8 prompts the SmolLM2 canaries were trained on and the target's 96-token
greedy continuations, every state captured (:func:`eagle_audit.fingerprint.corpus.prepare_corpus`). Built once
into the test cache (artefact ``fp-corpus``, tests/artefacts.py: about 18 s of one thread, which every test worker
paid for itself before) and read back by the fixture ``fp_corpus``.

With the interval honest for a few prompts (one unit per prompt), 4 x 64 left shallow slots undetermined: hence
8 prompts x 96 new tokens, as the canaries were trained."""

from __future__ import annotations

import os
from pathlib import Path

import torch

PROMPTS = slice(8, 16)
MAX_NEW = 96
FILE = "fp-corpus-v1.pt"


def corpus(target, prompts: slice = PROMPTS, max_new: int = MAX_NEW):
    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.prompts import encode, load_prompts

    return prepare_corpus(target, encode(load_prompts(None)[prompts], target.tokenizer), max_new)


def path(cache: Path) -> Path:
    return Path(cache) / FILE


def build(target, cache: Path) -> Path:
    """Compute the corpus on ``target`` (SmolLM2) and write it (whole, or not at all) into ``cache``."""
    out = path(cache)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    torch.save(corpus(target), tmp)
    tmp.replace(out)
    return out


def load(cache: Path):
    """The :class:`~eagle_audit.fingerprint.score.Corpus` :func:`build` wrote (our own file: unpickled whole)."""
    return torch.load(path(cache), weights_only=False)
