"""Tests of eagle_audit/report/ (HTML and Markdown reports)."""
