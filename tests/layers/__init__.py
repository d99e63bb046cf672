"""Tests of eagle_audit/layers/ (layers)."""
