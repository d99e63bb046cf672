"""`eagle-audit check`: every stage of the audit in one command, one verdict."""

from __future__ import annotations

from typing import Annotated, Optional

import functools

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK
from .console import err
from .defaults import use_threads
from .deprecations import states_server_url
from .edge import error_edge
from .progress import reporter
from .unused import SERVER_REACH, refuse_unused
from .options import (AcceptArgs, AuditArgs, OldServer, ServerArgs, Verbose, audit_command, hidden_states_dir_option,
                      states_server_option, static_option)


#: options that do nothing in some combinations (:func:`eagle_audit.cli.unused.refuse_unused`)
CHECK_UNUSED = (
    (("states_server", "server"), "static", "--static runs the static audit only, so the server is never asked"),
    ("fingerprint", "static", "--static loads no weights, so nothing is read off them"),
    (("device", "dtype", "device_map", "prompts", "max_prompts", "max_tokens", "num_steps", "topk", "num_draft_tokens",
      "max_new_tokens", "tolerance", "gen_batch"), "static", "--static loads no weights and runs no prompt"),
    (("fail_under", "fail_under_positions"), "static",
     "--static measures no accept length, so the gate would never be tested"),
    (SERVER_REACH, "!states_server|!server", "it says how to reach a --states-server, and none is given"),
)


@audit_command
def check(
    ctx: typer.Context,
    args: AuditArgs,
    static: static_option("The static audit only: no target weights are loaded.") = False,
    fingerprint: Annotated[bool, typer.Option("--fingerprint", help="Always read the trained wiring off the draft's weights (default: only where it rests on an assumption).")] = False,
    accept: AcceptArgs = AcceptArgs(),
    states_server: states_server_option("URL of a capture-only SGLang or vLLM server launched with the serving line for this draft (docs/server.md): the served stage compares the states it feeds with the local capture; with no weights here (or --states-from server) every state comes from it.") = None,
    hidden_states_dir: hidden_states_dir_option("vLLM --server: the folder its ExampleHiddenStatesConnector writes to (shared_storage_path), as this machine sees it.") = None,
    reach: ServerArgs = ServerArgs(),
    server: OldServer = None,
    write_fixed_config: Annotated[Optional[str], typer.Option("--write-fixed-config", help="Write a corrected copy of the draft into DIR with the verdict's fix (config.json patched, weights linked); the input is untouched.")] = None,
    verbose: Verbose = False,
) -> None:
    """Why is my accept length low? The static audit, then (with the target's weights) the captured
    comparison, the fingerprint where the trained wiring is assumed, and the accept-rate cost, in one run:
    one target load, no forward twice. One verdict: what is wrong, which stage showed it, what it costs,
    the fix.

    Examples:

      eagle-audit check                                          # SmolLM2 + the demo draft

      eagle-audit check -t ./Llama-3.1-8B -d ./my-eagle3 --report reports/

      eagle-audit check -t ./config-only -d ./my-eagle3 --static   # CI, seconds

      eagle-audit check -d ./my-eagle3 --fail-under 2.0 --fail-under-positions 0.4

    Exit codes: 0 no stage found the wiring wrong (and every gate passes), 1 a mismatch (or a gate fails: one
    line says which), 2 bad input, 3 internal error.
    """
    with error_edge():
        refuse_unused(ctx, CHECK_UNUSED)
        use_threads(args.threads)
        from ..check.render import render_check
        from ..check.run import CheckOptions, run_check
        from ..accept.gate import reason

        args = args.with_defaults()
        args.check_outputs(new_dirs={"--write-fixed-config": write_fixed_config})
        opts = CheckOptions(**args.library(ctx), static=static, fingerprint=fingerprint, **accept.library(),
                            device_map=args.device_map, fail_under=accept.fail_under,
                            fail_under_positions=accept.positions(),
                            states_server=reach.server(states_server_url(states_server, server, "check"),
                                                       hidden_states_dir))
        with reporter(args.json_out) as (status, progress):
            result = run_check(opts, status, progress)
        args.emit(result, functools.partial(render_check, verbose=verbose))
        v = result.verdict
        if write_fixed_config:
            from .layers import write_fixed
            from .pending import wrote

            write_fixed(args.draft, write_fixed_config, v.fix)
            wrote(write_fixed_config)
        if v.gate:
            err.print(reason(v.gate), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if v.status == "match" and not v.gate else EXIT_MISMATCH)
