"""The trainers' own code executed from their wheels (SpecForge, speculators, TorchSpec; full tier), and the
real trainers' drafts (real_drafts.py, specforge_drafts.py, real_fixtures.py)."""
