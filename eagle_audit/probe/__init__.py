"""Probe a serving engine's source for its EAGLE-3 capture rules.

The engine's Python files are read with ``ast``, never imported: the installed package (located
with ``importlib.util.find_spec``), a source folder, or a wheel. The result is a
:class:`~eagle_audit.probe.results.ProbeResult` (one record per registered architecture, each fact
with its file and line) and, from it, a convention in the format :mod:`eagle_audit.conventions` loads.

Public functions:

* :func:`probe_engine` (engine, source) -> ProbeResult
* :func:`to_convention_data` / :func:`to_convention`: the convention file (dict) / object
* :func:`installed_convention` (engine) -> the probed Convention of the installed engine, or None
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Callable

from ..conventions import Convention, builtin_conventions
from ..errors import AuditError, UnknownConvention
from .emit import to_convention, to_convention_data
from .results import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbedCase,
                      ProbedRule, ProbeResult, Reach, Site)
from .block import probe_block, probe_vllm_block
from .sglang import probe_sglang
from .source import BadSource
from .vllm import probe_vllm, probe_vllm_v1

#: Engines whose source can be probed: name -> prober(source) -> ProbeResult.
PROBERS: dict[str, Callable[..., ProbeResult]] = {
    "sglang": probe_sglang, "vllm": probe_vllm, "vllm-v1": probe_vllm_v1,
    # DFlash / DSpark drafts: eagle_audit/probe/block.py
    "sglang-dflash": functools.partial(probe_block, "dflash"), "sglang-dspark": functools.partial(probe_block, "dspark"),
    "vllm-dflash": probe_vllm_block, "vllm-v1-dflash": functools.partial(probe_vllm_block, runner="v1")}
#: Engines whose Python package is named differently from the engine.
PACKAGES = {"vllm-v1": "vllm", "vllm-dflash": "vllm", "vllm-v1-dflash": "vllm", "sglang-dflash": "sglang", "sglang-dspark": "sglang"}


def probe_engine(engine: str, source: str | os.PathLike | None = None) -> ProbeResult:
    """Probe ``engine`` from ``source`` (a folder or a .whl), or from its installed copy."""
    prober = PROBERS.get(engine)
    if prober is None:
        raise UnknownConvention(f"no probe for engine {engine!r}", hint=f"probe-able engines: {', '.join(PROBERS)}")
    return prober(source)


def builtin_base(engine: str) -> Convention | None:
    """The built-in convention of ``engine`` (for the keys a probe does not read), if any. The DFlash / DSpark
    probes derive every key they emit (their built-in files are their own output): none."""
    if engine.endswith(("-dflash", "-dspark")):
        return None
    try:
        return builtin_conventions("engine").get(engine)
    except AuditError:
        return None


@functools.lru_cache(maxsize=8)
def _probed(engine: str, origin: str) -> Convention:
    return to_convention(probe_engine(engine, None), builtin_base(engine))


def installed_convention(engine: str) -> Convention | None:
    """The convention probed from the installed ``engine`` package, or None when the engine has no
    prober or is not installed (found with ``importlib.util.find_spec``; it is never imported).

    Raises an :class:`~eagle_audit.errors.AuditError` when the installed copy exists but cannot be
    read. The result is cached per process and package location.
    """
    if engine not in PROBERS:
        return None
    try:
        spec = importlib.util.find_spec(PACKAGES.get(engine, engine))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return _probed(engine, str(list(spec.submodule_search_locations)[0]))


__all__ = [
    "PROBERS", "probe_engine", "probe_sglang", "probe_vllm", "installed_convention", "to_convention", "to_convention_data",
    "builtin_base", "BadSource", "ProbeResult", "ArchResult", "ProbedRule", "ProbedCase", "Reach", "Site",
    "SUPPORTED", "UNSUPPORTED", "DELEGATING_UNRESOLVED", "UNRECOGNISED",
]
