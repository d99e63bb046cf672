"""Tests of eagle_audit/fingerprint/, with the canaries they train (fp_canaries.py, dflash_canary.py)."""
