"""Fixtures for the report tests: real layers results (SmolLM2 + the demo draft; a tiny random 60-layer
Llama with a 5-slot draft), and a headless Chromium driven over the DevTools protocol."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                  "--disable-component-update", "--disable-sync")


# ----------------------------------------------------------------------------- real results

@pytest.fixture(scope="session")
def demo_result(tmp_path_factory) -> dict:
    """A real layers result: SmolLM2-135M-Instruct (GGUF, converted once into the persistent test cache,
    $EAGLE_AUDIT_TEST_CACHE or ~/.cache/eagle-audit-test) audited against the demo draft, whose ids SGLang
    does not read."""
    from typer.testing import CliRunner

    from eagle_audit.cli.main import app

    cache = os.environ.get("EAGLE_AUDIT_TEST_CACHE", str(Path.home() / ".cache" / "eagle-audit-test"))
    out = tmp_path_factory.mktemp("demo") / "result.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EAGLE_AUDIT_CACHE", cache)
        run = CliRunner().invoke(app, ["layers", "--max-prompts", "2", "--max-tokens", "32", "--json", str(out)])
    assert run.exit_code == 1, run.output  # the demo is a mismatch
    return json.loads(out.read_text())  # exactly what --json writes and reports read


@pytest.fixture(scope="session")
def deep_results(tmp_path_factory) -> dict:
    """Real layers results on a deep target: a tiny random 60-layer Llama (byte-level tokenizer) and a
    5-slot draft whose nested ids SGLang reads; trained on B0, B15, B30, B45, B58, so slot 0 is an
    embedding slot (served B2) and slot 4 is off by one (served B57). Keys: "mismatch"; "match" (the
    draft with the proposed fix applied); "static" (config-only audit: no cosines, no heatmap)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from eagle_audit.layers.run import LayersOptions, run_layers
    from eagle_audit.draft.write import draft_config, random_weights, write_draft
    from eagle_audit.layers.fix import merge_patch

    root = tmp_path_factory.mktemp("deep")
    target, draft = root / "llama-60L", root / "eagle3-5slot"
    byte_vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=byte_vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(target)
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=60, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=len(byte_vocab), max_position_embeddings=256,
                         tie_word_embeddings=False, architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(config).save_pretrained(target)
    cfg = draft_config(hidden_size=32, target_hidden_size=32, num_aux=5, vocab_size=len(byte_vocab),
                       draft_vocab_size=None, num_heads=4, num_kv_heads=2, intermediate_size=64,
                       nested_ids=[1, 14, 29, 44, 56])
    write_draft(draft, cfg, random_weights(cfg, num_aux=5))
    args = ["--target", str(target), "--draft", str(draft), "--trained-boundaries", "0,15,30,45,58",
            "--max-prompts", "2", "--max-tokens", "32"]
    # a library caller records the command line itself (the CLI does it from its arguments)
    opts = LayersOptions(target=str(target), draft=str(draft), trained_boundaries="0,15,30,45,58", max_prompts=2,
                         max_tokens=32, command=shlex.join(["eagle-audit", "layers", *args]))
    mismatch = run_layers(opts)
    fixed = root / "eagle3-5slot-fixed"  # the same draft with the fix the audit proposed
    write_draft(fixed, merge_patch(cfg, mismatch.fix.patch), random_weights(cfg, num_aux=5))
    match = run_layers(replace(opts, draft=str(fixed)))
    static = run_layers(replace(opts, static=True))
    return {name: json.loads(json.dumps(r.to_json()))
            for name, r in (("mismatch", mismatch), ("match", match), ("static", static))}


@pytest.fixture(scope="session")
def deep_result(deep_results) -> dict:
    return deep_results["mismatch"]


def accept_rate_for(layers: dict, **overrides) -> dict:
    """A hand-written accept-rate result (schema 'eagle-audit/accept-rate/1') about the same target and draft
    as ``layers``, shaped like eagle_audit.accept's to_json (written concurrently; the report reads only
    the keys used here, each optional): plausible numbers for a draft that loses most acceptance when
    mis-wired."""
    slots = [(s["index"], s["trained"]["label"], s["served"]["label"]) for s in layers["slots"]
             if s["trained"] and s["served"] and s["trained"] != s["served"]]
    doc = {
        "schema": "eagle-audit/accept-rate/1",
        "verdict": "mismatch",
        "target": dict(layers["target"]),
        "draft": dict(layers["draft"]),
        "accept_length": {"trained": 3.42, "served": 1.37},
        "per_position": {"trained": [0.81, 0.66, 0.52, 0.41, 0.3], "served": [0.28, 0.07, 0.02, 0.0, 0.0]},
        "attribution": [{"slot": i, "trained": t, "served": sv, "accept_length": 1.52 + 0.7 * n}
                        for n, (i, t, sv) in enumerate(slots)],
        "failures": {},
        "settings": {"num_steps": 5, "topk": 1, "num_draft_tokens": 6},
        "live": {"accept_length": 1.36, "tokens_per_s": 41.7, "speedup": 1.21, "lossless": True},
        "server": {"url": "http://127.0.0.1:30000", "kind": "sglang", "accept_length": 1.41, "requests": 8,
                   "source": "meta_info.spec_accept_length"},
        "provenance": {"eagle_audit": "0.1.0", "torch": "2.13.0+cpu", "transformers": "5.24.0",
                       "command": "eagle-audit accept-rate --json accept.json", "device": "cpu",
                       "dtype": "float32"},
    }
    doc.update(overrides)
    return doc


@pytest.fixture
def make_accept_rate():
    """``make_accept_rate(layers, **overrides)``: see :func:`accept_rate_for`."""
    return accept_rate_for


@pytest.fixture
def accept_result(demo_result) -> dict:
    return accept_rate_for(demo_result)


# ----------------------------------------------------------------------------- chromium

@dataclass
class PageRun:
    """What one page load did, as seen over the DevTools protocol."""

    errors: list[str] = field(default_factory=list)  # exceptions, console errors, error log entries
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    values: dict = field(default_factory=dict)  # results of the expressions evaluated after load

    @property
    def network(self) -> list[str]:
        return [u for u in self.requests if not u.startswith("file:")]


class Chromium:
    """Debian's chromium, headless, each run with a fresh profile; processes are ended by their own handle."""

    def __init__(self, binary: str, workdir: Path):
        self.binary, self.workdir, self._n = binary, workdir, 0

    def _profile(self) -> Path:
        self._n += 1
        return self.workdir / f"profile-{self._n}"

    def screenshot(self, html: Path, png: Path, size: str = "1400,2000") -> Path:
        cmd = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile()}", f"--screenshot={png}",
               f"--window-size={size}", html.resolve().as_uri()]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
        assert png.is_file() and png.stat().st_size > 10_000, f"no screenshot from {' '.join(cmd)}"
        keep = os.environ.get("EAGLE_AUDIT_REPORT_SHOTS")  # a folder to keep screenshots in, for people to look at
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / png.name)
        return png

    def load(self, url: str, evaluate: dict[str, str] | None = None, settle: float = 0.6) -> PageRun:
        """Open ``url`` in a fresh tab with Runtime, Log and Network enabled; after the load event, evaluate
        each expression of ``evaluate`` (as a user gesture), wait ``settle`` seconds, and report."""
        import websocket

        proc = subprocess.Popen([self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile()}",
                                 "--remote-debugging-port=0", "--window-size=1400,2000", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            ws_url = _devtools_url(proc)
            conn = _Cdp(websocket.create_connection(ws_url, timeout=20, suppress_origin=True))
            target = conn.call("Target.createTarget", url="about:blank")["targetId"]
            session = conn.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Runtime", "Log", "Network", "Page"):
                conn.call(f"{domain}.enable", session=session)
            conn.call("Page.navigate", session=session, url=url)
            conn.wait_for("Page.loadEventFired", timeout=30)
            run = PageRun()
            for name, expression in (evaluate or {}).items():
                reply = conn.call("Runtime.evaluate", session=session, expression=expression, returnByValue=True,
                                  userGesture=True, awaitPromise=True)
                run.values[name] = reply.get("result", {}).get("value")
            conn.drain(settle)
            conn.sock.close()
            for event in conn.events:
                _classify(event, run)
            return run
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _devtools_url(proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
            return m.group(1)
    raise RuntimeError("chromium printed no DevTools URL:\n" + "".join(seen[-20:]))


class _Cdp:
    """A minimal DevTools protocol client: numbered calls, events kept in arrival order."""

    def __init__(self, sock):
        self.sock, self.events, self._id = sock, [], 0

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.sock.send(json.dumps(msg))
        while True:
            reply = json.loads(self.sock.recv())
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if any(e.get("method") == method for e in self.events):
            return
        while time.monotonic() < deadline:
            event = json.loads(self.sock.recv())
            self.events.append(event)
            if event.get("method") == method:
                return
        raise TimeoutError(f"no {method} within {timeout}s")

    def drain(self, seconds: float) -> None:
        import websocket

        self.sock.settimeout(0.1)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.events.append(json.loads(self.sock.recv()))
            except websocket.WebSocketTimeoutException:
                continue


def _classify(event: dict, run: PageRun) -> None:
    method, p = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        d = p.get("exceptionDetails", {})
        run.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
    elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
        args = (str(a.get("value", a.get("description"))) for a in p.get("args", []))
        run.errors.append("console.error: " + " ".join(args))
    elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
        run.errors.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
    elif method == "Network.requestWillBeSent":
        run.requests.append(p.get("request", {}).get("url", ""))


@pytest.fixture(scope="session")
def chromium(tmp_path_factory) -> Chromium:
    binary = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; CI installs it)")
    return Chromium(binary, tmp_path_factory.mktemp("chromium"))
