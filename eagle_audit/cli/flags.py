"""The library's parameter references (:func:`eagle_audit.errors.param`) shown as the running command's flags
(```num_steps``` -> ``--num-steps``), in a text or in a result's JSON; whether an option was given on the
command line."""

from __future__ import annotations

import re
from typing import Mapping

from ..errors import PARAM_REF
from .click_api import get_current_context


def option_of(name: str, ctx=None):
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
    p = option_of(name, ctx)
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
        p = option_of(name, ctx)
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


def given(ctx, name: str) -> bool:
    """Whether the option ``name`` was given on the command line (or from the environment), not defaulted."""
    try:
        source = ctx.get_parameter_source(name)
    except Exception:  # noqa: BLE001 - no such parameter
        return False
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")
