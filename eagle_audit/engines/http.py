"""HTTP to a running engine, standard library only: one server (base URL, bearer token), a deadline per
request and one for the whole reading, and the errors every engine client raises. No engine is named here:
what each engine's API is (probe path, key variables, neutral sampling) is ``engines/<engine>/wire.py``.

Every request has an overall deadline (``timeout``), and the whole reading has one (``deadline``): a server
that drips one byte at a time is cut off. Replies of the wrong shape raise :class:`BadServerReply`.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from ..errors import AuditError

MAX_REPLY_BYTES = 64 << 20  # no reply of these endpoints comes near; a bigger one is not a server of ours
STREAM_CHUNK = 1 << 20  # bytes read at a time from a streamed reply (served hidden states: no size cap)
DEFAULT_TIMEOUT = 300.0  # seconds for one request, connection to last byte
DEFAULT_DEADLINE = 3600.0  # seconds for the whole server reading
PROBE_TIMEOUT = 10.0  # seconds the first, short request may take: a server that does not answer it is not up


class ServerError(AuditError):
    """The server cannot be read: unreachable, refused, too slow, or not set up to report acceptance."""


class ServerAuthError(ServerError):
    """The server answered 401 or 403: it wants an API key, or another one."""


class ServerTimeout(ServerError):
    """A request or the whole reading ran past its deadline."""


class BadServerReply(ServerError):
    """A reply of the wrong shape or type."""


class ServerFailed(ServerError):
    """A generation request of the audited prompts got a server error (HTTP 5xx): the engine raised on them
    (vLLM 0.33.0 answers for an engine that died ``500 {"error": {"type": "InternalServerError", ...}}``,
    entrypoints/serve/exception_handling/error_response.py:68-72, and shuts the server down). Raised by
    :meth:`Http.json` with ``generation=True``; the arbiter reports it (accept/arbiter.py)."""


# ----------------------------------------------------------------------------- HTTP with deadlines


@dataclass
class Clock:
    deadline: float  # seconds for the whole reading
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.start)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    retry_after: float | None = None  # seconds, from a Retry-After header (delay or HTTP date); None: none given


MAX_RETRIES = 5  # 503 / 429 replies with Retry-After retried per request


def _retry_after(value: str | None) -> float | None:
    """A Retry-After header's wait in seconds (RFC 9110: a delay in seconds or an HTTP date), None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    import datetime

    if when.tzinfo is None:  # "-0000" dates parse naive: RFC 9110 dates are GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


class Http:
    """One server: base URL, bearer token, per-request and whole-run deadlines."""

    def __init__(self, url: str, key: str | None, timeout: float, clock: Clock):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServerError(f"server {url!r}: not an http:// or https:// URL")
        self.url, self.parts, self.key, self.timeout, self.clock = url.rstrip("/"), parts, key, timeout, clock
        self.waits: list[str] = []  # the Retry-After waits of this reading, in words
        self.base_path = parts.path.rstrip("/")

    def request(self, method: str, path: str, body: dict | None = None, auth: bool = True,
                sink: Callable[[bytes], None] | None = None) -> Reply:
        """One request under both deadlines; a 503 or 429 with ``Retry-After`` is retried after the wait the server
        asks for, while the whole reading's deadline allows (at most :data:`MAX_RETRIES` times; each wait is
        recorded in :attr:`waits`, which the readings carry as notes). ``sink``: a 200 reply's body is handed to
        it chunk by chunk as it arrives, with no size cap (the reply's ``body`` is then empty); any other reply
        is read capped."""
        for attempt in range(MAX_RETRIES + 1):
            reply = self._once(method, path, body, auth, sink)
            wait = reply.retry_after if reply.status in (429, 503) else None
            if wait is None or attempt == MAX_RETRIES:
                return reply
            left = self.clock.left()
            if wait > left - 1.0:
                raise ServerError(f"server {self.url}{path}: HTTP {reply.status}{_error_text(reply.body)}; it asks to "
                                  f"retry after {wait:g} s, past what is left of the deadline ({max(left, 0):.0f} s)",
                                  hint="the server is busy or starting: run again later, or give the reading a longer deadline")
            self.waits.append(f"server {self.url}{path}: HTTP {reply.status}, retried after the {wait:g} s its "
                              "Retry-After asked")
            time.sleep(wait)
        return reply  # pragma: no cover - the loop returns

    def _once(self, method: str, path: str, body: dict | None, auth: bool,
              sink: Callable[[bytes], None] | None) -> Reply:
        limit = min(self.timeout, self.clock.left())
        if limit <= 0:
            raise ServerTimeout(f"server {self.url}: the reading ran past its deadline of {self.clock.deadline:g} s")
        per_request = limit == self.timeout
        headers = {"Accept": "application/json, text/plain"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        cls = http.client.HTTPSConnection if self.parts.scheme == "https" else http.client.HTTPConnection
        try:
            conn = cls(self.parts.hostname, self.parts.port, timeout=limit)
        except ValueError as e:  # a port that is not a number
            raise ServerError(f"server {self.url}: {e}") from None
        fired = threading.Event()
        held: list[socket.socket] = []

        def cut() -> None:  # the overall deadline: a read that keeps getting a byte never times out by itself
            fired.set()
            for sock in held:  # the response keeps reading this socket after the connection lets go of it
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(limit, cut)
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            held.append(conn.sock)
            if fired.is_set():
                cut()
            conn.request(method, self.base_path + path, body=data, headers=headers)
            resp = conn.getresponse()
            if sink is not None and resp.status == 200:
                while chunk := resp.read1(STREAM_CHUNK) if hasattr(resp, "read1") else resp.read(STREAM_CHUNK):
                    if fired.is_set():
                        raise OSError("cut at the deadline")
                    sink(chunk)
                if fired.is_set():
                    raise OSError("cut at the deadline")
                return Reply(resp.status, b"", resp.getheader("Content-Type") or "")
            raw = resp.read(MAX_REPLY_BYTES + 1)
            if fired.is_set():
                raise OSError("cut at the deadline")
            if len(raw) > MAX_REPLY_BYTES:
                raise BadServerReply(f"server {self.url}{path}: reply larger than {MAX_REPLY_BYTES >> 20} MiB")
            length = (resp.getheader("Content-Length") or "").strip()
            if length.isdigit() and len(raw) < int(length):  # read(amt) returns short, not IncompleteRead
                raise BadServerReply(f"server {self.url}{path}: the reply ended early ({len(raw)} of {length} "
                                     "bytes): the connection was closed mid-reply")
            return Reply(resp.status, raw, resp.getheader("Content-Type") or "",
                         _retry_after(resp.getheader("Retry-After")))
        except (OSError, http.client.HTTPException) as e:
            if fired.is_set() or isinstance(e, (socket.timeout, TimeoutError)):
                what = f"per-request timeout of {self.timeout:g} s" if per_request else \
                    f"deadline of {self.clock.deadline:g} s for the whole reading"
                raise ServerTimeout(f"server {self.url}{path}: no complete answer within the {what}") from None
            if isinstance(e, http.client.IncompleteRead):
                raise BadServerReply(f"server {self.url}{path}: the reply ended early ({len(e.partial)} bytes of the "
                                     "last read, more expected): the connection was closed mid-reply") from None
            raise self._unreachable(e) from None
        finally:
            timer.cancel()
            conn.close()

    def _unreachable(self, e: BaseException) -> ServerError:
        if isinstance(e, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                          http.client.RemoteDisconnected)):
            return ServerError(f"server {self.url}: the connection was closed before a reply ({type(e).__name__}): "
                               "the server dropped the request", hint="see the server's log: it may have crashed "
                               "or restarted")
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        return ServerError(f"server {self.url}: unreachable ({short(reason)})",
                           hint="is the server running and the URL right?")

    def answers(self, path: str) -> bool:
        """Whether the server begins a reply (a status line, any status) to ``GET path`` within ``timeout``;
        an unreachable server raises as :meth:`request` does."""
        cls = http.client.HTTPSConnection if self.parts.scheme == "https" else http.client.HTTPConnection
        headers = {"Connection": "close", **({"Authorization": f"Bearer {self.key}"} if self.key else {})}
        try:
            conn = cls(self.parts.hostname, self.parts.port, timeout=self.timeout)
        except ValueError as e:  # a port that is not a number
            raise ServerError(f"server {self.url}: {e}") from None
        try:
            conn.request("GET", self.base_path + path, headers=headers)
            conn.getresponse()  # the status line is the answer; "Connection: close": the server reads no more
            return True
        except (socket.timeout, TimeoutError):
            return False
        except (OSError, http.client.HTTPException) as e:
            raise self._unreachable(e) from None
        finally:
            conn.close()

    def check(self, reply: Reply, path: str, generation: bool = False) -> Reply:
        """``reply`` if it is a 200; else the error it is (``generation``: a 5xx is :class:`ServerFailed`)."""
        if reply.status in (401, 403):
            word = "Unauthorized" if reply.status == 401 else "Forbidden"
            said = "no API key was sent" if not self.key else "the API key sent was refused"
            raise ServerAuthError(f"server {self.url}{path}: HTTP {reply.status} {word}: {said}")
        if reply.status != 200:
            cls = ServerFailed if generation and reply.status >= 500 else ServerError
            raise cls(f"server {self.url}{path}: HTTP {reply.status}{_error_text(reply.body)}")
        return reply

    def json(self, method: str, path: str, body: dict | None = None, generation: bool = False) -> Any:
        reply = self.check(self.request(method, path, body), path, generation)
        try:
            return json.loads(reply.body)
        except (ValueError, RecursionError):
            raise BadServerReply(f"server {self.url}{path}: reply is not JSON ({short(reply.body[:80])})") from None


def short(x: Any, n: int = 200) -> str:
    text = x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _error_text(body: bytes) -> str:
    """The message of an error reply (SGLang ``{"error": ...}``, vLLM ``{"error": {"message": ...}}`` or
    ``{"message": ...}``), cut short."""
    try:
        data = json.loads(body)
    except ValueError:
        return f": {short(body)}" if body.strip() else ""
    msg = data
    if isinstance(data, Mapping):
        msg = data.get("error", data.get("message", data.get("detail", data)))
        if isinstance(msg, Mapping):
            msg = msg.get("message", msg)
    return f": {short(msg)}"


# ----------------------------------------------------------------------------- reply fields


def reply_field(obj: Any, key: str, kind: type | tuple, where: str, optional: bool = False) -> Any:
    if not isinstance(obj, Mapping):
        raise BadServerReply(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise BadServerReply(f"{where}: no {key!r}")
    v = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        raise BadServerReply(f"{where}: {key!r} is {type(v).__name__} {short(json.dumps(v), 60)}, "
                             f"expected {' or '.join(k.__name__ for k in kinds)}")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and (not math.isfinite(v) or v < 0):
        raise BadServerReply(f"{where}: {key!r} is {v!r}, expected a finite number >= 0")
    return v


def int_list(v: Any, key: str, where: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
        raise BadServerReply(f"{where}: {key!r} is not a list of non-negative integers ({short(json.dumps(v), 60)})")
    return v
