"""The engine clients' tests (eagle_audit/engines/) run against the test servers and fixtures of tests/served/
(sglang_server.py, vllm_server.py, served_tiny.py, served_fixtures.py), the engines' capture code of
tests/engine_wheels/ (sglang_engine.py, vllm_engine.py) and the fake acceptance servers of tests/accept/
(fake_engines.py, which tests/accept/test_accept_cli.py uses too): their folders go on ``sys.path`` here, as
tests/served/conftest.py does for tests/engine_wheels/, and the served fixtures are imported (one instance per folder)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "served"), str(TESTS / "engine_wheels"), str(TESTS / "accept")]

from served_fixtures import sglang_capture, sglang_pieces, served_target, served_target_no_weights  # noqa: E402,F401
