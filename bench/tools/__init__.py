"""Builders that are not benchmarks: the shipped demo draft, composed prompts."""
