"""Read a JSON object from a user's file, with one-line errors that name the file.

Hostile files are bounded here, once for every reader: at most :data:`MAX_BYTES`, nesting at most
:data:`MAX_DEPTH` deep (eagle-audit's own files are under 10 levels; deeper nesting only serves to
exhaust the stack), and ``NaN`` / ``Infinity`` either refused or read as ``null`` (``non_finite``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import AuditError

MAX_DEPTH = 64
MAX_BYTES = 256 * 2**20


def _depth_ok(text: str, limit: int) -> bool:
    """False when brackets nest deeper than ``limit`` (strings skipped); cheap, before json parses it."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_bounded(text: str, where: str, error: type[AuditError], non_finite: str = "refuse"):
    """``json.loads`` with the bounds above; ``non_finite``: ``"refuse"`` or ``"null"``."""
    if not _depth_ok(text, MAX_DEPTH):
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")

    def constant(name: str):
        if non_finite == "null":
            return None
        raise error(f"{where}: {name} is not a JSON number (only finite numbers are accepted)")

    def number(text: str):
        value = float(text)
        return value if math.isfinite(value) else constant(text)  # 1e999 overflows to inf

    try:
        return json.loads(text, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply") from None


def read_json_object(path: Path, error: type[AuditError], expected: str = "JSON", non_finite: str = "refuse") -> dict:
    """The JSON object in ``path``; ``error`` (an AuditError subclass) for anything else."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise error(f"{path}: {size} bytes, more than the {MAX_BYTES} a JSON file may have here")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (expected {expected})") from None
    except OSError as e:
        raise error(f"{path}: cannot be read ({e.strerror or e})") from None
    data = loads_bounded(text, str(path), error, non_finite)
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
