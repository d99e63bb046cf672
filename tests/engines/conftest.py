"""The engine clients' tests (eagle_audit/engines/) run against the test servers and fixtures of tests/served/
(sglang_server.py, vllm_server.py, served_tiny.py, served_fixtures.py), the engines' capture code of
tests/engine_wheels/ (sglang_engine.py, vllm_engine.py) and the fake acceptance servers of tests/accept/
(fake_engines.py, which tests/accept/test_accept_cli.py uses too), imported by their package paths; the served
fixtures are imported here (one instance per folder)."""

from __future__ import annotations


from tests.served.served_fixtures import sglang_capture, sglang_pieces, served_target, served_target_no_weights  # noqa: F401
