"""The draft runtime's tests (eagle_audit/runtime/) run on the tiny random target and drafts of
tests/accept/accept_tiny.py, whose ``tiny_target`` fixture is imported here (one instance per folder)."""

from __future__ import annotations


from tests.accept.accept_tiny import tiny_target, tiny_target_dir  # noqa: F401
