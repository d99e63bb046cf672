"""The two consoles every command prints on: data on stdout (:data:`out`: tables), the rest on stderr
(:data:`err`: progress, logs, error lines); both show the library's parameter references as the running
command's flags (:func:`.flags.show_flags`)."""

from __future__ import annotations

from rich.console import Console

from .flags import show_flags


class FlagConsole(Console):
    """A console that shows the library's parameter references (:func:`eagle_audit.errors.param`) in every
    text it renders (findings, fixes, notes, suggestions) as the running command's flags (:func:`show_flags`)."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(show_flags(text), **kwargs)


out = FlagConsole()  # data: tables
err = FlagConsole(stderr=True)  # progress, logs, error lines
