"""Session fixtures: a tiny random Llama target, a tiny canary trained on it in seconds, and a SmolLM2
canary trained with a short schedule, cached in $EAGLE_AUDIT_CACHE (default ~/.cache/eagle-audit-test)
so re-runs reuse it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from tests.accept.accept_tiny import TINY_BOUNDARIES, build_smol_canary, tiny_prompts
from tests.accept.accept_tiny import tiny_target, tiny_target_dir  # noqa: F401  (fixtures, shared with tests/runtime/)


def _canary_cache() -> Path:
    return Path(os.environ.get("EAGLE_AUDIT_CACHE", Path.home() / ".cache" / "eagle-audit-test"))


@pytest.fixture(scope="session")
def tiny_canary(tiny_target, tmp_path_factory) -> Path:
    from eagle_audit.accept.canary import CanaryOptions, train_canary

    out = tmp_path_factory.mktemp("tiny") / "canary"
    train_canary(tiny_target, tiny_prompts(20), CanaryOptions(boundaries=TINY_BOUNDARIES, epochs=40, max_new_tokens=48,
                                                               draft_vocab=200, lr=3e-3), out)
    return out


@pytest.fixture(scope="session")
def smol_target():
    from eagle_audit.target import default_target, load_target

    # 1 thread: on a shared 2-core machine, 2 OpenMP threads can be many times slower
    torch.set_num_threads(int(os.environ.get("EAGLE_AUDIT_TEST_THREADS", "1")))
    return load_target(default_target())


@pytest.fixture(scope="session")
def smol_canary(smol_target) -> Path:
    """A SmolLM2 canary on [2, 15, 27], short schedule (built-in prompts 9-16, 96 new tokens): the test artefact
    ``smol-canary`` (tests/artefacts.py), built once."""
    from tests import artefacts

    artefacts.ensure("smol-canary")
    return build_smol_canary(smol_target, _canary_cache())
