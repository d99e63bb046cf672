"""The `eagle-audit` command: one small module per subcommand, registered here."""

from __future__ import annotations

from typing import Annotated

import typer

from .accept_rate import accept_rate
from .check import check
from .group import Group
from .fingerprint import fingerprint
from .launch import launch
from .layers import layers
from .probe import probe
from .report import report
from .train_canary import train_canary

app = typer.Typer(cls=Group, add_completion=False, rich_markup_mode=None, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Audit the hidden-state wiring of EAGLE-3 drafts between training pipelines and serving engines.")


def _print_version(value: bool) -> None:
    if value:
        from ..version import __version__

        typer.echo(f"eagle-audit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    """Audit the hidden-state wiring of EAGLE-3 drafts between training pipelines and serving engines."""
    import os
    import sys

    if not os.environ.get("EAGLE_AUDIT_DEBUG"):  # eagle-audit reports problems itself, one line each
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
        else:  # read when transformers is first imported; importing it here would cost --help a second
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


app.command("layers")(layers)

app.command("accept-rate")(accept_rate)
app.command("train-canary")(train_canary)
app.command("fingerprint")(fingerprint)
app.command("check")(check)
app.command("probe")(probe)
app.command("launch")(launch)
app.command("report")(report)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
