"""Tests of eagle_audit/engines/ (the engine clients: HTTP, launch lines, readers, the registry), against the
test servers of tests/served/ and tests/accept/."""
