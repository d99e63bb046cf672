"""Shared by the docs tests: every key of a result JSON must appear as `key` in docs/results.md."""

from __future__ import annotations

from pathlib import Path

RESULTS_MD = Path(__file__).resolve().parent.parent / "docs" / "results.md"


def assert_documented(data: dict, nested: tuple[str, ...] = ()) -> None:
    """Every top-level key of ``data``, and every key of the objects under ``nested`` (an object or a list of
    objects), appears as `key` in docs/results.md."""
    text = RESULTS_MD.read_text()
    keys = set(data)
    for name in nested:
        value = data[name]
        items = value if isinstance(value, list) else [value]
        keys |= {k for item in items if isinstance(item, dict) for k in item}
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert missing == [], f"docs/results.md does not document {missing}"
