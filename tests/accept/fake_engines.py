"""Local HTTP servers that answer ``--server`` as SGLang 0.5.23 and vLLM 0.33.0 do, over a toy speculative
decoder whose acceptance is known exactly.

Toy model: the target's greedy next token and the draft's guess are pure functions of the token ids; the
draft is wrong at some positions. :func:`spec_generate` runs chain speculative decoding (``steps`` drafts per
verify, bonus token, stop at EOS or ``max_new``) as the engines do; :func:`sim_drafts` gives the simulation's
view of the same drafts (``walk``'s ``drafts[j][a-1]``), so the expected figure comes from eagle_audit's own
simulation code.

What each fake reproduces, read in the wheels (file:line of the extracted wheel):

SGLang
  * ``meta_info`` keys: tokenizer_manager.py:2507 (id, finish_reason, prompt_tokens, weight_version,
    num_retractions), :2554 (reasoning_tokens, completion_tokens, cached_tokens), :2754 (e2e_latency), and the
    spec keys of ``_calculate_spec_decoding_metrics`` :3138 only when the request was verified at least once
    (spec_accept_rate, spec_accept_length = completion_tokens / spec_verify_ct, spec_num_correct_drafts,
    spec_num_proposed_drafts, spec_verify_ct, spec_correct_drafts_histogram when non-empty).
  * completion_tokens counts the prefill token and is cut at EOS / max_new_tokens (schedule_batch.py:1856,
    :2035); spec_verify_ct counts every verify, the last one included (batch_result_processor.py:832).
  * ``/server_info`` ``internal_states`` one per DP rank (tokenizer_control_mixin.py:967) with
    ``avg_spec_accept_length`` = lifetime accept tokens / verifies (internal_state.py:243), folded every
    ``decode_log_interval`` (40) decode batches (metrics_reporter.py:934, :999), absent before the first fold,
    reset by ``/flush_cache`` (scheduler.py:5528); a warm-up ``/generate`` at start (http_server.py:2407).
  * API key: every path but /health*, /ready*, /metrics* needs ``Authorization: Bearer KEY``, else 401
    ``{"error": "Unauthorized"}`` (utils/auth.py:112, :148, :199).
vLLM
  * spec-decode counters by vLLM's own ``SpecDecodingProm`` (v1/spec_decode/metrics.py:178, passed in as
    ``prom_cls``), label set model_name/engine(/position) (v1/metrics/loggers.py:499), exposition by
    prometheus_client (``# HELP``/``# TYPE``/``_created``); none without speculative decoding; no vllm: series
    at all with --disable-log-stats.
  * request_success (finished_reason label) and generation_tokens counters, running/waiting gauges
    (loggers.py:528, :538, :799, :809); counters updated just after the reply is sent (async_llm.py:916, :930).
  * sampling: request value, else the model's generation_config default, else OpenAI's
    (entrypoints/openai/completion/protocol.py:313, :367); a non-neutral effective sampling changes the
    output here.
  * API key: paths under /v1, /v2, /inference, /cohere need the bearer token, else 401
    (entrypoints/serve/middleware/authenticate.py:12, :57).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

VOCAB = 97
EOS = 96


def target_next(ids: Sequence[int]) -> int:
    return (ids[-1] * 31 + (ids[-2] if len(ids) > 1 else 5) * 7 + len(ids) * 3) % VOCAB


def draft_next(ids: Sequence[int]) -> int:
    t = target_next(ids)
    return t if (ids[-1] * 13 + len(ids)) % 5 else (t + 1) % VOCAB  # wrong about one time in five


def draft_chain(ctx: Sequence[int], steps: int) -> list[int]:
    c, out = list(ctx), []
    for _ in range(steps):
        d = draft_next(c)
        out.append(d)
        c.append(d)
    return out


@dataclass
class Generation:
    output: list[int]
    verifies: int
    correct: int  # drafts accepted over all verifies (bonus excluded)
    histogram: list[int]  # [n] = verifies that accepted n drafts, the last verify uncut
    accept_tokens: int  # tokens the verifies produced, uncut (what the server-level counters add)
    finish: dict


def spec_generate(prompt: Sequence[int], max_new: int, steps: int, perturb: bool = False) -> Generation:
    """Chain speculative decoding, greedy (lossless): the prefill token, then verifies of ``steps`` drafts.
    ``perturb``: sampling that is not neutral (a penalty) changes the target's choices."""
    def nxt(ids):
        t = target_next(ids)
        return (t + 2) % VOCAB if perturb and len(ids) % 3 == 0 else t

    out = [nxt(list(prompt))]
    g = Generation(out, 0, 0, [], 0, {})
    while True:
        if len(out) > max_new or (len(out) == max_new and out[-1] != EOS):  # the length cap wins past it
            del out[max_new:]
            g.finish = {"type": "length", "length": max_new}
            break
        if out[-1] == EOS:
            g.finish = {"type": "stop", "matched": EOS}
            break
        ctx = list(prompt) + out
        drafts = draft_chain(ctx, steps)
        n = 0
        for d in drafts:
            if d != nxt(ctx + drafts[:n]):
                break
            n += 1
        new = drafts[:n] + [nxt(ctx + drafts[:n])]
        g.verifies += 1
        g.correct += n
        g.accept_tokens += len(new)
        g.histogram += [0] * (n + 1 - len(g.histogram))
        g.histogram[n] += 1
        for i, t in enumerate(new):
            out.append(t)
            if t == EOS:
                break
    return g


def sim_drafts(ids: Sequence[int], steps: int) -> list[list[int]]:
    """``drafts[j][a-1]``: draft j+1 proposed when ids[a] is the last verified token (simulate.walk)."""
    chains = [draft_chain(ids[: a + 1], steps) for a in range(1, len(ids))]
    return [[c[j] for c in chains] for j in range(steps)]


# ----------------------------------------------------------------------------- HTTP plumbing


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Any = None

    def log_message(self, *a):
        pass

    def send(self, code: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> Any:
        n = int(self.headers.get("Content-Length", 0))
        return json.loads(self.rfile.read(n) or b"{}")

    def do_GET(self):
        self.engine.handle(self, "GET")

    def do_POST(self):
        self.engine.handle(self, "POST")


class _Served:
    def start(self) -> str:
        handler = type("H", (_Handler,), {"engine": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return self.url

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def authorized(self, h: _Handler) -> bool:
        got = h.headers.get("Authorization") or ""
        scheme, _, token = got.partition(" ")
        return scheme.lower() == "bearer" and token == self.api_key


# ----------------------------------------------------------------------------- SGLang


@dataclass
class _Reporter:
    """One DP rank's metrics_reporter: interval counters folded into lifetime totals every interval."""
    interval: int
    forward_ct_decode: int = 0
    accept: int = 0
    forward: int = 0
    total_accept: int = 0
    total_forward: int = 0

    def decode_batch(self, accept_tokens: int) -> None:
        self.accept += accept_tokens
        self.forward += 1
        self.forward_ct_decode += 1
        if self.forward_ct_decode % self.interval == 0:
            self.total_accept += self.accept
            self.total_forward += self.forward
            self.accept = self.forward = 0


@dataclass
class FakeSGLang(_Served):
    steps: int = 3
    dp: int = 1
    api_key: str | None = None
    spec: bool = True
    decode_log_interval: int = 40
    requests: list = field(default_factory=list)  # every /generate body received
    reporters: list = field(default_factory=list)
    rid: int = 0

    def __post_init__(self):
        self.reporters = [_Reporter(self.decode_log_interval) for _ in range(self.dp)]
        self.lock = threading.Lock()
        for r in range(self.dp):  # the warm-up request of every DP rank (http_server.py:2330, :2407)
            self.generate([10, 11, 12, 13], {"temperature": 0.0, "max_new_tokens": 8, "ignore_eos": True}, rank=r)

    def generate(self, ids: Sequence[int], sp: dict, rank: int | None = None) -> dict:
        with self.lock:
            rank = self.rid % self.dp if rank is None else rank
            self.rid += 1
            rid = f"{self.rid:032x}"
        max_new = sp.get("max_new_tokens", 128)
        perturb = (sp.get("repetition_penalty") or 1.0) != 1.0 or (sp.get("temperature") or 0.0) > 0
        if self.spec:
            g = spec_generate(ids, max_new, self.steps, perturb)
        else:  # plain decoding: one token per step, no spec keys
            g = spec_generate(ids, max_new, 0, perturb)
        with self.lock:
            for n, c in enumerate(g.histogram):
                for _ in range(c):
                    if self.spec:
                        self.reporters[rank].decode_batch(n + 1)
        meta = {"id": rid, "finish_reason": g.finish, "prompt_tokens": len(ids), "weight_version": "default",
                "num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": len(g.output), "cached_tokens": 0,
                "e2e_latency": 0.01}
        if self.spec and g.verifies > 0:
            proposed = g.verifies * self.steps  # speculative_num_draft_tokens - 1
            meta.update({"spec_accept_rate": g.correct / proposed, "spec_accept_length": len(g.output) / g.verifies,
                         "spec_num_correct_drafts": g.correct, "spec_num_proposed_drafts": proposed,
                         "spec_verify_ct": g.verifies})
            if g.histogram:
                meta["spec_correct_drafts_histogram"] = g.histogram
        if self.dp > 1:
            meta["dp_rank"] = rank
        return {"text": " ".join(map(str, g.output)), "output_ids": g.output, "meta_info": meta}

    def lifetime(self) -> list[float | None]:
        return [r.total_accept / r.total_forward if r.total_forward > 0 else None for r in self.reporters]

    def handle(self, h: _Handler, method: str) -> None:
        path = h.path.split("?")[0]
        if self.api_key and not path.startswith(("/health", "/ready", "/metrics")) and not self.authorized(h):
            return h.send(401, {"error": "Unauthorized"})
        if method == "POST" and path == "/generate":
            body = h.body()
            self.requests.append(body)
            return h.send(200, self.generate(body["input_ids"], body.get("sampling_params") or {}))
        if method == "POST" and path == "/flush_cache":
            for r in self.reporters:
                r.__init__(self.decode_log_interval)
            return h.send(200, b"Cache flushed.\n", "text/plain")
        if method == "GET" and path == "/server_info":
            states = []
            for i, life in enumerate(self.lifetime()):
                s = {"dp_rank": i, "last_gen_throughput": 0.0, "memory_usage": {}}
                if self.spec and life is not None:
                    s["avg_spec_accept_length"] = life
                states.append(s)
            return h.send(200, {"model_path": "toy", "speculative_algorithm": "EAGLE3" if self.spec else None,
                                "speculative_num_steps": self.steps if self.spec else None,
                                "speculative_eagle_topk": 1 if self.spec else None,
                                "speculative_num_draft_tokens": self.steps + 1 if self.spec else None,
                                "internal_states": states,
                                "version": "0.5.23", "frontend": "python"})
        if method == "GET" and path in ("/health", "/health_generate"):
            return h.send(200, b"", "text/plain")
        if method == "GET" and path == "/model_info":  # http_server.py:812, some of its fields
            return h.send(200, {"model_path": "toy", "served_model_name": "toy", "is_generation": True,
                                "model_type": "llama", "architectures": ["LlamaForCausalLM"]})
        return h.send(404, {"detail": "Not Found"})


# ----------------------------------------------------------------------------- vLLM

OPENAI_DEFAULTS = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                   "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}
QWEN_GENERATION_CONFIG = {"repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8}


@dataclass
class FakeVLLM(_Served):
    prom_cls: Any = None  # vLLM's own SpecDecodingProm (from the wheel)
    stats_cls: Any = None  # vLLM's own SpecDecodingStats (from the wheel)
    steps: int = 3
    engines: int = 1
    api_key: str | None = None
    spec: bool = True
    log_stats: bool = True
    generation_config: dict = field(default_factory=lambda: dict(QWEN_GENERATION_CONFIG))
    lag: float = 0.2  # seconds between the reply and the counters' update
    requests: list = field(default_factory=list)
    n: int = 0

    def __post_init__(self):
        import prometheus_client as pc

        self.pc = pc
        self.registry = pc.CollectorRegistry()
        reg = self.registry
        self.lock = threading.Lock()
        labelnames = ["model_name", "engine"]
        per_engine = {i: ["toy", str(i)] for i in range(self.engines)}
        self.http_requests = pc.Counter("http_requests", "instrumentator", ["handler"], registry=reg)
        if not self.log_stats:
            self.prom = None
            return

        class Prom(self.prom_cls):  # vLLM's own class; its documented hook for the counter class
            _counter_cls = staticmethod(lambda **kw: pc.Counter(registry=reg, **kw))

        spec_config = type("SpeculativeConfig", (), {"num_speculative_tokens": self.steps})() if self.spec else None
        self.prom = Prom(spec_config, labelnames, per_engine)
        self.running = pc.Gauge("vllm:num_requests_running", "running", labelnames, registry=reg)
        self.waiting = pc.Gauge("vllm:num_requests_waiting", "waiting", labelnames, registry=reg)
        self.generated = pc.Counter("vllm:generation_tokens", "generated", labelnames, registry=reg)
        self.success = pc.Counter("vllm:request_success", "success", labelnames + ["finished_reason"], registry=reg)
        for i in range(self.engines):
            self.running.labels("toy", str(i)).set(0)
            self.waiting.labels("toy", str(i)).set(0)
            self.generated.labels("toy", str(i))
            for reason in ("stop", "length", "abort", "error", "repetition"):
                self.success.labels("toy", str(i), reason)

    def effective(self, body: dict) -> dict:
        """Request value, else the model's generation_config default, else OpenAI's (protocol.py:367)."""
        return {k: body[k] if body.get(k) is not None else self.generation_config.get(k, d)
                for k, d in OPENAI_DEFAULTS.items()}

    def complete(self, prompt: Sequence[int], body: dict) -> tuple[dict, Callable[[], None]]:
        with self.lock:
            engine = self.n % self.engines
            self.n += 1
        sp = self.effective(body)
        perturb = sp["repetition_penalty"] != 1.0 or sp["temperature"] > 0
        max_new = body.get("max_tokens") or self.generation_config.get("max_new_tokens", 16)
        g = spec_generate(prompt, max_new, self.steps if self.spec else 0, perturb)

        def record():
            if not self.log_stats:
                return
            if self.spec and g.verifies:
                stats = self.stats_cls.new(self.steps)
                for n, c in enumerate(g.histogram):
                    for _ in range(c):
                        stats.observe_draft(num_draft_tokens=self.steps, num_accepted_tokens=n)
                self.prom.observe(stats, engine)
            self.generated.labels("toy", str(engine)).inc(len(g.output))
            self.success.labels("toy", str(engine), "stop" if g.finish["type"] == "stop" else "length").inc()

        choice = {"index": 0, "text": " ".join(map(str, g.output)), "logprobs": None,
                  "finish_reason": g.finish["type"], "stop_reason": None, "prompt_logprobs": None}
        if body.get("return_token_ids"):
            choice["token_ids"] = g.output
            choice["prompt_token_ids"] = list(prompt)
        reply = {"id": f"cmpl-{self.n}", "object": "text_completion", "created": int(time.time()), "model": "toy",
                 "choices": [choice], "usage": {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + len(g.output),
                                                "completion_tokens": len(g.output), "prompt_tokens_details": None}}
        return reply, record

    def handle(self, h: _Handler, method: str) -> None:
        path = h.path.split("?")[0]
        if self.api_key and path.startswith(("/v1", "/v2", "/inference", "/cohere")) and not self.authorized(h):
            return h.send(401, {"error": "Unauthorized"})
        if method == "POST" and path == "/v1/completions":
            body = h.body()
            self.requests.append(body)
            reply, record = self.complete(body["prompt"], body)
            self.http_requests.labels("/v1/completions").inc()
            h.send(200, reply)
            threading.Timer(self.lag, record).start() if self.lag else record()
            return None
        if method == "GET" and path == "/metrics":
            return h.send(200, self.pc.generate_latest(self.registry), "text/plain; version=0.0.4; charset=utf-8")
        if method == "GET" and path == "/version":
            return h.send(200, {"version": "0.33.0"})
        if method == "GET" and path == "/health":
            return h.send(200, b"", "text/plain")
        return h.send(404, {"detail": "Not Found"})
