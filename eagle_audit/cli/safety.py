"""The safety check every command runs first (docs/safety.md): no output is an input, lies inside one, or
cannot be written (:func:`check_outputs`), with every path an audit reads named by its role
(:func:`audit_inputs`). Each output checked is pending (:mod:`.pending`) until written."""

from __future__ import annotations

import os
from typing import Iterable, Mapping

from .. import outputs
from .pending import PENDING


def convention_path(name: str | None) -> str | None:
    """The file behind an ``--engine`` / ``--trainer`` value, when it names one (else None: a registry name)."""
    if name and (name.endswith(".json") or os.sep in name):
        return name
    return None


def audit_inputs(target: str | None, draft: str | None, prompts: str | None = None, engine: str | None = None,
                 trainer: str | None = None, **more: str | None) -> dict[str, str]:
    """Every path an audit reads, role -> path, for :func:`check_outputs`: target, draft, prompts file,
    convention files, and the eagle-audit cache (never an output either); ``more``: other roles."""
    from ..target import cache_dir

    table = {"target": target, "draft": draft, "prompts file": prompts, "engine convention": convention_path(engine),
             "trainer convention": convention_path(trainer), **more, "eagle-audit cache": str(cache_dir())}
    return {role: p for role, p in table.items() if p}


def check_outputs(inputs: Mapping[str, str | None] | Iterable[str | None], files: dict[str, str | None] | None = None,
                  dirs: dict[str, str | None] | None = None, new_dirs: dict[str, str | None] | None = None) -> None:
    """Refuse, before anything runs, every output that is an input, lies inside one, or cannot be
    written (:func:`eagle_audit.outputs.check_output`). ``files`` / ``dirs`` / ``new_dirs`` (absent or
    empty directories): flag -> path (None and "-" skipped). ``inputs``: role -> path (or a list).
    Every command calls this first; a new command does the same:

        check_outputs(audit_inputs(target, draft, prompts, engine, trainer),
                      files={"--json": json_out}, dirs={"--report": report})
    """
    inputs = inputs if isinstance(inputs, Mapping) else list(inputs)
    for kind, table in (("file", files or {}), ("dir", dirs or {}), ("new_dir", new_dirs or {})):
        for flag, path in table.items():
            if path is not None and str(path) != "-":
                outputs.check_output(path, inputs, flag, kind)
                PENDING[str(path)] = flag
