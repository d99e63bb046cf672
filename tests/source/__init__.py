"""Tests of eagle_audit/source/ (where states come from)."""
