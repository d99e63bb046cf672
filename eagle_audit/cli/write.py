"""Writing a command's outputs: text or JSON on stdout (``-``) or into a file, atomically, after
:func:`.safety.check_outputs` checked it; JSON texts show the command's flags (:func:`.flags.flagged`)."""

from __future__ import annotations

import json
import sys

from .. import outputs
from ..errors import AuditError
from .console import err
from .flags import flagged
from .pending import wrote


def write_output(text: str, dest: str, what: str, announce: bool = False) -> None:
    """``text`` on stdout (``dest`` "-") or into the file ``dest``, atomically (check it first with
    :func:`.safety.check_outputs`); ``what`` names it in the error line; ``announce``: ``wrote DEST`` on stderr."""
    if dest == "-":
        sys.stdout.write(text)
        return
    try:
        outputs.write_text(dest, text)
    except OSError as e:
        raise AuditError(f"{dest}: cannot write {what} ({e.strerror or e})") from None
    wrote(dest)
    if announce:
        err.print(f"wrote {dest}", highlight=False, soft_wrap=True)


def write_json(data: dict, dest: str) -> None:
    """``data`` as JSON on stdout (``dest`` "-") or into a file (:func:`write_output`), its texts as the command
    shows them (:func:`.flags.flagged`)."""
    write_output(json.dumps(flagged(data), indent=2, default=str) + "\n", dest, "JSON")
