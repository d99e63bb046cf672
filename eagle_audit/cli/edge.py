"""The error edge of every command: an :class:`eagle_audit.errors.AuditError` becomes one ``error:`` line (and a
``hint:`` line) on stderr and its exit code, any other exception an internal error (one line, exit 3), an
interrupt its line and exit 130; ``EAGLE_AUDIT_DEBUG=1`` shows the traceback instead."""

from __future__ import annotations

import os
from contextlib import contextmanager

import typer
from rich.text import Text
from typer import Abort, Exit

from ..errors import EXIT_INTERNAL, EXIT_INTERRUPTED, AuditError
from .click_api import ClickException
from .console import err
from .flags import show_flags
from .pending import interrupted

#: where an internal error should be reported
REPORT_TO = "the eagle-audit issue tracker"

#: the longest error line printed (the middle of a longer message is elided)
LINE_LIMIT = 400


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` as one printable line: newlines and control characters escaped, cut to ``limit``."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))
    if len(text) > limit:
        keep = limit - 5
        text = f"{text[: keep - keep // 4]} ... {text[-(keep // 4):]}"
    return text


def print_error(message: str, hint: str | None = None) -> None:
    """``error: MESSAGE`` (and ``  hint: HINT``) on stderr, each on one line, no markup interpreted."""
    err.print(Text.assemble(("error:", "bold red"), " " + one_line(message)), soft_wrap=True, highlight=False)
    if hint:
        err.print(Text("  hint: " + one_line(hint)), soft_wrap=True, highlight=False)


def internal_error(e: BaseException) -> None:
    """The one line for an unexpected exception (a bug): exit 3, never 1."""
    print_error(f"internal error, please report it to {REPORT_TO} with the command line "
                f"({type(e).__name__}: {one_line(str(e), 160)}); EAGLE_AUDIT_DEBUG=1 shows the traceback")


@contextmanager
def error_edge():
    """The CLI edge of every command: an AuditError becomes one ``error:`` line and its exit code (2), with
    the parameter names it lists shown as this command's flags; any other exception is an internal error
    (one line, exit 3). EAGLE_AUDIT_DEBUG=1 re-raises instead, with the traceback."""
    try:
        yield
    except KeyboardInterrupt:  # typer would turn it into a silent exit 130
        interrupted()
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (Exit, Abort, ClickException):
        raise
    except AuditError as e:
        if os.environ.get("EAGLE_AUDIT_DEBUG"):
            raise
        print_error(show_flags(e.message), show_flags(e.hint) if e.hint else None)
        raise typer.Exit(e.exit_code)
    except Exception as e:
        if os.environ.get("EAGLE_AUDIT_DEBUG"):
            raise
        internal_error(e)
        raise typer.Exit(EXIT_INTERNAL)
