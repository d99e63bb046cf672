"""The backends, in one place: adding one (a server, a remote shard) is one entry in :data:`BACKENDS` and
its module. :func:`open_source` opens the first backend whose ``accepts`` takes the request (or the one
the request names); :func:`as_source` wraps a target already loaded by the caller (tests, the Python
API's :func:`eagle_audit.api.load_target`); :func:`states_from` turns an audit's options into the one request every command opens.

Each backend's module is imported only when it is opened (inside its opener), so that importing the
registry imports no torch and no HTTP client.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ..errors import BadOption, param
from ..target import has_weights
from .spec import SourceRequest


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str  # one line for docs and messages
    accepts: Callable[[SourceRequest], bool]  # does this backend take the request?
    opener: Callable  # (request, status) -> StateSource

    def open(self, request: SourceRequest, status=None):
        return self.opener(request, status)


def _open_server(request: SourceRequest, status=None):
    from .server import open_served

    return open_served(request, status)


def _open_local(request: SourceRequest, status=None):
    from .local import open_local

    return open_local(request, status)


#: Every backend, in the order :func:`open_source` tries them (the first that accepts wins).
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("server", "a running SGLang or vLLM server hands out every state (the target directory holds config and "
            "tokenizer only)", lambda r: r.server is not None, _open_server),
    Backend("device-map", "transformers, the target split over the visible devices by accelerate (device_map)",
            lambda r: r.server is None and r.device_map is not None, _open_local),
    Backend("local", "transformers, the whole target on one device (cpu, cuda[:i])",
            lambda r: r.server is None and r.device_map is None, _open_local),
)}


def open_source(request: SourceRequest, status: Callable[[str], None] | None = None):
    """The :class:`~eagle_audit.source.protocol.StateSource` for ``request``."""
    if request.backend is not None:
        backend = BACKENDS.get(request.backend)
        if backend is None:
            raise BadOption(f"{param('backend')}: unknown state source {request.backend!r} (known: "
                            f"{', '.join(BACKENDS)})")
        if not backend.accepts(request):
            raise BadOption(f"{param('backend', backend.name)}: does not take this request ({backend.summary})")
    else:
        backend = next((b for b in BACKENDS.values() if b.accepts(request)), None)
        if backend is None:
            raise BadOption("no state source takes this request (known: " + ", ".join(BACKENDS) + ")")
    return backend.open(request, status)


def as_source(target):
    """``target`` as a source: a source is returned as is; a :class:`~eagle_audit.target.LoadedTarget`
    gets one :class:`~eagle_audit.source.local.LocalSource` for its lifetime (so its memo is shared by
    every caller handed the same loaded target)."""
    if hasattr(target, "spec") and hasattr(target, "teacher_forced"):
        return target
    src = getattr(target, "_state_source", None)
    if src is None:
        from .local import LocalSource

        src = LocalSource(target, "device-map" if str(target.device).startswith("device_map=") else "local")
        target._state_source = src
    return src


def states_from(opts, *, server_only: bool = False, device_map: str | None = None) -> SourceRequest:
    """Where an audit's target states come from, decided here once for every command, as the one
    :class:`~eagle_audit.source.spec.SourceRequest` it opens (``request.server`` set: from the server). From the
    user's choice ``opts.states_server.use`` (``--states-from``; docs/sources.md):

    * ``"server"``: every state from the server; the target's weights are never loaded, wherever they are;
    * ``"local"``: the weights here; with a server, ``layers`` and ``check`` compare its states with the local
      capture;
    * ``"auto"`` (the default): ``"server"`` when the target directory holds no weights
      (:func:`eagle_audit.target.has_weights`), else ``"local"``.

    ``server_only``: the analysis takes its states from the server or not at all (``accept-rate
    --states-server``, ``fingerprint --server``): ``local`` is refused, and so is ``auto`` on a target that holds
    weights (the states would silently come from the weights instead). No server: the local request.
    ``opts``: an audit's options (:class:`eagle_audit.inputs.AuditInputs`, or any object with ``target``,
    ``device``, ``dtype`` and optionally ``states_server``)."""
    server = getattr(opts, "states_server", None)
    local = SourceRequest(os.fspath(opts.target), opts.device, opts.dtype, device_map)
    if server is None:
        return local
    use = getattr(server, "use", "auto")
    if use == "local":
        if server_only:
            raise BadOption(f"{param('states_from', 'local')}: this analysis takes every target state from the server "
                            f"it names ({param('states_server')}); use {param('states_from', 'server')} or leave the "
                            "server out")
        return local
    if use == "auto" and has_weights(os.fspath(opts.target)):
        if server_only:
            raise BadOption(f"{param('states_server')} takes every target state from the server, but "
                            f"{param('target', os.fspath(opts.target))} holds weights: give "
                            f"{param('states_from', 'server')} to take them from the server anyway (the weights are not "
                            "loaded), name a directory of config.json, the tokenizer and embed_tokens.safetensors only "
                            "(docs/server.md), or leave the server out")
        return local
    return SourceRequest(os.fspath(opts.target), opts.device, opts.dtype, None, server=server.url,
                         options={"states_server": server, "why": states_reason(opts)})


def states_reason(opts) -> str:
    """Why the states come from where :func:`states_from` says, in words (for the run's notes)."""
    server = opts.states_server
    use = getattr(server, "use", "auto")
    if use != "auto":
        return f"{param('states_from', use)} chosen"
    held = "holds weights" if has_weights(os.fspath(opts.target)) else "holds no weights"
    return f"{param('states_from', 'auto')}: {os.fspath(opts.target)} {held}"


def source_request(opts, device_map: str | None = None) -> SourceRequest:
    """:func:`states_from` without ``server_only`` (kept for callers of the earlier name)."""
    return states_from(opts, device_map=device_map)
