"""Benchmarks of evidence: what an audit finds or misses on drafts and targets of known wiring."""
