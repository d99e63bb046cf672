"""The command group every command runs in: usage errors become one ``error:`` line and exit 2, anything
unexpected outside a command's :func:`.edge.error_edge` an internal error (exit 3); each run starts with no
pending output; every command's ``--help`` gets short metavars and the help view (:mod:`.helpview`)."""

from __future__ import annotations

import os
import sys

from typer import Abort
from typer.core import TyperGroup

from ..errors import EXIT_INTERNAL, EXIT_INTERRUPTED
from .click_api import ClickException, NoArgsIsHelpError
from .edge import internal_error, print_error
from .metavars import short_metavars
from .pending import PENDING, WRITTEN, interrupted


class Group(TyperGroup):
    """The command group: usage errors (unknown option, missing value, a bad number) become one
    ``error:`` line and exit 2 instead of click's multi-line box; anything unexpected outside a
    command's :func:`.edge.error_edge` is an internal error (exit 3). Every command's --help shows short
    metavars (:func:`short_metavars`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from .helpview import install

        for command in self.commands.values():
            short_metavars(command)
            install(command)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        PENDING.clear()  # one run's outputs: a run in the same process (tests, the Python API) starts from none
        WRITTEN.clear()
        from .helpview import asked_all

        args = asked_all(list(sys.argv[1:] if args is None else args))
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
        except NoArgsIsHelpError as e:
            e.show()
            rv = e.exit_code
        except ClickException as e:
            print_error(e.format_message(), _usage_hint(e))
            rv = e.exit_code
        except (Abort, KeyboardInterrupt):
            interrupted()
            rv = EXIT_INTERRUPTED
        except Exception as e:  # noqa: BLE001 - the last edge: never a traceback, never exit 1
            if os.environ.get("EAGLE_AUDIT_DEBUG"):
                raise
            internal_error(e)
            rv = EXIT_INTERNAL
        if not standalone_mode:
            return rv
        sys.exit(rv or 0)


def _usage_hint(e: ClickException) -> str | None:
    ctx = getattr(e, "ctx", None)
    if ctx is None:
        return None
    return f"see {ctx.command_path} --help"
