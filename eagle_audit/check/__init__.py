"""``eagle-audit check``: one command for "why is my accept length low?" (docs/check.md)."""
