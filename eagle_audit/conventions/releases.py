"""Engine releases as data: every probed release of an engine's conventions, stored compactly, and the one a
``NAME@SPEC`` (``sglang@0.5.6``, ``vllm-v1@0.20.0``, ``sglang@0.5.14..0.5.23``) chooses.

Storage (``probes/releases/<engine>.json``, ``"schema": "eagle-audit/releases/1"``; written by
:mod:`eagle_audit.conventions.pack`, docs/releases.md):

``sets``
    ``{set id: {"convention": a whole convention file as probed from the set's first release, "releases": [...]}}``,
    or, where shorter, ``{"from": the set made before it, "delta": what changed, "releases"}`` (:func:`delta`).
    Releases whose conventions differ only in text (file:line citations, the version, notes) share one set.
``releases``
    ``{version: {convention name: {"set": set id, "text": {JSON pointer: string}}}}``: the strings of that release
    that differ from the set's (its own file:line of each fact, its version), so each release's convention file is
    rebuilt exactly as it was probed (:func:`convention_data`).
``missing``
    ``{version: {convention name: why}}``: what was probed and could not be read, said per release.

Which strings are text: every string but the expressions (``default_ids``, ``when``, ``min_capture``,
``max_capture``), compared with its digits masked, and the top-level ``version``, ``source``, ``notes``,
``generated_by``, not compared at all.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import BadConvention, UnknownConvention

SCHEMA = "eagle-audit/releases/1"
#: strings compared as written: a change is a change of rules
EXPRESSIONS = frozenset({"default_ids", "when", "min_capture", "max_capture"})
#: top-level keys that are the release's own, never compared
OWN = frozenset({"version", "source", "notes", "generated_by"})
#: how a release was chosen, in the words every verdict uses
GIVEN, NEAREST, SERVER, INSTALLED, DEFAULT, ASSUMED = ("given", "nearest known", "detected from the server", "installed",
                                                       "newest built in", "assumed")


def version_key(v: str):
    """A sortable key for a release string (PEP 440; an unparsable one sorts first, by its text)."""
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)


def _sorted(versions: Iterable[str]) -> list[str]:
    return sorted(versions, key=version_key)


# ----------------------------------------------------------------------------- the compact form


def _leaves(data: Any, path: str = "", key: str | None = None):
    """(JSON pointer, key, string) of every string leaf that is text (not an expression)."""
    if isinstance(data, Mapping):
        for k, v in data.items():
            yield from _leaves(v, f"{path}/{_escape(k)}", k)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _leaves(v, f"{path}/{i}", key)
    elif isinstance(data, str) and key not in EXPRESSIONS:
        yield path, key, data


def _escape(k: str) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


def _unescape(k: str) -> str:
    return k.replace("~1", "/").replace("~0", "~")


def skeleton(data: Mapping[str, Any]) -> str:
    """What two releases must share to share a set: the convention with its own keys dropped and every text's
    digits masked (canonical JSON)."""

    def mask(x: Any, key: str | None) -> Any:
        if isinstance(x, Mapping):
            return {k: mask(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [mask(v, key) for v in x]
        if isinstance(x, str) and key not in EXPRESSIONS:
            return re.sub(r"\d+", "#", x)
        return x

    return json.dumps(mask({k: v for k, v in data.items() if k not in OWN}, None), sort_keys=True)


def text_diff(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The text of ``data`` that differs from ``base`` (same skeleton): JSON pointer -> value; own keys whole."""
    theirs = {p: s for p, _, s in _leaves({k: v for k, v in base.items() if k not in OWN})}
    out: dict[str, Any] = {p: s for p, _, s in _leaves({k: v for k, v in data.items() if k not in OWN})
                           if theirs.get(p) != s}
    for k in sorted(OWN):
        if k in data and data.get(k) != base.get(k):
            out[f"/{k}"] = data[k]
        elif k not in data and k in base:
            out[f"/{k}"] = None
    return dict(sorted(out.items()))


def apply_text(base: Mapping[str, Any], text: Mapping[str, Any]) -> dict:
    """``base`` with ``text`` written in (the inverse of :func:`text_diff`)."""
    out = json.loads(json.dumps(base))
    for pointer, value in text.items():
        parts = [_unescape(p) for p in pointer.split("/")[1:]]
        node = out
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is None and len(parts) == 1:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def delta(old: Mapping[str, Any], new: Mapping[str, Any], path: str = "") -> dict:
    """What turns ``old`` into ``new``: ``{"set": {JSON pointer: value}, "del": [JSON pointer]}``, objects compared
    key by key (a list or a scalar that differs is set whole)."""
    out: dict = {"set": {}, "del": []}
    for k in old:
        if k not in new:
            out["del"].append(f"{path}/{_escape(k)}")
    for k, v in new.items():
        here = f"{path}/{_escape(k)}"
        if k in old and isinstance(v, Mapping) and isinstance(old[k], Mapping):
            inner = delta(old[k], v, here)
            out["set"].update(inner["set"])
            out["del"].extend(inner["del"])
        elif k not in old or old[k] != v:
            out["set"][here] = v
    if not path:  # in pointer order: the same change is written the same way whatever the objects' key order
        out = {"set": dict(sorted(out["set"].items())), "del": sorted(out["del"])}
    return out


def apply_delta(old: Mapping[str, Any], d: Mapping[str, Any]) -> dict:
    """``old`` with :func:`delta`'s changes made (``old`` is not changed)."""
    out = json.loads(json.dumps(old))
    for pointer in d.get("del", ()):
        parts = [_unescape(p) for p in pointer.split("/")[1:]]
        node = out
        for p in parts[:-1]:
            node = node[p]
        node.pop(parts[-1], None)
    for pointer, value in d.get("set", {}).items():
        parts = [_unescape(p) for p in pointer.split("/")[1:]]
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def pack(conventions: Iterable[Mapping[str, Any]], engine: str, missing: Mapping[str, Mapping[str, str]] | None = None,
         generated_by: str = "") -> dict:
    """The compact form of ``conventions`` (whole convention files, any order; one per (name, version)). A set is
    stored whole (``convention``) or, where shorter, as the change from the set made before it (``from``,
    ``delta``: :func:`delta`)."""
    by_name: dict[str, dict[str, Mapping]] = {}
    for c in conventions:
        by_name.setdefault(c["name"], {})[str(c["version"])] = c
    sets: dict[str, dict] = {}
    whole: dict[str, Mapping] = {}
    releases: dict[str, dict] = {}
    for name in sorted(by_name):
        shapes: dict[str, str] = {}  # skeleton -> set id
        last = None
        for version in _sorted(by_name[name]):
            data = by_name[name][version]
            shape = skeleton(data)
            sid = shapes.get(shape)
            if sid is None:
                sid = shapes[shape] = f"{name}/{len(shapes) + 1}"
                whole[sid] = data
                entry: dict = {"releases": [], "convention": data}
                if last is not None:
                    d = delta(whole[last], data)
                    if len(json.dumps(d)) < len(json.dumps(data)):
                        entry = {"releases": [], "from": last, "delta": d}
                sets[sid] = entry
                last = sid
            sets[sid]["releases"].append(version)
            releases.setdefault(version, {})[name] = {"set": sid, "text": text_diff(whole[sid], data)}
    return {"schema": SCHEMA, "engine": engine, "generated_by": generated_by,
            "releases": {v: releases[v] for v in _sorted(releases)}, "sets": sets,
            "missing": {v: dict(m) for v, m in sorted((missing or {}).items(), key=lambda kv: version_key(kv[0]))}}


def set_convention(packed: Mapping[str, Any], sid: str) -> dict:
    """Rule set ``sid`` as a whole convention file (its first release's text); remembered per pack."""
    memo = _MEMO.setdefault(id(packed), (packed, {}))[1]  # the pack is kept alive beside its memo
    if sid not in memo:
        entry = packed["sets"][sid]
        memo[sid] = entry["convention"] if "convention" in entry else apply_delta(set_convention(packed, entry["from"]),
                                                                                  entry["delta"])
    return memo[sid]


_MEMO: dict[int, tuple[Mapping, dict]] = {}


def convention_data(packed: Mapping[str, Any], version: str, name: str) -> dict:
    """One release's convention file, as probed."""
    entry = packed["releases"][version][name]
    return apply_text(set_convention(packed, entry["set"]), entry["text"])


# ----------------------------------------------------------------------------- the packs shipped


def releases_dir() -> Path:
    from .where import probes_dir

    return probes_dir() / "releases"


@functools.lru_cache(maxsize=None)
def _packs(where: str) -> tuple[tuple[str, dict], ...]:
    out = []
    for f in sorted(Path(where).glob("*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            raise BadConvention(f"{f}: not a release file ({e})") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise BadConvention(f"{f}: 'schema' must be {SCHEMA!r}")
        out.append((str(f), data))
    return tuple(out)


def packs() -> tuple[tuple[str, dict], ...]:
    """(path, pack) of every release file shipped (none: an empty tuple)."""
    d = releases_dir()
    return _packs(str(d)) if d.is_dir() else ()


def pack_for(name: str) -> tuple[str, dict] | None:
    """The release file holding convention ``name`` (None: no release data for it)."""
    for path, data in packs():
        if any(name in r for r in data["releases"].values()) or any(name in m for m in data.get("missing", {}).values()):
            return path, data
    return None


def known(name: str) -> list[str]:
    """The releases of convention ``name`` in the data, oldest first."""
    found = pack_for(name)
    return [v for v, r in found[1]["releases"].items() if name in r] if found else []


def same_rules(name: str, a: str, b: str) -> bool:
    found = pack_for(name)
    if not found:
        return False
    r = found[1]["releases"]
    return name in r.get(a, {}) and name in r.get(b, {}) and r[a][name]["set"] == r[b][name]["set"]


# ----------------------------------------------------------------------------- choosing one


@dataclass(frozen=True)
class Choice:
    """The release a spec chose: ``version`` (in the data), ``how`` (given, nearest known, ...), ``asked`` (the
    spec as given), ``note`` (why this one, where it is not the one asked for), ``span`` (a range's releases)."""

    name: str
    version: str
    how: str
    asked: str = ""
    note: str = ""
    span: tuple[str, ...] = ()


def _bounds(spec: str) -> tuple[str | None, str | None] | None:
    """A range spec's (low, high), inclusive; None: not a range. ``A..B``, ``A..``, ``..B``, ``>=A``, ``<=B``."""
    if ".." in spec:
        lo, _, hi = spec.partition("..")
        return (lo.strip() or None, hi.strip() or None)
    if spec.startswith(">="):
        return (spec[2:].strip(), None)
    if spec.startswith("<="):
        return (None, spec[2:].strip())
    return None


def choose(name: str, spec: str, how: str = GIVEN) -> Choice:
    """The known release of ``name`` that ``spec`` names: itself; else, for a release the data lacks, the nearest
    known one at or below it (the rules in force when it came out, if nothing changed in between), said in
    ``note``; for a range, its newest release, with the releases whose rules differ within it in ``note``."""
    versions = known(name)
    if not versions:
        found = pack_for(name)
        why = (found[1].get("missing", {}) if found else {})
        raise UnknownConvention(f"engine {name!r}: no release data", hint=(
            "releases are known for: " + ", ".join(sorted({n for _, p in packs() for r in p['releases'].values() for n in r}))
            + ("; " + "; ".join(f"{v}: {m[name]}" for v, m in why.items() if name in m) if why else "")))
    gone = missing_reason(name, spec)
    if gone is not None:
        raise UnknownConvention(f"engine {name}@{spec}: no rules: {gone}",
                                hint=f"{name} rules are known for: {versions[0]} .. {versions[-1]}")
    bounds = _bounds(spec)
    if bounds is not None:
        lo, hi = bounds
        for b in (lo, hi):
            if b is not None and version_key(b)[0] == 0:
                raise UnknownConvention(f"engine {name}@{spec}: {b!r} is not a release number")
        inside = [v for v in versions if (lo is None or version_key(v) >= version_key(lo))
                  and (hi is None or version_key(v) <= version_key(hi))]
        if not inside:
            raise UnknownConvention(f"engine {name}@{spec}: no known release in that range",
                                    hint=f"known releases: {', '.join(versions)}")
        sets = len({pack_for(name)[1]["releases"][v][name]["set"] for v in inside})
        return Choice(name, inside[-1], how, spec, f"range {spec}: {len(inside)} known release(s) from {inside[0]} to "
                      f"{inside[-1]}, {sets} rule set(s); the slots are {inside[-1]}'s, the verdict each release's",
                      tuple(inside))
    if spec in versions:
        return Choice(name, spec, how, spec)
    if version_key(spec)[0] == 0:
        raise UnknownConvention(f"engine {name}@{spec}: {spec!r} is not a release number",
                                hint=f"known releases: {', '.join(versions)}")
    below = [v for v in versions if version_key(v) < version_key(spec)]
    above = [v for v in versions if version_key(v) > version_key(spec)]
    if not below:
        gone = [v for v in (pack_for(name) or ("", {}))[1].get("missing", {}) if missing_reason(name, v)
                and version_key(v) < version_key(above[0])]
        raise UnknownConvention(f"engine {name}@{spec}: older than every release with {name} rules (the oldest is "
                                f"{above[0]})" + (f"; releases read and found without them: {gone[0]} .. {gone[-1]}"
                                                  if gone else ""),
                                hint=f"{name} rules are known for: {versions[0]} .. {versions[-1]}")
    near = below[-1]
    if not above:
        note = f"{spec} is newer than every release in the data: the rules of {near}, the newest known, are assumed"
    elif same_rules(name, near, above[0]):
        note = f"{spec} is not in the data: {near} and {above[0]} have the same rules, so {spec} is taken to have them too"
    else:
        note = (f"{spec} is not in the data: the rules of {near}, the nearest known release before it, are assumed "
                f"({above[0]} has other rules; where they changed in between is not known)")
    return Choice(name, near, f"{NEAREST} to {spec}", spec, note)


def spans(name: str, versions: list[str] | None = None) -> str:
    """The releases of ``name`` grouped by rule set, in words: '0.5.6 (rules 1); 0.5.14-0.5.23 (rules 2)'."""
    found = pack_for(name)
    if not found:
        return "no release data"
    r = found[1]["releases"]
    versions = [v for v in (versions or known(name)) if name in r.get(v, {})]
    groups: list[tuple[str, list[str]]] = []
    for v in versions:
        sid = r[v][name]["set"]
        if groups and groups[-1][0] == sid:
            groups[-1][1].append(v)
        else:
            groups.append((sid, [v]))
    return "; ".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else g[0] for _, g in groups) + \
        (" (one rule set)" if len(groups) == 1 else f" ({len(groups)} rule sets)")


def release_data(name: str, version: str) -> tuple[dict, str]:
    """(convention file, where it is) of ``name`` at a known ``version``."""
    found = pack_for(name)
    if found is None or name not in found[1]["releases"].get(version, {}):
        raise UnknownConvention(f"engine {name}@{version}: not in the release data")
    path, data = found
    return convention_data(data, version, name), f"{path}#{version}/{name}"


def missing_reason(name: str, version: str) -> str | None:
    """Why ``name`` has no rules at ``version`` where the data says so (probed and not read)."""
    found = pack_for(name)
    return (found[1].get("missing", {}).get(version, {}) or {}).get(name) if found else None
