"""The fixed copy of a draft: its ``config.json`` with a :class:`~eagle_audit.layers.result.Fix` applied, every
other file linked (copied where a link cannot be made). One writer for ``layers --write-fixed-config``,
:func:`eagle_audit.api.write_fixed_config` and the re-audit that proves a fix (:mod:`eagle_audit.layers.reaudit`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from .. import outputs
from ..errors import AuditError, param
from .result import Fix, merge_patch


#: how the fixed copy holds the draft's other files (weights, tokenizer, ...): ``link``, a symbolic link by a relative
#: path (the copy and the draft travel together: ``tar``, ``rsync -a`` of their common folder keep it valid), or
#: ``copy``, the files themselves (the copy travels alone)
WEIGHTS = ("link", "copy")


def populate(src: Path, dest: Path, config: Mapping[str, Any], weights: str = "link") -> None:
    """Write ``config`` as ``dest/config.json`` and bring every other file of ``src`` into ``dest`` as ``weights``
    says (:data:`WEIGHTS`; a link that cannot be made is a copy); ``dest`` exists and is empty, and is a sibling
    of where the copy ends up (a relative link is computed from it)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    home = os.path.realpath(src)  # the draft's folder, its own links resolved; its files as the draft lists them
    for f in src.iterdir():
        if f.name in ("config.json", outputs.OUTPUT_MARKER):
            continue
        link = dest / f.name
        try:
            if weights != "link":
                raise OSError("copy asked for")
            link.symlink_to(os.path.relpath(os.path.join(home, f.name), os.path.realpath(dest)))
        except OSError:
            if f.is_dir():
                shutil.copytree(f, link)
            else:
                shutil.copy2(f, link)


def write_fixed_copy(draft: str | os.PathLike, dest: str | os.PathLike, fix: Fix,
                     label: str | None = None, weights: str = "link") -> Path:
    """Write the draft at ``draft`` with ``fix`` applied into ``dest`` (absent, empty, or a copy eagle-audit wrote
    before: :func:`eagle_audit.outputs.check_output`), marked as eagle-audit's so a re-run replaces it; built under a
    temporary name beside ``dest`` and renamed into place, so a failure leaves nothing half-written. ``label``
    names ``dest`` in messages (the CLI's flag, the API's parameter). The input is never modified. A fix that is not
    possible is refused (:class:`AuditError`, with why). ``weights``: :data:`WEIGHTS` (relative links, or copies)."""
    label = label or param("dest")
    src, out_dir = Path(draft), Path(dest)
    if not fix.possible:
        raise AuditError(f"{label}: no config change fixes this for {fix.engine}: {fix.explanation}")
    outputs.check_output(out_dir, {"draft": os.fspath(draft)}, label, "new_dir")
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    with outputs.new_directory(out_dir) as tmp:
        populate(src, tmp, merge_patch(config, fix.patch), weights)
        outputs.mark_output(tmp, {"written_by": "eagle-audit layers --write-fixed-config", "weights": weights,
                                  "draft": os.path.relpath(src.resolve(), out_dir.resolve().parent),
                                  "fix": {"engine": fix.engine, "release": fix.release, "patch": dict(fix.patch)}})
    return out_dir
