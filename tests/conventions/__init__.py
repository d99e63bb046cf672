"""Tests of eagle_audit/conventions/ and the convention files of probes/."""
