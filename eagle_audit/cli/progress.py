"""Progress of a library run on stderr (:func:`reporter`): on a terminal dim status lines and one live bar,
elsewhere (piped, a log, CI) plain timed lines a log keeps; never on stdout, and no bar with ``--json -``."""

from __future__ import annotations

from contextlib import contextmanager

from .console import err


def progress_enabled(json_out: str | None) -> bool:
    """Whether a live progress bar is drawn: on a terminal, and never with ``--json -``."""
    return err.is_terminal and json_out != "-"


#: when stderr is not a terminal (a log, a CI job): a progress line at most this often, in seconds, and at the end
LOG_EVERY = 10.0
#: ... and only once the run has lasted this long (seconds): the lines before are held and then printed with their
#: own times; a run that ends sooner (a fast audit, a bad input found at once) prints none, so an error stays the
#: one line on stderr
LOG_AFTER = 5.0


@contextmanager
def reporter(json_out: str | None):
    """``(status, progress)`` callbacks for a library run, on stderr. On a terminal: dim status lines and one live
    progress bar (none with ``--json -``). Elsewhere (piped, a log, CI): plain lines a log keeps, each with the
    seconds since the start (``[   12s] stage captured: ...``, ``[   40s] prompts 3/8``), a progress line at most
    every :data:`LOG_EVERY` seconds and at the last prompt, once the run has lasted :data:`LOG_AFTER` seconds."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    live = progress_enabled(json_out)
    start, last, held = time.monotonic(), [float("-inf")], []

    def log(msg: str) -> None:
        import textwrap

        stamp = f"[{time.monotonic() - start:6.0f}s] "
        held.extend(textwrap.wrap(stamp + msg, width=max(err.width, 40), subsequent_indent=" " * len(stamp),
                                  break_long_words=False, break_on_hyphens=False) or [stamp])
        if time.monotonic() - start >= LOG_AFTER:
            for line in held:
                err.print(line, markup=False, highlight=False, soft_wrap=True)
            held.clear()

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=not live, transient=True) as bar:
        task = bar.add_task("prompts", total=None, visible=False)

        def status(msg: str) -> None:
            if live:
                err.print(f"[dim]{msg}[/]")
            elif not err.is_terminal:
                log(msg)

        def progress(done: int, total: int) -> None:
            if live:
                bar.update(task, description="prompts", completed=done, total=total, visible=True)
            elif not err.is_terminal and (done >= total or time.monotonic() - last[0] >= LOG_EVERY):
                last[0] = time.monotonic()
                log(f"prompts {done}/{total}")

        yield status, progress
