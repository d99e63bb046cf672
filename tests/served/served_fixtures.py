"""The fixtures of the served-states tests, shared by tests/served/ and tests/engines/ (each folder's conftest
imports them, so each has them; pytest makes one instance per folder): SGLang's pieces from the 0.5.23 wheel,
the engine's capture code (tests/engine_wheels/sglang_engine.py), and a tiny random Llama target (float32) the test
servers run."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def sglang_pieces(sglang_wheel, tmp_path_factory):
    from tests.served.sglang_pieces import SGLangPieces

    return SGLangPieces(sglang_wheel, tmp_path_factory.mktemp("sglang-src"))


@pytest.fixture(scope="session")
def sglang_capture(sglang_wheel):
    from tests.engine_wheels.sglang_engine import EngineRun

    return EngineRun(sglang_wheel)


@pytest.fixture(scope="session")
def served_target(tmp_path_factory) -> Path:
    from tests.served.served_tiny import write_target

    return write_target(tmp_path_factory.mktemp("served") / "target")


@pytest.fixture(scope="session")
def served_target_no_weights(served_target, tmp_path_factory) -> Path:
    from tests.served.served_tiny import without_weights

    return without_weights(served_target, tmp_path_factory.mktemp("served-cfg") / "target")
