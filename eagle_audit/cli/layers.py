"""`eagle-audit layers`: which slot is wired wrong, how, and the config change that fixes it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK, BadOption
from ..layers.fixed_copy import WEIGHTS, write_fixed_copy
from ..layers.render import render_layers
from ..layers.run import LayersOptions, run_layers
from .accept_rate import server_hints
from .console import err
from .defaults import use_threads
from .deprecations import states_server_url
from .edge import error_edge
from .pending import wrote
from .progress import reporter
from .unused import SERVER_REACH, refuse_unused
from .options import (AuditArgs, OldServer, ServerArgs, Verbose, audit_command, hidden_states_dir_option,
                      states_server_option, static_option)


#: options that do nothing in some combinations (:func:`eagle_audit.cli.unused.refuse_unused`)
LAYERS_UNUSED = (
    (("states_server", "server"), "static", "--static loads no weights and reads no state, so the server is never asked; drop --static "
     "to compare the server's states with the local capture"),
    (("device", "dtype", "device_map", "prompts", "max_prompts", "max_tokens"), "static",
     "--static loads no weights and runs no prompt"),
    ("scan", "static", "--static captures nothing"),
    (SERVER_REACH, "!states_server|!server", "it says how to reach a --states-server, and none is given"),
    ("fixed_weights", "!write_fixed_config", "it says how --write-fixed-config holds the weights, and no "
     "--write-fixed-config is given"),
)


@audit_command
def layers(
    ctx: typer.Context,
    args: AuditArgs,
    static: static_option("Config-level checks only: no target weights are loaded.") = False,
    scan: Annotated[bool, typer.Option("--scan/--no-scan", help="Capture every boundary (heatmap, nearest state) or only the needed ones.")] = True,
    write_fixed_config: Annotated[Optional[str], typer.Option("--write-fixed-config", help="Write a corrected copy of the draft into DIR (config.json patched, weights linked by a relative path, or copied: --fixed-weights); the input is untouched.")] = None,
    fixed_weights: Annotated[str, typer.Option("--fixed-weights", help="How --write-fixed-config holds the draft's weights: link (symbolic links by a relative path: move or tar the copy together with the draft) or copy (the files themselves: the copy travels alone).")] = "link",
    states_server: states_server_option("URL of a running SGLang (capture-only) or vLLM (extract_hidden_states) server: with the target's weights here, each state it serves is compared with the local capture of every boundary; with a target directory of config and tokenizer only, every state comes from it (docs/server.md).") = None,
    hidden_states_dir: hidden_states_dir_option("vLLM: the server's shared_storage_path as this machine sees it (where the connector writes the states).") = None,
    reach: ServerArgs = ServerArgs(),
    server: OldServer = None,
    verbose: Verbose = False,
) -> None:
    """Audit the hidden-state wiring of an EAGLE-3 draft: trained vs served, slot by slot.

    Examples:

      eagle-audit layers                                   # SmolLM2 + the demo draft

      eagle-audit layers -t ./Llama-3.1-8B -d ./my-eagle3 --trainer specforge

      eagle-audit layers -t model.gguf -d ./draft --trained-boundaries 0,3,31

      eagle-audit layers -d ./my-eagle3 --states-server http://127.0.0.1:30000

    Exit codes: 0 the wiring matches, 1 a mismatch was found, 2 bad input, 3 internal error.
    """
    with error_edge():
        refuse_unused(ctx, LAYERS_UNUSED)
        use_threads(args.threads)
        args = args.with_defaults()
        if fixed_weights not in WEIGHTS:
            raise BadOption(f"--fixed-weights {fixed_weights!r}: one of {', '.join(WEIGHTS)}")
        args.check_outputs(new_dirs={"--write-fixed-config": write_fixed_config})
        opts = LayersOptions(**args.library(ctx), device_map=args.device_map, static=static, scan=scan,
                             states_server=reach.server(states_server_url(states_server, server, "layers"),
                                                        hidden_states_dir))
        with reporter(args.json_out) as (status, progress), server_hints():
            result = run_layers(opts, status, progress)
        args.emit(result, functools.partial(render_layers, verbose=verbose))
        if write_fixed_config:
            write_fixed(args.draft, write_fixed_config, result.fix, fixed_weights)
            wrote(write_fixed_config)
    raise typer.Exit(EXIT_OK if result.verdict == "match" else EXIT_MISMATCH)


def write_fixed(draft: str, dest: str, fix, weights: str = "link") -> None:
    """A corrected copy of the draft in ``dest``, written by :func:`eagle_audit.layers.fixed_copy.write_fixed_copy`
    (config.json patched with the proven fix, every other file linked; a re-run replaces it)."""
    if fix is None:
        err.print("nothing to fix: the wiring matches; no config written")
        return
    write_fixed_copy(draft, dest, fix, "--write-fixed-config", weights)
    how = "copied from" if weights == "copy" else "linked by relative paths to"
    err.print(f"wrote {Path(dest) / 'config.json'} (weights {how} {draft})", soft_wrap=True)
