"""The built-in conventions (``probes/*.json``) by name, and convention files by path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import AuditError, BadConvention, UnknownConvention, shown
from ..jsonfile import read_json_object
from .convention import Convention
from .parse import parse_convention


def load_convention_file(path: str | os.PathLike) -> Convention:
    p = Path(path)
    if not p.is_file():
        raise UnknownConvention(f"{p}: no such convention file")
    data = read_json_object(p, BadConvention, "a convention file")
    try:
        return parse_convention(data, str(p))
    except AuditError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:  # a value of a type _check_types misses
        raise BadConvention(f"{p}: malformed convention file ({type(e).__name__}: {shown(str(e), 100)[1:-1]})") from None


def probes_dir() -> Path:
    """The built-in convention files: ``$EAGLE_AUDIT_PROBES``, the repo's ``probes/`` (checkout or
    editable install), or the copy a wheel installs under ``share/eagle-audit/probes``: beside the package
    (``pip install --target DIR``), under the environment's prefix, its data path, or the user base
    (``pip install --user``)."""
    import site
    import sysconfig

    env = os.environ.get("EAGLE_AUDIT_PROBES")
    candidates = [Path(env)] if env else []
    above = Path(__file__).resolve().parents[2]
    share = "share/eagle-audit/probes"
    candidates += [above / "probes", above / share, Path(sys.prefix) / share,
                   Path(sysconfig.get_paths()["data"]) / share, Path(site.getuserbase()) / share]
    for c in candidates:
        if c.is_dir() and any(c.glob("*.json")):
            return c
    raise BadConvention("no built-in convention files found (looked in: " + ", ".join(map(str, candidates)) + ")")


def builtin_conventions(kind: str) -> dict[str, Convention]:
    """The registry of one kind ("trainer" or "engine"): name -> convention."""
    out = {}
    for f in sorted(probes_dir().glob("*.json")):
        c = load_convention_file(f)
        if c.kind == kind:
            out[c.name] = c
    return out


def get_convention(name_or_path: str, kind: str) -> Convention:
    """A convention by registry name, or from a file path (an in-house pipeline)."""
    if name_or_path.endswith(".json") or os.sep in name_or_path:
        conv = load_convention_file(name_or_path)
    else:
        registry = builtin_conventions(kind)
        conv = registry.get(name_or_path)
        if conv is None:
            valid = ", ".join(registry)
            raise UnknownConvention(f"unknown {kind} {name_or_path!r}", hint=f"known {kind}s: {valid}; or a path to a convention .json file")
    if conv.kind != kind:
        raise UnknownConvention(f"{name_or_path} is a {conv.kind}, not a {kind} ({conv.path})")
    return conv
