"""`eagle-audit fingerprint`: read the wiring a draft was trained on off its weights."""

from __future__ import annotations

from typing import Annotated

import typer

from ..accept.limits import MAX_NEW_TOKENS
from ..errors import EXIT_MISMATCH, EXIT_OK
from .common import (BuiltinRules, Device, Draft, Dtype, Engine, JsonOut, MaxPrompts, MaxTokens, Prompts, ReportDir,
                     Target, Threads, TrainedBoundaries, TrainedIds, Trainer, audit_inputs, check_outputs, command_line,
                     default_inputs, err, error_edge, out, parse_ints, reporter, use_threads, write_json)


def fingerprint(
    ctx: typer.Context,
    target: Target = None,
    draft: Draft = None,
    engine: Engine = "sglang",
    trainer: Trainer = None,
    trained_boundaries: TrainedBoundaries = None,
    trained_ids: TrainedIds = None,
    prompts: Prompts = None,
    max_prompts: MaxPrompts = 8,
    max_tokens: MaxTokens = 256,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Greedy continuation length per prompt.", min=2, max=MAX_NEW_TOKENS)] = 64,
    device: Device = "cpu",
    dtype: Dtype = "auto",
    threads: Threads = None,
    builtin_rules: BuiltinRules = False,
    json_out: JsonOut = None,
    report: ReportDir = None,
) -> None:
    """Read the wiring a draft was trained on off its weights: which target state each fc slot reads.

    One teacher-forced pass over the prompts and the target's greedy continuation captures every state;
    the draft's first prediction is scored against the target's next token for candidate wirings, one slot
    at a time over every state. Slots whose best state is not separated from another are reported as
    "B15 or B16". --trainer / --trained-boundaries name the declared wiring the weights are compared with.

    Examples:

      eagle-audit fingerprint                                  # SmolLM2 + the demo draft

      eagle-audit fingerprint -t ./Llama-3.1-8B -d ./my-eagle3 --device cuda --json fp.json

    Exit codes: 0 the weights agree with the declared wiring and the engine, 1 they do not (or no wiring fits
    this target), 2 bad input.
    """
    with error_edge():
        from ..fingerprint.render import render_fingerprint
        from ..fingerprint.run import FingerprintOptions, run_fingerprint

        use_threads(threads)
        target, draft = default_inputs(target, draft)
        check_outputs(audit_inputs(target, draft, prompts, engine, trainer), files={"--json": json_out},
                      dirs={"--report": report})
        opts = FingerprintOptions(target=target, draft=draft, engine=engine, trainer=trainer,
                                  trained_boundaries=trained_boundaries,
                                  trained_ids=parse_ints(trained_ids, "--trained-ids"), prompts=prompts,
                                  max_prompts=max_prompts, max_tokens=max_tokens, max_new_tokens=max_new_tokens,
                                  device=device, dtype=dtype, use_installed_engine=not builtin_rules,
                                  command=command_line(ctx))
        with reporter(json_out) as (status, progress):
            result = run_fingerprint(opts, status, progress)
        if json_out != "-":
            render_fingerprint(result, out)
        if json_out:
            write_json(result.to_json(), json_out)
        if report:
            from ..report import write_reports

            for path in write_reports(result.to_json(), report,
                                      inputs=audit_inputs(target, draft, prompts, engine, trainer)):
                err.print(f"wrote {path}")
    raise typer.Exit(EXIT_OK if result.verdict == "match" else EXIT_MISMATCH)
