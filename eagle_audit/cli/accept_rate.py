"""`eagle-audit accept-rate`: accept length under the trained and the served wiring, slot by slot."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK
from .console import err
from .defaults import use_threads
from .edge import error_edge
from .progress import reporter
from .unused import SERVER_REACH, refuse_unused
from .options import (AcceptArgs, AuditArgs, ServerArgs, Verbose, audit_command, hidden_states_dir_option,
                      server_option)


@contextmanager
def server_hints():
    """The library's server errors name no flag; here they get the hint that does."""
    from ..engines.http import ServerAuthError, ServerTimeout

    try:
        yield
    except ServerAuthError as e:
        e.hint = ("give the server's key with --api-key (or set VLLM_API_KEY for vLLM, OPENAI_API_KEY for either); "
                  "SGLang's admin-only endpoints need its --admin-api-key")
        raise
    except ServerTimeout as e:
        e.hint = "raise --server-timeout (one request) or --server-deadline (the whole reading)"
        raise


#: options that do nothing in some combinations (:func:`eagle_audit.cli.unused.refuse_unused`)
ACCEPT_UNUSED = (
    ("hidden_states_dir", "!states_server", "it says where a vLLM --states-server writes its states, and none is given"),
    (SERVER_REACH[1:-1], "!server|!states_server", "it says how to reach a --server or --states-server, and none is given"),
    ("states_from", "!states_server", "it says where the target's states come from with a --states-server, and none is "
                                      "given"),
)


@audit_command
def accept_rate(
    ctx: typer.Context,
    args: AuditArgs,
    accept: AcceptArgs = AcceptArgs(),
    live: Annotated[bool, typer.Option("--live", help="Also run real draft-then-verify decoding (served wiring): tokens/s, speedup, lossless check.")] = False,
    server: server_option("URL of a running SGLang or vLLM server to read accept length from, for the same prompts.") = None,
    states_server: Annotated[Optional[str], typer.Option("--states-server", help="URL of a reference server (SGLang capture-only or vLLM extract_hidden_states, started with the reference line of docs/server.md) to take every target state and the greedy continuation from, for a --target directory of config, tokenizer and embed_tokens.safetensors only; the draft is simulated here on those states. Unlike --server, which serves the draft and reports its own accept length.")] = None,
    hidden_states_dir: hidden_states_dir_option("vLLM --states-server: the server's shared_storage_path as this machine sees it.") = None,
    reach: ServerArgs = ServerArgs(),
    verbose: Verbose = False,
) -> None:
    """Measure what a wiring mistake costs: accept length of the draft under its trained wiring and
    under the engine's, and with each mis-wired slot corrected alone.

    Acceptance is simulated under greedy verification, for chain drafts (--topk 1), tree drafts
    (--topk > 1 with --num-draft-tokens, SGLang's beam expansion and pruning) and DFlash/DSpark block
    drafts (one block a verify, the block size from the draft's config): the target generates each
    prompt's continuation, one teacher-forced pass captures every state, and the draft is rolled out
    from every position as the engine runs it.

    Examples:

      eagle-audit accept-rate                                   # SmolLM2 + the demo draft

      eagle-audit accept-rate -t model.gguf -d ./canary --num-steps 3 --json -

      eagle-audit accept-rate -d ./canary --topk 4 --num-draft-tokens 8          # a tree draft

      eagle-audit accept-rate -d ./draft --server http://127.0.0.1:30000   # measured

      eagle-audit accept-rate -d ./my-eagle3 --fail-under 2.0          # a CI gate

      eagle-audit accept-rate -t ./config-only -d ./draft --states-server URL

    Exit codes: 0 served is within --tolerance of trained (and every --fail-under gate passes), 1 served loses
    more (or a gate fails: one line says which), 2 bad input, 3 internal error.
    """
    with error_edge():
        refuse_unused(ctx, ACCEPT_UNUSED)
        use_threads(args.threads)
        from ..accept.render import render_accept
        from ..accept.run import AcceptOptions, run_accept

        from ..accept.gate import Gate, failures, reason

        gate = Gate(accept.fail_under, accept.positions())
        gate.fits(accept.num_steps)
        args = args.with_defaults()
        args.check_outputs()
        opts = AcceptOptions(**args.library(ctx), **accept.library(), live=live, server=reach.server(server),
                             device_map=args.device_map, states_server=reach.server(states_server, hidden_states_dir))
        with reporter(args.json_out) as (status, progress), server_hints():
            result = run_accept(opts, status, progress)
        args.emit(result, functools.partial(render_accept, verbose=verbose))
        failed = failures(gate, result.to_json())
        if failed:
            err.print(reason(failed), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if result.verdict == "match" and not failed else EXIT_MISMATCH)
