"""The click names the CLI uses, taken from typer's own copy of click where it carries one (recent typer raises
that copy's exceptions), else from click itself (older typer runs on click). The one place a private typer
module is imported."""

from __future__ import annotations

try:  # recent typer carries its own copy of click, and raises its exceptions
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer._click.globals import get_current_context
except ImportError:  # older typer runs on click itself
    from click import ClickException, get_current_context
    from click.exceptions import NoArgsIsHelpError

__all__ = ["ClickException", "NoArgsIsHelpError", "get_current_context"]
