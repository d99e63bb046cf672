"""`eagle-audit fingerprint`: read the wiring a draft was trained on off its weights."""

from __future__ import annotations

import functools

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK
from ..fingerprint.defaults import CONFIRM_PROMPTS, MORE_PROMPTS
from .defaults import use_threads
from .deprecations import states_server_url
from .edge import error_edge
from .progress import reporter
from .unused import SERVER_REACH, refuse_unused
from .options import (AuditArgs, ConfirmPrompts, MaxNewTokens, MorePrompts, OldServer, ServerArgs, TttSteps, Verbose,
                      audit_command, hidden_states_dir_option, states_server_option)


#: options that do nothing in some combinations (:func:`eagle_audit.cli.unused.refuse_unused`)
FINGERPRINT_UNUSED = ((SERVER_REACH, "!states_server|!server", "it says how to reach a --states-server, and none is "
                                                              "given"),)


@audit_command(without=("device_map",))
def fingerprint(
    ctx: typer.Context,
    args: AuditArgs,
    max_new_tokens: MaxNewTokens = 64,
    states_server: states_server_option("URL of a reference server (SGLang capture-only or vLLM extract_hidden_states, the reference line of docs/server.md) to take every target state, the greedy continuation and the target's argmax at every position from, for a --target directory of config, tokenizer and embed_tokens.safetensors only.") = None,
    hidden_states_dir: hidden_states_dir_option("vLLM --states-server: the server's shared_storage_path as this machine sees it.") = None,
    reach: ServerArgs = ServerArgs(),
    ttt_steps: TttSteps = None,
    more_prompts: MorePrompts = MORE_PROMPTS,
    confirm_prompts: ConfirmPrompts = CONFIRM_PROMPTS,
    server: OldServer = None,
    verbose: Verbose = False,
) -> None:
    """Read the wiring a draft was trained on off its weights: which target state each fc slot reads.

    One teacher-forced pass over the prompts and the target's greedy continuation captures every state;
    the draft's first prediction is scored against the target's next token for candidate wirings, one slot
    at a time over every state. Slots whose best state is not separated from another are reported as
    "B15 or B16". --trainer / --trained-boundaries name the declared wiring the weights are compared with.

    Examples:

      eagle-audit fingerprint                                  # SmolLM2 + the demo draft

      eagle-audit fingerprint -t ./Llama-3.1-8B -d ./my-eagle3 --device cuda

      eagle-audit fingerprint -t ./config-only -d ./draft --states-server URL

    Exit codes: 0 the weights agree with the declared wiring and the engine, 1 they do not (or no wiring fits
    this target), 2 bad input.
    """
    with error_edge():
        refuse_unused(ctx, FINGERPRINT_UNUSED)
        from ..fingerprint.render import render_fingerprint
        from ..fingerprint.options import FingerprintOptions
        from ..fingerprint.run import run_fingerprint
        from .accept_rate import server_hints

        use_threads(args.threads)
        args = args.with_defaults()
        args.check_outputs()
        opts = FingerprintOptions(**args.library(ctx), max_new_tokens=max_new_tokens,
                                  states_server=reach.server(states_server_url(states_server, server, "fingerprint"),
                                                             hidden_states_dir),
                                  ttt_steps=ttt_steps, more_prompts=more_prompts,
                                  confirm_prompts=confirm_prompts)
        with reporter(args.json_out) as (status, progress), server_hints():
            result = run_fingerprint(opts, status, progress)
        args.emit(result, functools.partial(render_fingerprint, verbose=verbose))
    raise typer.Exit(EXIT_OK if result.verdict == "match" else EXIT_MISMATCH)
