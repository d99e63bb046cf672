"""The --server client against a local http.server answering in SGLang and vLLM formats."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from eagle_audit.accept.server import parse_vllm_metrics, read_server
from eagle_audit.errors import AuditError


class _Fake(BaseHTTPRequestHandler):
    kind = "sglang"
    posts = 0

    def log_message(self, *a):  # quiet
        pass

    def _send(self, code, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        cls = type(self)
        if self.path == "/server_info" and cls.kind == "sglang":
            return self._send(200, {"internal_states": [{"avg_spec_accept_length": 2.25}]})
        if self.path == "/metrics" and cls.kind == "vllm":
            n = cls.posts
            return self._send(200, "# HELP x\n"
                              f'vllm:spec_decode_num_drafts_total{{model_name="m"}} {10.0 * n}\n'
                              f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {15.0 * n}\n'
                              f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} {9.0 * n}\n', "text/plain")
        return self._send(404, {})

    def do_POST(self):
        cls = type(self)
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        cls.posts += 1
        if self.path == "/generate" and cls.kind == "sglang":
            assert body["sampling_params"]["temperature"] == 0.0
            return self._send(200, {"text": "x", "meta_info": {"spec_accept_length": 2.0 + 0.5 * (cls.posts % 2)}})
        if self.path == "/v1/completions" and cls.kind == "vllm":
            return self._send(200, {"choices": [{"text": "x"}]})
        return self._send(404, {})


@pytest.fixture
def fake_server():
    servers = []

    def start(kind):
        handler = type("H", (_Fake,), {"kind": kind, "posts": 0})
        srv = HTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_sglang_fields(fake_server):
    r = read_server(fake_server("sglang"), [[1, 2, 3], [4, 5]], 16)
    assert r.kind == "sglang" and r.accept_length == 2.25 and r.request_accept_length == 2.25 and r.requests == 2


def test_vllm_metrics(fake_server):
    r = read_server(fake_server("vllm"), [[1, 2, 3], [4, 5]], 16)
    assert r.kind == "vllm" and r.accept_length == pytest.approx(2.5)  # 1 + 15/10


def test_parse_metrics_sums_label_sets():
    text = 'vllm:spec_decode_num_drafts_total{a="1"} 3\nvllm:spec_decode_num_drafts_total{a="2"} 4.0\n'
    assert parse_vllm_metrics(text) == {"vllm:spec_decode_num_drafts_total": 7.0}


def test_unreachable_server_is_bad_input():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(AuditError, match="unreachable"):
        read_server(f"http://127.0.0.1:{port}", [[1, 2]], 4)
