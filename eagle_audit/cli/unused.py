"""Options given where they do nothing are refused (``layers --static --server URL`` ignored the server and
said nothing): one ``error:`` line, exit 2. Each command declares its rules; :data:`SERVER_REACH` names the
options that do nothing without a server."""

from __future__ import annotations

from ..errors import BadOption
from .flags import flag_for, given, option_of

#: how a server reached by --server (or --states-server) is reached: options that do nothing without one
SERVER_REACH = ("hidden_states_dir", "server_kind", "api_key", "server_timeout", "server_deadline", "states_from")


def refuse_unused(ctx, rules) -> None:
    """One ``error:`` line, exit 2, for an option given where it does nothing (``layers --static
    --server URL`` ignored the server and said nothing). ``rules``: ``(names, when, why)``: any option of
    ``names`` given while ``when`` holds (``"static"``: that flag is on; ``"!server"``: that option is not
    given; several alternatives joined by ``|``: every one holds) is refused, ``why`` saying what was not run."""
    def holds(cond: str) -> bool:
        for c in cond.split("|"):
            neg, name = c.startswith("!"), c.lstrip("!")
            on = given(ctx, name) and ctx.params.get(name) not in (None, False)
            if on == neg:
                return False
        return True

    for names, when, why in rules:
        for name in (names,) if isinstance(names, str) else names:
            if given(ctx, name) and holds(when):
                p = option_of(name, ctx)
                flag = (p.secondary_opts[0] if p is not None and p.secondary_opts and ctx.params.get(name) is False
                        else flag_for(name, ctx))
                raise BadOption(f"{flag} does nothing here: {why}", hint=f"drop {flag}")
