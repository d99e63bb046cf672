"""The built-in conventions (``probes/*.json``) by name, and convention files by path."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..errors import AuditError, BadConvention, UnknownConvention, shown
from ..jsonfile import read_json_object
from .convention import Convention
from .parse import parse_convention
from .where import probes_dir


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


def builtin_conventions(kind: str) -> dict[str, Convention]:
    """The registry of one kind ("trainer" or "engine"): name -> convention."""
    out = {}
    for f in sorted(probes_dir().glob("*.json")):
        c = load_convention_file(f)
        if c.kind == kind:
            out[c.name] = c
    return out


#: the engine whose rules apply where none is named (its newest built-in release; every verdict says so)
DEFAULT_ENGINE = "sglang"


def get_convention(name_or_path: str | None, kind: str) -> Convention:
    """A convention by registry name, or from a file path (an in-house pipeline). Engines also take
    ``NAME@RELEASE`` or ``NAME@LOW..HIGH`` (:mod:`.releases`), names in any case, and None (no engine named:
    :data:`DEFAULT_ENGINE`, its ``release_how`` "assumed")."""
    from dataclasses import replace

    from .releases import ASSUMED, DEFAULT

    if name_or_path is None and kind == "engine":
        return replace(get_convention(DEFAULT_ENGINE, kind), release_how=ASSUMED)
    if name_or_path.endswith(".json") or os.sep in name_or_path:
        conv = load_convention_file(name_or_path)
    else:
        name, at, spec = name_or_path.partition("@")
        if kind == "engine":
            name = name.strip().lower()
            if at:
                return release_convention(name, spec.strip())
        else:
            name = name_or_path
        registry = builtin_conventions(kind)
        conv = registry.get(name)
        if conv is None:
            valid = ", ".join(registry)
            raise UnknownConvention(f"unknown {kind} {name_or_path!r}", hint=f"known {kind}s: {valid}; or a path to a convention .json file"
                                    + ("; NAME@RELEASE names a release (docs/releases.md)" if kind == "engine" else ""))
        if kind == "engine":
            conv = replace(conv, release_how=DEFAULT)
    if conv.kind != kind:
        raise UnknownConvention(f"{name_or_path} is a {conv.kind}, not a {kind} ({conv.path})")
    return conv


#: an engine convention whose releases begin later than the engine's, and the convention older releases run instead
#: (vLLM's V2 model runner rules are read from the releases that have it; before them, the V1 runner's)
OLDER = {"vllm": "vllm-v1", "vllm-dflash": "vllm-v1-dflash"}


def release_convention(name: str, spec: str, how: str | None = None) -> Convention:
    """Engine ``name``'s rules at the release ``spec`` names (a release, the nearest known one, or a range's
    newest), from the release data; ``how`` it was chosen (default: given)."""
    from dataclasses import replace

    from .releases import GIVEN, NEAREST, choose, known, version_key

    older = OLDER.get(name)
    if older and ".." not in spec and not spec.startswith((">=", "<=")) and known(name) and known(older) and \
            version_key(spec)[0] and version_key(spec) < version_key(known(name)[0]):
        conv = release_convention(older, spec, how)
        note = f"the {name} rules are known from {known(name)[0]} on; {spec} is older: its {older} rules apply"
        return replace(conv, release_note="; ".join(x for x in (note, conv.release_note) if x))
    choice = choose(name, spec, how or GIVEN)
    conv = _release(name, choice.version)
    return replace(conv, release_how=choice.how if not choice.how.startswith(NEAREST) or how is None
                   else f"{how}, {choice.how}",
                   release_note=choice.note, release_span=choice.span)


@functools.lru_cache(maxsize=64)
def _release(name: str, version: str) -> Convention:
    from .releases import release_data

    data, where = release_data(name, version)
    try:
        return parse_convention(data, where)
    except AuditError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:
        raise BadConvention(f"{where}: malformed convention ({type(e).__name__}: {shown(str(e), 100)[1:-1]})") from None


def same_release(conv: Convention, name: str) -> Convention:
    """Convention ``name`` of ``conv``'s engine at ``conv``'s release (the DFlash rules of the release an EAGLE-3
    audit chose), chosen the same way; the built-in file where ``conv`` is the built-in release or a file."""
    from dataclasses import replace

    from .releases import DEFAULT, ASSUMED, known, missing_reason

    if not conv.release_how or conv.release_how in (DEFAULT, ASSUMED) or conv.version not in known(conv.name):
        out = get_convention(name, conv.kind)
        return replace(out, release_how=conv.release_how) if conv.release_how else out
    if conv.version not in known(name):
        why = missing_reason(name, conv.version)
        raise UnknownConvention(f"{conv.title} {conv.version}: no {name} rules in the release data"
                                + (f" ({why})" if why else " (that release has none, or it was not probed)"),
                                hint=f"{name} rules are known for: {', '.join(known(name)) or 'no release'}")
    return replace(_release(name, conv.version), release_how=conv.release_how, release_note=conv.release_note,
                   release_span=conv.release_span)
