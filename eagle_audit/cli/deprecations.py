"""Renamed flags: each keeps its old name for one release, with one ``warning:`` line on stderr; the old and
the new name given together is bad input."""

from __future__ import annotations

from ..errors import BadOption
from .console import err


def states_server_url(states_server: str | None, old_server: str | None, command: str) -> str | None:
    """The ``--states-server`` URL of ``command`` (layers, check, fingerprint), where ``--server`` was its earlier
    name: kept one release, with one line on stderr; both at once is bad input."""
    if old_server is None:
        return states_server
    if states_server is not None:
        raise BadOption("--server and --states-server name the same server here: give --states-server only")
    err.print(f"warning: `{command} --server` is deprecated: use --states-server (--server names the server under "
              "test in accept-rate only)", highlight=False, markup=False, soft_wrap=True)
    return old_server
