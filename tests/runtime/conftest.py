"""The draft runtime's tests (eagle_audit/runtime/) run on the tiny random target and drafts of
tests/accept/accept_tiny.py: its folder goes on ``sys.path`` here (as tests/served/conftest.py does for
tests/engine_wheels/) and its ``tiny_target`` fixture is imported."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "accept"))

from accept_tiny import tiny_target, tiny_target_dir  # noqa: E402,F401
