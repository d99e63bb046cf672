"""Tests of eagle_audit/cli/: the edge every command shares and each command's options."""
