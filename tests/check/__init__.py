"""Tests of eagle_audit/check/ (check)."""
