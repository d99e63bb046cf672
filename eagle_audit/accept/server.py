"""Served accept length over exactly the audited prompts, from a running SGLang or vLLM server
(standard library only). Every fact below was read in the ``sglang==0.5.23`` / ``vllm==0.33.0`` wheels;
docs/server.md cites file:line and how to start each engine so that the figures exist.

SGLang (``POST /generate`` per prompt, ``input_ids``): each finished reply's ``meta_info`` carries
``completion_tokens`` (output tokens, the prefill token included) and, when the server runs speculative
decoding, ``spec_verify_ct`` (verify passes), ``spec_accept_length`` (= completion_tokens / spec_verify_ct),
``spec_num_correct_drafts`` and ``spec_correct_drafts_histogram`` (``[n]`` = verifies that accepted n drafts;
omitted when empty). The served accept length is ``sum(completion_tokens - 1) / sum(spec_verify_ct)`` over
our requests only: tokens gained per verify, the prefill token excluded, the last verify cut at the end of
the output, which is exactly the simulation's ``accept_length``. ``GET /server_info``
``internal_states[r].avg_spec_accept_length`` is kept as context only: it is the server's lifetime figure
(since start or the last ``/flush_cache``; warm-up request and every other client included; folded only
every ``decode_log_interval`` decode batches, absent before the first fold), one per DP rank.

vLLM (``POST /v1/completions`` per prompt, token ids): the reply carries no acceptance, so Prometheus
``GET /metrics`` is read before and after: ``1 + d(vllm:spec_decode_num_accepted_tokens_total) /
d(vllm:spec_decode_num_drafts_total)`` (vLLM's own mean acceptance length), summed over the ``engine`` /
``model_name`` label sets, per position from ``..._accepted_tokens_per_pos_total{position}``. The counters
exist only with speculative decoding and stats on (no ``--disable-log-stats``). Traffic from other clients
enters the difference: it is detected from ``vllm:request_success_total`` and
``vllm:generation_tokens_total`` and reported. Every sampling parameter that the server may default from
the model's ``generation_config.json`` is sent explicitly with its neutral value (greedy).

Every request has an overall deadline (``timeout``), and the whole reading has one (``deadline``): a server
that drips one byte at a time is cut off. Replies of the wrong shape raise :class:`BadServerReply`.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from ..errors import AuditError

KINDS = ("auto", "sglang", "vllm")
MAX_REPLY_BYTES = 64 << 20  # no reply of these endpoints comes near; a bigger one is not a server of ours
STREAM_CHUNK = 1 << 20  # bytes read at a time from a streamed reply (served hidden states: no size cap)
DEFAULT_TIMEOUT = 300.0  # seconds for one request, connection to last byte
DEFAULT_DEADLINE = 3600.0  # seconds for the whole server reading
PROBE_TIMEOUT = 10.0  # seconds the first, short request may take: a server that does not answer it is not up

# The short request sent before any long work, one the engine answers at once from its HTTP process without
# asking its scheduler: SGLang 0.5.23 GET /model_info reads tokenizer_manager fields (srt/entrypoints/
# http_server.py:812; /health may run a generation when SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is set,
# http_server.py:721, and /server_info asks every scheduler, :863); vLLM 0.33.0 GET /version. Any HTTP
# status counts as an answer (an API-key refusal too: that is reported by the reading itself).
PROBE_PATH = {"sglang": "/model_info", "vllm": "/version", "auto": "/version"}

# The keys an engine may default from the model's generation_config.json, sent explicitly (greedy, no
# penalties). vLLM: CompletionRequest._DEFAULT_SAMPLING_PARAMS (entrypoints/openai/completion/protocol.py:313)
# and ModelConfig.get_diff_sampling_param (config/model.py:1882). SGLang /generate: SamplingParams fields
# (srt/sampling/sampling_params.py:150), merged under --preferred-sampling-params (tokenizer_manager.py:1549).
SGLANG_NEUTRAL = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0,
                  "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_new_tokens": 0, "ignore_eos": False,
                  "n": 1}
VLLM_NEUTRAL = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "frequency_penalty": 0.0,
                "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_tokens": 0, "ignore_eos": False, "n": 1}

# API key sources, in order, after an explicit key. vLLM's server reads VLLM_API_KEY
# (vllm/envs.py:829, entrypoints/serve/middleware/register.py:33); SGLang's server reads only --api-key
# (srt/arg_groups/fields/serving.py:160), and SGLang's own benchmark client sends OPENAI_API_KEY
# (sglang/benchmark/serving.py:132).
KEY_ENV = {"sglang": ("OPENAI_API_KEY",), "vllm": ("VLLM_API_KEY", "OPENAI_API_KEY")}


class ServerError(AuditError):
    """The server cannot be read: unreachable, refused, too slow, or not set up to report acceptance."""


class ServerAuthError(ServerError):
    """The server answered 401 or 403: it wants an API key, or another one."""


class ServerTimeout(ServerError):
    """A request or the whole reading ran past its deadline."""


class BadServerReply(ServerError):
    """A reply of the wrong shape or type."""


@dataclass(frozen=True)
class ServerReading:
    url: str
    kind: str  # "sglang" or "vllm"
    accept_length: float | None  # tokens per verify over our requests (prefill token excluded), as simulated
    request_accept_length: float | None  # SGLang: mean of meta_info.spec_accept_length (prefill included)
    requests: int
    source: str  # which fields the figures came from
    per_position: tuple[float, ...] = ()  # share of verifies that accepted draft i+1
    histogram: tuple[int, ...] = ()  # SGLang: verifies that accepted n drafts (last verify not cut)
    verify_steps: int | None = None
    tokens: int | None = None  # tokens gained by verifies (completion tokens minus the prefill token)
    continuations_equal: int | None = None  # requests whose served output equals the target's greedy one
    lifetime_accept_length: tuple[float | None, ...] = ()  # SGLang /server_info, one per DP rank (context)
    other_traffic: bool | None = None  # vLLM: other clients' requests moved the counters
    key_source: str | None = None  # where the API key came from ("option", an env variable name), never the key
    drafting: Mapping[str, Any] = field(default_factory=dict)  # how the server drafts, as far as it says
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        out["drafting"] = dict(self.drafting)
        return out

    def drafting_differs(self, num_steps: int, topk: int, num_draft_tokens: int) -> str | None:
        """A note when the server drafts otherwise than the simulation (then the figures do not compare)."""
        d = self.drafting
        if self.kind == "sglang":
            theirs = (d.get("num_steps"), d.get("eagle_topk"), d.get("num_draft_tokens"))
            if None in theirs or theirs == (num_steps, topk, num_draft_tokens):
                return None
            return (f"the server drafts num_steps {theirs[0]}, topk {theirs[1]}, num_draft_tokens {theirs[2]}; the "
                    f"simulation ran {num_steps}, {topk}, {num_draft_tokens}: rerun it with the server's settings "
                    "to compare the two")
        k = d.get("num_speculative_tokens")
        if k is None or (topk == 1 and k == num_steps):
            return None
        return (f"the server drafts {k} tokens per step (chain); the simulation ran num_steps {num_steps}, topk {topk}: "
                "rerun it with the server's settings to compare the two")


@dataclass(frozen=True)
class ServerOptions:
    url: str
    kind: str = "auto"
    api_key: str | None = None  # explicit key; else the engine's usual environment variable
    timeout: float = DEFAULT_TIMEOUT
    deadline: float = DEFAULT_DEADLINE

    def __post_init__(self):
        if self.kind not in KINDS:
            raise AuditError(f"server kind {self.kind!r}: must be one of {', '.join(KINDS)}")
        for name in ("timeout", "deadline"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise AuditError(f"server {name} {v!r}: must be a finite number of seconds > 0")


# ----------------------------------------------------------------------------- HTTP with deadlines


@dataclass
class _Clock:
    deadline: float  # seconds for the whole reading
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.start)


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes
    content_type: str


class _Http:
    """One server: base URL, bearer token, per-request and whole-run deadlines."""

    def __init__(self, url: str, key: str | None, timeout: float, clock: _Clock):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServerError(f"server {url!r}: not an http:// or https:// URL")
        self.url, self.parts, self.key, self.timeout, self.clock = url.rstrip("/"), parts, key, timeout, clock
        self.base_path = parts.path.rstrip("/")

    def request(self, method: str, path: str, body: dict | None = None, auth: bool = True,
                sink: Callable[[bytes], None] | None = None) -> _Reply:
        """One request under both deadlines. ``sink``: a 200 reply's body is handed to it chunk by chunk as
        it arrives, with no size cap (the reply's ``body`` is then empty); any other reply is read capped."""
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
                return _Reply(resp.status, b"", resp.getheader("Content-Type") or "")
            raw = resp.read(MAX_REPLY_BYTES + 1)
            if fired.is_set():
                raise OSError("cut at the deadline")
            if len(raw) > MAX_REPLY_BYTES:
                raise BadServerReply(f"server {self.url}{path}: reply larger than {MAX_REPLY_BYTES >> 20} MiB")
            return _Reply(resp.status, raw, resp.getheader("Content-Type") or "")
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
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        return ServerError(f"server {self.url}: unreachable ({_short(reason)})",
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

    def check(self, reply: _Reply, path: str) -> _Reply:
        if reply.status in (401, 403):
            word = "Unauthorized" if reply.status == 401 else "Forbidden"
            said = "no API key was sent" if not self.key else "the API key sent was refused"
            raise ServerAuthError(f"server {self.url}{path}: HTTP {reply.status} {word}: {said}")
        if reply.status != 200:
            raise ServerError(f"server {self.url}{path}: HTTP {reply.status}{_error_text(reply.body)}")
        return reply

    def json(self, method: str, path: str, body: dict | None = None) -> Any:
        reply = self.check(self.request(method, path, body), path)
        try:
            return json.loads(reply.body)
        except (ValueError, RecursionError):
            raise BadServerReply(f"server {self.url}{path}: reply is not JSON ({_short(reply.body[:80])})") from None


def _short(x: Any, n: int = 200) -> str:
    text = x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _error_text(body: bytes) -> str:
    """The message of an error reply (SGLang ``{"error": ...}``, vLLM ``{"error": {"message": ...}}`` or
    ``{"message": ...}``), cut short."""
    try:
        data = json.loads(body)
    except ValueError:
        return f": {_short(body)}" if body.strip() else ""
    msg = data
    if isinstance(data, Mapping):
        msg = data.get("error", data.get("message", data.get("detail", data)))
        if isinstance(msg, Mapping):
            msg = msg.get("message", msg)
    return f": {_short(msg)}"


def resolve_key(explicit: str | None, kind: str, env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(key, where it came from): the explicit key, else the first engine variable that is set."""
    if explicit:
        return explicit, "option"
    env = os.environ if env is None else env
    for name in KEY_ENV.get(kind, ()):
        if env.get(name):
            return env[name], name
    return None, None


# ----------------------------------------------------------------------------- detection


def _detect(http_: _Http) -> str:
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
    """One short request (:data:`PROBE_PATH`) before any long work: a server that accepts the connection and
    never answers is found out in ``timeout`` seconds, not after the per-request timeout of the first prompt."""
    path = PROBE_PATH[opts.kind]
    limit = min(opts.timeout, opts.deadline, timeout)
    if not _Http(opts.url, opts.api_key, limit, _Clock(limit)).answers(path):
        raise ServerError(f"server {opts.url}: it takes the connection but does not answer: no reply to GET {path} "
                          f"within {limit:g} s", hint="is the server still starting, or hung? (its log says)")


def detect(opts: ServerOptions, timeout: float = 30.0) -> str:
    """``"sglang"`` or ``"vllm"``: ``opts.kind`` when given, else asked of the server (an explicit key is
    sent; an engine variable is not, before the engine is known); either way after :func:`probe`."""
    probe(opts)
    if opts.kind != "auto":
        return opts.kind
    return _detect(_Http(opts.url, opts.api_key, min(opts.timeout, timeout), _Clock(min(opts.deadline, 4 * timeout))))


# ----------------------------------------------------------------------------- reply fields


def _field(obj: Any, key: str, kind: type | tuple, where: str, optional: bool = False) -> Any:
    if not isinstance(obj, Mapping):
        raise BadServerReply(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise BadServerReply(f"{where}: no {key!r}")
    v = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        raise BadServerReply(f"{where}: {key!r} is {type(v).__name__} {_short(json.dumps(v), 60)}, "
                             f"expected {' or '.join(k.__name__ for k in kinds)}")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and (not math.isfinite(v) or v < 0):
        raise BadServerReply(f"{where}: {key!r} is {v!r}, expected a finite number >= 0")
    return v


def _int_list(v: Any, key: str, where: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
        raise BadServerReply(f"{where}: {key!r} is not a list of non-negative integers ({_short(json.dumps(v), 60)})")
    return v


def _positions(hist: Sequence[int], steps: int | None) -> tuple[float, ...]:
    n = sum(hist)
    width = max(len(hist) - 1, steps or 0)
    return tuple(sum(hist[i + 1:]) / n for i in range(width)) if n else ()


# ----------------------------------------------------------------------------- SGLang


def _sglang(http_: _Http, prompts: Sequence[Sequence[int]], max_new: int,
            expected: Sequence[Sequence[int]] | None, progress) -> ServerReading:
    tokens = verifies = 0
    per_request, hist, equal = [], [], 0
    no_spec = 0
    for i, ids in enumerate(prompts):
        where = f"server {http_.url}/generate (prompt {i})"
        body = {"input_ids": [int(t) for t in ids], "sampling_params": {"max_new_tokens": int(max_new), **SGLANG_NEUTRAL}}
        r = http_.json("POST", "/generate", body)
        if isinstance(r, list) and len(r) == 1:
            r = r[0]
        meta = _field(r, "meta_info", dict, where)
        finish = meta.get("finish_reason")
        if isinstance(finish, Mapping) and finish.get("type") == "abort":
            raise ServerError(f"{where}: the server aborted the request ({_short(finish.get('message', finish))})")
        completion = _field(meta, "completion_tokens", int, where + " meta_info")
        verify = _field(meta, "spec_verify_ct", int, where + " meta_info", optional=True)
        if verify is None:
            # tokenizer_manager.py:3150: the spec keys are set only when the request was verified at least
            # once; a request that ends at its prefill token (EOS, max_new_tokens 1) has none
            if completion > 1:
                no_spec += 1
            verify = 0
        elif completion > 1 and verify == 0:
            no_spec += 1
        tokens += max(completion - 1, 0)
        verifies += verify
        sal = _field(meta, "spec_accept_length", (int, float), where + " meta_info", optional=True)
        if sal is not None:
            per_request.append(float(sal))
        h = meta.get("spec_correct_drafts_histogram")
        if h is not None:
            h = _int_list(h, "spec_correct_drafts_histogram", where + " meta_info")
            hist += [0] * (len(h) - len(hist))
            for n, c in enumerate(h):
                hist[n] += c
        if expected is not None:
            out = r.get("output_ids") if isinstance(r, Mapping) else None
            if out is not None:
                equal += int(_int_list(out, "output_ids", where) == list(expected[i]))
        if progress:
            progress(i + 1, len(prompts))
    if no_spec:
        said = f"server {http_.url}: SGLang generated {no_spec} of {len(prompts)} replies without meta_info.spec_verify_ct"
        info = _server_info(http_)
        algorithm, frontend = info.get("speculative_algorithm"), info.get("frontend")
        if algorithm:  # spec decoding on, yet no per-request figures: e.g. a frontend other than the Python one
            raise ServerError(f"{said}, although it runs {_short(algorithm, 40)} ({_short(frontend, 20)} frontend): "
                              "it reports no per-request acceptance")
        raise ServerError(f"{said}: speculative decoding is off on this server",
                          hint="start it with --speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFT")
    info = _server_info(http_)
    lifetime = _sglang_lifetime(info)
    drafting = {k: info[f"speculative_{k}"] for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")
                if isinstance(info.get(f"speculative_{k}"), (str, int)) and not isinstance(info.get(f"speculative_{k}"), bool)}
    notes = []
    if lifetime:
        notes.append("lifetime: /server_info internal_states[].avg_spec_accept_length, one per DP rank, since start "
                     "or the last /flush_cache, warm-up request and all other traffic included; context only")
    return ServerReading(
        http_.url, "sglang", tokens / verifies if verifies else None,
        sum(per_request) / len(per_request) if per_request else None, len(prompts),
        "sum(meta_info.completion_tokens - 1) / sum(meta_info.spec_verify_ct) over the audited requests",
        per_position=_positions(hist, None), histogram=tuple(hist), verify_steps=verifies, tokens=tokens,
        continuations_equal=equal if expected is not None else None, lifetime_accept_length=lifetime,
        drafting=drafting, notes=tuple(notes))


def _server_info(http_: _Http) -> Mapping:
    """``/server_info`` when it is a JSON object, else ``{}`` (context only: never fails the reading)."""
    try:
        info = http_.json("GET", "/server_info")
    except (BadServerReply, ServerAuthError):
        return {}
    except ServerError as e:
        if isinstance(e, ServerTimeout):
            raise
        return {}
    return info if isinstance(info, Mapping) else {}


def _sglang_lifetime(info: Mapping) -> tuple[float | None, ...]:
    """``avg_spec_accept_length`` of every DP rank (None where the rank has not folded a figure yet)."""
    states = info.get("internal_states")
    if not isinstance(states, list):
        return ()
    out = []
    for s in states:
        v = s.get("avg_spec_accept_length") if isinstance(s, Mapping) else None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        out.append(float(v) if ok else None)
    return tuple(out)


# ----------------------------------------------------------------------------- vLLM

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)(?:\s+\S+)?\s*$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SUCCESS = "vllm:request_success_total"
GENERATED = "vllm:generation_tokens_total"
RUNNING = ("vllm:num_requests_running", "vllm:num_requests_waiting")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def parse_exposition(text: str) -> list[Sample]:
    """Prometheus text exposition (0.0.4) -> samples; comments (``# HELP``, ``# TYPE``) skipped, ``_created``
    series kept under their own name. A line that is not a sample raises BadServerReply."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise BadServerReply(f"/metrics line {n} is not a Prometheus sample: {_short(line, 80)}")
        labels = tuple((k, v) for k, v in _LABEL.findall(m.group(2) or ""))
        try:
            value = float(m.group(3))
        except ValueError:
            raise BadServerReply(f"/metrics line {n}: value {_short(m.group(3), 40)!r} is not a number") from None
        out.append(Sample(m.group(1), labels, value))
    return out


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """Each ``vllm:`` series summed over its label sets (engines, models); ``per_pos`` kept per position as
    ``name[position]``."""
    out: dict[str, float] = {}
    for s in parse_exposition(text):
        if not s.name.startswith("vllm:"):
            continue
        key = s.name
        if s.name == PER_POS:
            key = f"{s.name}[{dict(s.labels).get('position', '?')}]"
        out[key] = out.get(key, 0.0) + s.value
    return out


def _metrics(http_: _Http) -> dict[str, float]:
    reply = http_.check(http_.request("GET", "/metrics", auth=False), "/metrics")
    vals = parse_vllm_metrics(reply.body.decode("utf-8", "replace"))
    for k in (DRAFTS, ACCEPTED):
        if k in vals and not math.isfinite(vals[k]):
            raise BadServerReply(f"server {http_.url}/metrics: {k} is {vals[k]}")
    return vals


def _vllm_missing(http_: _Http, vals: Mapping[str, float]) -> None:
    if DRAFTS in vals and ACCEPTED in vals:
        return
    if not vals:
        why = ("no vllm: series at all: stats are off (the server was started with --disable-log-stats); "
               "restart it without that flag")
    else:
        why = ("no vllm:spec_decode_* counters: speculative decoding is off on this server; start it with "
               "--speculative-config '{\"method\": \"eagle3\", \"model\": DRAFT, \"num_speculative_tokens\": K}'")
    raise ServerError(f"server {http_.url}/metrics: {why}")


def _vllm(http_: _Http, prompts: Sequence[Sequence[int]], max_new: int,
          expected: Sequence[Sequence[int]] | None, progress) -> ServerReading:
    before = _metrics(http_)
    _vllm_missing(http_, before)
    ours_tokens, equal = 0, 0
    notes = []
    for i, ids in enumerate(prompts):
        where = f"server {http_.url}/v1/completions (prompt {i})"
        body = {"prompt": [int(t) for t in ids], "max_tokens": int(max_new), "stream": False,
                "return_token_ids": True, **VLLM_NEUTRAL}
        r = http_.json("POST", "/v1/completions", body)
        choices = _field(r, "choices", list, where)
        if len(choices) != 1:
            raise BadServerReply(f"{where}: expected 1 choice, got {len(choices)}")
        usage = _field(r, "usage", dict, where, optional=True)
        if usage is not None:
            ours_tokens += _field(usage, "completion_tokens", int, where + " usage")
        if expected is not None:
            out = choices[0].get("token_ids") if isinstance(choices[0], Mapping) else None
            if out is not None:
                equal += int(_int_list(out, "token_ids", where) == list(expected[i]))
        if progress:
            progress(i + 1, len(prompts))
    # the counters are updated after the reply can be sent (v1/engine/async_llm.py:916 yields before record
    # at :930): wait until our last request is counted, a few seconds at most
    after = _metrics(http_)
    settle = time.monotonic() + min(5.0, max(http_.clock.left(), 0))
    while SUCCESS in before and after.get(SUCCESS, 0) - before[SUCCESS] < len(prompts) and time.monotonic() < settle:
        time.sleep(0.1)
        after = _metrics(http_)
    _vllm_missing(http_, after)
    d = after[DRAFTS] - before[DRAFTS]
    acc = after[ACCEPTED] - before[ACCEPTED]
    if d < 0 or acc < 0:
        raise ServerError(f"server {http_.url}/metrics: the spec-decode counters went down during the run "
                          "(server restarted?)")
    other = None
    if SUCCESS in after:
        finished = after.get(SUCCESS, 0) - before.get(SUCCESS, 0)
        busy = sum(before.get(k, 0) for k in RUNNING)
        gen = after.get(GENERATED, 0) - before.get(GENERATED, 0)
        other = finished != len(prompts) or busy > 0 or (GENERATED in after and ours_tokens > 0 and gen != ours_tokens)
        if other:
            notes.append(f"other traffic moved the counters: {finished:g} requests finished during the run "
                         f"(ours: {len(prompts)}), {gen:g} tokens generated (ours: {ours_tokens}), {busy:g} "
                         "requests running or waiting before it; the accept length mixes them in")
    steps = [k for k in after if k.startswith(PER_POS + "[")]
    by_pos = sorted(((int(k[len(PER_POS) + 1:-1]), k) for k in steps if k[len(PER_POS) + 1:-1].isdigit()))
    per_pos = tuple((after[k] - before.get(k, 0.0)) / d for _, k in by_pos) if d > 0 else ()
    drafting = {"num_speculative_tokens": len(by_pos)} if by_pos else {}  # one per-position counter each
    return ServerReading(
        http_.url, "vllm", 1 + acc / d if d > 0 else None, None, len(prompts),
        "1 + d(vllm:spec_decode_num_accepted_tokens_total) / d(vllm:spec_decode_num_drafts_total) over the run",
        per_position=per_pos, verify_steps=int(d), tokens=int(d + acc) if d > 0 else None,
        continuations_equal=equal if expected is not None else None, other_traffic=other, drafting=drafting,
        notes=tuple(notes))


# ----------------------------------------------------------------------------- entry point


def read_server(url: str | ServerOptions, prompts: Sequence[Sequence[int]], max_new: int, kind: str = "auto",
                timeout: float = DEFAULT_TIMEOUT, *, expected: Sequence[Sequence[int]] | None = None,
                progress: Callable[[int, int], None] | None = None) -> ServerReading:
    """Send every prompt (token ids) to the server, greedy, ``max_new`` new tokens, and read the accept length
    over exactly these requests. ``expected``: the target's own greedy continuations, to count the served
    outputs that equal them."""
    opts = url if isinstance(url, ServerOptions) else ServerOptions(url, kind, timeout=timeout)
    clock = _Clock(opts.deadline)
    kind = detect(opts)
    key, source = resolve_key(opts.api_key, kind)
    http_ = _Http(opts.url, key, opts.timeout, clock)
    read = _sglang if kind == "sglang" else _vllm
    reading = read(http_, prompts, max_new, expected, progress)
    return ServerReading(**{**reading.__dict__, "key_source": source})
