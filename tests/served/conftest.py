"""Fixtures of the served-states tests (tests/served/served_fixtures.py, shared with tests/engines/)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine_wheels"))

from served_fixtures import sglang_capture, sglang_pieces, served_target, served_target_no_weights  # noqa: E402,F401
