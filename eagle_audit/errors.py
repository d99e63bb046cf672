"""The exception hierarchy. The CLI maps each class to one line and an exit code.

Exit codes (documented in README.md):
  0  the wiring matches (or the command succeeded)
  1  a mismatch was found
  2  bad input or usage: the message names the file or option and the problem
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2


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
