"""Fixtures of the served-states tests (tests/served/served_fixtures.py, shared with tests/engines/)."""

from __future__ import annotations


from tests.served.served_fixtures import sglang_capture, sglang_pieces, served_target, served_target_no_weights  # noqa: F401
