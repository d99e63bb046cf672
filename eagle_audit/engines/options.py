"""Which server, and which engine it is: :class:`Server` (the one shape of a server in every command), the API key (:func:`resolve_key`), the short
probe before long work and the engine's detection. Each engine's own facts come from its ``wire.py``."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Mapping

from ..errors import AuditError, BadOption, param
from .http import DEFAULT_DEADLINE, DEFAULT_TIMEOUT, PROBE_TIMEOUT, Clock, Http, ServerError
from .sglang import wire as sglang_wire
from .vllm import wire as vllm_wire

#: each engine's wire facts, by name (an engine registered later, engines.registry.register, adds its own)
WIRES = {w.NAME: w for w in (sglang_wire, vllm_wire)}
KINDS = ("auto", *WIRES)  # the built-in server kinds (the CLI's choices); kinds() is the live list
#: the short request sent before any long work (each engine's wire.py says why that path); "auto": vLLM's,
#: which every engine of ours answers at once
AUTO_PROBE_PATH = vllm_wire.PROBE_PATH


def kinds() -> tuple[str, ...]:
    """Every server kind: "auto" and each registered engine's name."""
    return ("auto", *WIRES)


def probe_path(kind: str) -> str:
    return AUTO_PROBE_PATH if kind == "auto" else WIRES[kind].PROBE_PATH


#: where an audit's target states may come from when a server is named (source.registry.states_from)
STATES_FROM = ("auto", "server", "local")


@dataclass(frozen=True)
class Server:
    """A running engine, as every command names it: where it is, which engine it is, its key and deadlines,
    (vLLM) the folder its states land in as this machine sees it, and (a states server) whether the target's
    states come from it (:func:`eagle_audit.source.registry.states_from`). One shape for ``--server`` and
    ``--states-server`` alike; what a command reads from it is the command's."""

    url: str
    kind: str = "auto"  # "auto" or a registered engine's name (:func:`kinds`)
    api_key: str | None = None  # explicit key; else the engine's usual environment variable
    timeout: float = DEFAULT_TIMEOUT  # seconds per request, connection to last byte
    deadline: float = DEFAULT_DEADLINE  # seconds for the whole reading
    hidden_states_dir: str | None = None  # vLLM: the server's shared_storage_path, as this machine sees it
    use: str = "auto"  # where the target's states come from: "auto", "server" or "local" (--states-from)

    def __post_init__(self):
        if not isinstance(self.url, str) or not self.url:
            raise BadOption(f"server url {self.url!r}: must be a non-empty string (http://host:port)")
        if self.kind not in kinds():
            raise AuditError(f"server kind {self.kind!r}: must be one of {', '.join(kinds())}")
        for name in ("timeout", "deadline"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise AuditError(f"server {name} {v!r}: must be a finite number of seconds > 0")
        if self.use not in STATES_FROM:
            raise BadOption(f"{param('states_from', self.use)}: must be one of {', '.join(STATES_FROM)}")

    def options(self) -> "Server":
        """Itself (kept for callers of the earlier ``StatesServer.options()``)."""
        return self

    def to_json(self) -> dict:
        return {"url": self.url, "kind": self.kind, "timeout": self.timeout, "deadline": self.deadline,
                "hidden_states_dir": self.hidden_states_dir, "api_key": "<redacted>" if self.api_key else None,
                "states_from": self.use}


#: the earlier name of :class:`Server` (deprecated: one release)
ServerOptions = Server


def resolve_key(explicit: str | None, kind: str, env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(key, where it came from): the explicit key, else the first engine variable that is set."""
    if explicit:
        return explicit, "option"
    env = os.environ if env is None else env
    for name in (WIRES[kind].KEY_ENV if kind in WIRES else ()):
        if env.get(name):
            return env[name], name
    return None, None


# ----------------------------------------------------------------------------- detection


def _detect(http_: Http) -> str:
    """SGLang answers ``/server_info`` with ``internal_states`` and guards it with its API key
    (srt/utils/auth.py:148: every path but /health*, /ready*, /metrics*); vLLM serves /server_info only in
    dev mode and unguarded (entrypoints/serve/middleware/authenticate.py:12 guards /v1, /v2, ...), and
    always serves ``/version``; its ``/metrics`` carries ``vllm:`` series when stats are on."""
    reply = http_.request("GET", "/server_info")
    if reply.status == 200:
        try:
            if isinstance((info := json.loads(reply.body)), Mapping) and "internal_states" in info:
                return "sglang"
        except (ValueError, RecursionError):
            pass
    elif reply.status in (401, 403):
        return "sglang"
    reply = http_.request("GET", "/metrics", auth=False)
    if reply.status == 200 and b"vllm:" in reply.body:
        return "vllm"
    version = http_.request("GET", "/version", auth=False)
    if version.status == 200:
        try:
            if isinstance(v := json.loads(version.body), Mapping) and "version" in v:
                return "vllm"
        except (ValueError, RecursionError):
            pass
    raise ServerError(f"server {http_.url}: neither an SGLang /server_info nor a vLLM /metrics or /version answered")


def probe(opts: ServerOptions, timeout: float = PROBE_TIMEOUT) -> None:
    """One short request (:func:`probe_path`) before any long work: a server that accepts the connection and
    never answers is found out in ``timeout`` seconds, not after the per-request timeout of the first prompt."""
    path = probe_path(opts.kind)
    limit = min(opts.timeout, opts.deadline, timeout)
    if not Http(opts.url, opts.api_key, limit, Clock(limit)).answers(path):
        raise ServerError(f"server {opts.url}: it takes the connection but does not answer: no reply to GET {path} "
                          f"within {limit:g} s", hint="is the server still starting, or hung? (its log says)")


def detect(opts: ServerOptions, timeout: float = 30.0) -> str:
    """``"sglang"`` or ``"vllm"``: ``opts.kind`` when given, else asked of the server (an explicit key is
    sent; an engine variable is not, before the engine is known); either way after :func:`probe`."""
    probe(opts)
    if opts.kind != "auto":
        return opts.kind
    return _detect(Http(opts.url, opts.api_key, min(opts.timeout, timeout), Clock(min(opts.deadline, 4 * timeout))))


def server_release(opts: Server, timeout: float = PROBE_TIMEOUT) -> tuple[str, str | None, str]:
    """(engine, release, where it was read) of the server ``opts`` names: the engine as :func:`detect` finds it,
    the release from the engine's own route (each ``wire.py``'s ``VERSION_PATHS`` / ``VERSION_FIELD``); release
    None, and why, where the server does not say."""
    kind = detect(opts, timeout)
    wire = WIRES[kind]
    key, _ = resolve_key(opts.api_key, kind)
    limit = min(opts.timeout, timeout)
    http_ = Http(opts.url, key, limit, Clock(min(opts.deadline, 4 * limit)))
    said = []
    for path in getattr(wire, "VERSION_PATHS", ()):
        reply = http_.request("GET", path)
        if reply.status != 200:
            said.append(f"GET {path}: HTTP {reply.status}")
            continue
        try:
            value = json.loads(reply.body).get(wire.VERSION_FIELD)
        except (ValueError, RecursionError, AttributeError):
            said.append(f"GET {path}: not a JSON object")
            continue
        if isinstance(value, str) and value:
            return kind, value, f"GET {opts.url.rstrip('/')}{path}"
        said.append(f"GET {path}: no {wire.VERSION_FIELD!r}")
    return kind, None, "; ".join(said) or f"{kind} names no route that says its release"
