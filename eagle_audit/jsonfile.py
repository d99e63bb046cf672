"""Read a JSON object from a user's file, with one-line errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import AuditError


def read_json_object(path: Path, error: type[AuditError], expected: str = "JSON") -> dict:
    """The JSON object in ``path``; ``error`` (an AuditError subclass) for anything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (expected {expected})") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
