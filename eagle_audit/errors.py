"""The exception hierarchy. The CLI maps each class to one line and an exit code.

Exit codes: :data:`EXIT_MEANINGS` (docs/cli.md is generated from it).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2

#: Every exit code of the CLI and what it means.
EXIT_MEANINGS = {
    EXIT_OK: "the wiring matches (or the command succeeded)",
    EXIT_MISMATCH: "a mismatch was found (at least one finding of severity `error`; for `accept-rate`, the served "
                   "accept length is more than `--tolerance` below the trained one)",
    EXIT_BAD_INPUT: "bad input or usage: one line on stderr names the file or option and the problem; no traceback",
}


class AuditError(Exception):
    """Base class: a problem the user can fix. Rendered as one line, exit 2."""

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
