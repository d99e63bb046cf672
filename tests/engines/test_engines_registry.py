"""Engines as a registry (eagle_audit/engines/registry.py): a new engine is one folder's functions behind one
Engine and one register() call. A toy third engine proves it, with a loopback server of its own wire format: a
Server of its kind is accepted, probed on its path and read through its reader (the accept length, the drafting
note, the arbiter's tolerance rule), and its launch lines are printed next to the built-in ones; after
unregister() it is gone, and the built-in engines cannot be removed."""

from __future__ import annotations

import json
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eagle_audit.engines import registry
from eagle_audit.engines.launch import Launch
from eagle_audit.engines.options import Server, kinds
from eagle_audit.engines.reading import ServerReading

#: the toy engine's wire facts (as engines/<engine>/wire.py declares them)
WIRE = types.SimpleNamespace(NAME="toy", PROBE_PATH="/ping", KEY_ENV=("TOY_API_KEY",))


class _Toy(BaseHTTPRequestHandler):
    """GET /ping answers; POST /complete returns the prompt's tokens + 1 and how many verifies it took."""

    def log_message(self, *a):
        pass

    def _send(self, code, body):
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        self._send(200, {"ok": True} if self.path == "/ping" else {"detail": "no"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body["max_tokens"]
        self._send(200, {"tokens": [t + 1 for t in body["prompt"]][:n], "verifies": max(1, n // 2)})


def _read(http_, prompts, max_new, expected, progress):
    """The toy engine's acceptance reader: tokens per verify over the audited requests."""
    tokens = verifies = 0
    for i, p in enumerate(prompts):
        r = http_.json("POST", "/complete", {"prompt": list(p), "max_tokens": max_new}, generation=True)
        tokens, verifies = tokens + len(r["tokens"]), verifies + r["verifies"]
        if progress:
            progress(i + 1, len(prompts))
    return ServerReading(http_.url, "toy", tokens / verifies, None, len(prompts), "toy /complete",
                         verify_steps=verifies, tokens=tokens, drafting={"steps": 2})


def _line(role, *argv):
    return Launch(role, tuple(map(str, argv)), None)


@pytest.fixture
def toy(tmp_path):
    from eagle_audit.conventions.registry import probes_dir

    conv = json.loads((probes_dir() / "sglang.json").read_text())  # the toy runs SGLang's id rules
    conv["name"], conv["title"] = "toy", "Toy engine"
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(conv))
    entry = registry.Engine(
        "toy", _read, read_states=lambda *a, **k: (), server_capture=lambda *a: None,
        serving=lambda draft, shape, storage=None, conv=None: _line("serving", "toy-serve", shape.path, "--capture"),
        reference=lambda shape, wanted=None, storage=None, conv=None: _line("reference", "toy-serve", shape.path),
        states_on_disk=False,
        speculative=lambda target, draft, steps, variant: _line("speculative", "toy-serve", target, "--draft", draft,
                                                               "--steps", steps),
        drafting_differs=lambda d, steps, topk, ndt, block=False: None if d.get("steps") == steps else f"toy drafts {d['steps']}",
        last_verify_uncut=True, variants=(str(path),), wire=WIRE)
    registry.register(entry)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Toy)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield types.SimpleNamespace(entry=entry, url=f"http://127.0.0.1:{httpd.server_address[1]}", conv=str(path))
    finally:
        httpd.shutdown()
        httpd.server_close()
        registry.unregister("toy")


def test_a_registered_engine_is_read_through_its_own_reader(toy):
    from eagle_audit.accept.arbiter import live_tolerance

    assert "toy" in kinds()
    reading = registry.read_server(Server(toy.url, "toy"), [[1, 2, 3, 4], [5, 6, 7, 8]], 4)
    assert (reading.kind, reading.requests, reading.tokens, reading.verify_steps) == ("toy", 2, 8, 4)
    assert reading.accept_length == 2.0
    eng = registry.engine(reading.kind)
    assert eng.drafting_differs(reading.drafting, 2, 1, 3) is None
    assert eng.drafting_differs(reading.drafting, 3, 1, 4) == "toy drafts 2"
    tol = live_tolerance("toy", reading.requests, reading.verify_steps, 2)
    assert tol.accept_length[1] > tol.accept_length[0] and "toy counts each request's last verify uncut" in tol.why


def test_its_launch_lines_print_beside_the_built_in_ones(toy, tiny_targets, make_draft):
    from eagle_audit.engines.lines import launch_lines

    assert registry.line_variants() == ("sglang", "vllm", "vllm-v1", toy.conv)
    lines = launch_lines(tiny_targets["llama"].path, str(make_draft()), engines=("sglang", toy.conv), num_steps=2)
    sg, t = lines.engines
    assert sg.speculative.argv[:3] == ("python", "-m", "sglang.launch_server")
    assert t.title.startswith("Toy engine") and t.speculative.argv[-2:] == ("--steps", "2")
    assert t.serving.argv == ("toy-serve", str(tiny_targets["llama"].path), "--capture")


def test_unregistered_it_is_gone_and_the_built_in_ones_stay(toy):
    from eagle_audit.errors import AuditError

    registry.unregister("toy")
    assert "toy" not in kinds() and "toy" not in registry.ENGINES
    with pytest.raises(AuditError, match="server kind 'toy': must be one of auto, sglang, vllm"):
        Server(toy.url, "toy")
    for name in ("sglang", "vllm"):
        with pytest.raises(ValueError, match="built in"):
            registry.unregister(name)
    registry.register(toy.entry)  # the fixture unregisters it again
