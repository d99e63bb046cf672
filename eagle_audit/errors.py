"""The exception hierarchy. The CLI maps each class to one line and an exit code (docs/safety.md).

Exit codes: :data:`EXIT_MEANINGS` (docs/cli.md is generated from it); 1 never means a crash.

Library text never names a CLI flag. Where an error, a hint, a finding or a suggestion speaks of a
parameter, it names it as the Python API does, marked by :func:`param` (```num_steps```, or
```trainer='fingerprint'``` with a value); the CLI edge (:mod:`eagle_audit.cli.edge`, through
:mod:`eagle_audit.cli.flags`) shows each such reference as the running command's flag (``--num-steps``,
``--trainer fingerprint``). No other word of a text is rewritten: "default target" stays as it is.
"""

from __future__ import annotations

import re

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C

#: the longest a value quoted in a message may be (see :func:`shown`)
SHOWN_LIMIT = 80


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters (the middle elided): hostile inputs can be huge."""
    text = repr(value)
    if len(text) <= limit:
        return text
    keep = max(limit - 5, 8)
    return f"{text[: keep - keep // 3]} ... {text[-(keep // 3):]}"

#: a parameter reference made by :func:`param`: group 1 the name, group 2 the value's repr (or None)
PARAM_REF = re.compile(r"`([a-z_][a-z0-9_]*)(?:=([^`]*))?`")


def param(name: str, *value: object) -> str:
    """How library text names its parameter ``name`` (and a value for it): ```name``` or ```name=repr(value)```.
    The CLI shows it as its flag (``--name value``); the Python API reader sees the parameter."""
    return f"`{name}={value[0]!r}`" if value else f"`{name}`"


#: Every exit code of the CLI and what it means.
EXIT_MEANINGS = {
    EXIT_OK: "the wiring matches (or the command succeeded)",
    EXIT_MISMATCH: "a mismatch was found (at least one finding of severity `error`; for `accept-rate`, the served "
                   "accept length is more than `--tolerance` below the trained one)",
    EXIT_BAD_INPUT: "bad input or usage: one line on stderr names the file or option and the problem; no traceback",
    EXIT_INTERNAL: "internal error (a bug): one line `error: internal error, please report ...`; "
                   "`EAGLE_AUDIT_DEBUG=1` shows the traceback (docs/safety.md)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C): one line `interrupted: ...` names every output not written; writes are "
                      "atomic, so each output is whole or absent",
}


class AuditError(Exception):
    """Base class: a problem the user can fix. Rendered as one line, exit 2. The parameters ``message`` and
    ``hint`` speak of are marked with :func:`param` (the CLI shows them as its flags)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputNotFound(AuditError):
    """A path or hub id does not exist."""


class BadCheckpoint(AuditError):
    """A file exists but is not what was expected (corrupt, not EAGLE-3, wrong target)."""


class UnknownArchitecture(AuditError):
    """The target's decoder layers cannot be located, or an engine has no rule for it."""


class UnknownConvention(AuditError):
    """A trainer or engine name that no probe declares."""


class BadConvention(AuditError):
    """A convention file (probes/*.json or a user file) is malformed."""


class BadPrompts(AuditError):
    """A prompts file is empty or malformed."""


class BadOption(AuditError):
    """A parameter value out of range or of the wrong kind (``options`` names it)."""


class OutputRefused(AuditError):
    """An output path that would overwrite an input or unrelated data, or that cannot be written."""


class CouldNotMeasure(AuditError):
    """A measurement that could not be taken for a reason outside the draft (a server that fails where no engine
    rule predicts it): exit 2, never a verdict."""


class OutOfRange(BadOption, ValueError):
    """A value of the right type outside its range (a negative boundary, a count of 0): also a ``ValueError``."""


class BadArgument(BadOption, TypeError):
    """A Python API argument of the wrong type (a text where a sequence is meant, None where a path is): the
    package's own error, with the one-line message the CLI prints; also a ``TypeError``."""
