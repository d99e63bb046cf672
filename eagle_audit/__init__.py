"""eagle-audit: find train/serve hidden-state wiring mismatches of EAGLE-3 drafts."""

__version__ = "0.1.0"
