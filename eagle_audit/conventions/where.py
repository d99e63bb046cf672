"""Where the built-in convention files are (``probes/``, and ``probes/releases/`` beside them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import BadConvention


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
