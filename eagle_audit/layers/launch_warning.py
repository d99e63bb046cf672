"""The one line ``eagle-audit launch`` prints above an engine's lines when ``layers`` calls the draft mis-wired on
that engine: the static audit (configs only, no weights loaded) with the same built-in engine rules the lines are
made from, its error codes, and where the fixed copy comes from (or why no config change fixes it)."""

from __future__ import annotations

import os
import shlex

from ..errors import AuditError
from .run import LayersOptions, run_layers


def launch_warning(target: str, draft: str, engine: str, inputs: str = "") -> str | None:
    """None when ``layers --static`` finds no error for ``draft`` on ``engine`` (a built-in engine convention), or
    cannot audit it (its own error is then the launch's); else one line: the codes, and the fixed copy. ``inputs``:
    how the command that writes the fixed copy names the target and draft (``-t T -d D`` as the user gave them; ""
    for the defaults); the copy goes into the working directory, ``<draft name>-fixed-<engine>``."""
    try:
        r = run_layers(LayersOptions(target=target, draft=draft, engine=engine, static=True,
                                     use_installed_engine=False))
    except AuditError:
        return None
    errors = [f for f in r.findings if f.severity == "error"]
    if not errors:
        return None
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    said = f"`eagle-audit layers` finds this draft mis-wired on {engine} ({codes}): these lines serve it as it is"
    fix = r.fix
    if fix is not None and fix.possible:
        dest = shlex.quote(os.path.basename(os.path.normpath(draft)) + "-fixed-" + engine)
        return (f"{said}; serve the fixed copy instead, written by: eagle-audit layers {inputs + ' ' if inputs else ''}"
                f"--engine {engine} --write-fixed-config {dest}")
    why = f": {' '.join(fix.explanation.split())}" if fix is not None and fix.explanation else ""
    return f"{said}; no config change fixes it{why}"
