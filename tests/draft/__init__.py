"""Tests of eagle_audit/draft/ (drafts on disk)."""
