"""The command line a result records (``provenance.command``): the command that reproduces this invocation,
naming only the options that differ from their defaults, secrets redacted."""

from __future__ import annotations

import typer

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
