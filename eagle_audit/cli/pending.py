"""One run's outputs: those asked for and not written yet (:data:`PENDING`), those written (:data:`WRITTEN`),
and the line an interrupt prints from them (writes are atomic: an output is either whole or absent). The
command group (:class:`.group.Group`) starts every run from none."""

from __future__ import annotations

from .console import err

#: the outputs this run was asked for and has not written yet: path -> flag (:func:`.safety.check_outputs` adds
#: them, :func:`wrote` removes them); what an interrupt says was left unwritten
PENDING: dict[str, str] = {}


#: the outputs written so far
WRITTEN: list[str] = []


def wrote(path: str | None) -> None:
    """``path`` (an output given to :func:`.safety.check_outputs`) is written."""
    if path is not None:
        PENDING.pop(str(path), None)
        WRITTEN.append(str(path))


def interrupted() -> None:
    """The line an interrupt prints on stderr: ``interrupted`` and every asked-for output not written (writes are
    atomic: an output is either whole or absent)."""
    if PENDING:
        what = "not written: " + ", ".join(f"{flag} {path}" for path, flag in PENDING.items())
    else:
        what = "every output asked for was written" if WRITTEN else "nothing was written"
    err.print(f"interrupted: {what}", highlight=False, soft_wrap=True)
    PENDING.clear()
