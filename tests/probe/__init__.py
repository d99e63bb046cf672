"""Tests of eagle_audit/probe/ (the source prober), with a synthetic engine tree (probe_tree.py)."""
