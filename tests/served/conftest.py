"""Fixtures of the served-states tests: SGLang's pieces from the 0.5.23 wheel, the engine's capture code
(tests/engine/sglang_engine.py), and a tiny random Llama target (float32) the test servers run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))



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
    from served_tiny import write_target

    return write_target(tmp_path_factory.mktemp("served") / "target")


@pytest.fixture(scope="session")
def served_target_no_weights(served_target, tmp_path_factory) -> Path:
    from served_tiny import without_weights

    return without_weights(served_target, tmp_path_factory.mktemp("served-cfg") / "target")
