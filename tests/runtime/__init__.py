"""Tests of eagle_audit/runtime/ (the draft runtime), on tests/accept/accept_tiny.py's tiny target and drafts."""
