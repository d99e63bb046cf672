"""`accept-rate` and `train-canary` at the CLI edge: JSON schema, exit codes, one-line bad input."""

from __future__ import annotations

import json
import socket

import typer
from typer.testing import CliRunner

from eagle_audit.runtime.eagle3 import read_weights
from eagle_audit.cli.accept_rate import accept_rate
from eagle_audit.cli.train_canary import train_canary
from eagle_audit.draft.write import draft_config, random_weights, write_draft

from tests.accept.accept_tiny import VOCAB, write_tiny_draft

app = typer.Typer()
app.command("accept-rate")(accept_rate)
app.command("train-canary")(train_canary)
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(map(str, args)))


def _one_line_error(res):
    text = res.output.strip()
    assert res.exit_code == 2, res.output
    assert "Traceback" not in text and text.splitlines()[0].startswith("error:"), text
    return text


def test_json_schema_and_match(tiny_target_dir, tiny_canary, tmp_path):
    res = _run("accept-rate", "-t", tiny_target_dir, "-d", tiny_canary, "--trained-boundaries", "1,3,5",
               "--max-prompts", 2, "--max-new-tokens", 12, "--num-draft-tokens", 9, "--json", "-",
               "--report", tmp_path / "r")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["schema"] == "eagle-audit/accept-rate/1" and data["verdict"] == "match"
    for key in ("accept_length", "per_position", "histogram", "attribution", "settings", "provenance", "target",
                "draft", "server"):
        assert key in data
    assert data["accept_length"]["trained"] == data["accept_length"]["served"]
    assert data["settings"]["num_draft_tokens"] == 4 and "forces" in " ".join(data["settings"]["notes"])
    assert set(data["provenance"]) >= {"eagle_audit", "torch", "command", "engine_rules", "notes"}
    assert sorted(p.suffix for p in (tmp_path / "r").iterdir()) == [".html", ".json", ".md"]


def test_draft_for_another_target(tiny_target_dir, tmp_path):
    cfg = draft_config(hidden_size=32, target_hidden_size=32, num_aux=3, vocab_size=VOCAB, draft_vocab_size=64,
                       num_heads=2, num_kv_heads=1, intermediate_size=64, nested_ids=[0, 2, 4])
    write_draft(tmp_path / "d", cfg, random_weights(cfg, num_aux=3))
    text = _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", tmp_path / "d"))
    assert "hidden size" in text


def test_wrong_vocab_map(tiny_target_dir, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    w = read_weights(path)
    w["d2t"] = w["d2t"] + VOCAB
    write_draft(tmp_path / "b", json.loads((path / "config.json").read_text()), w)
    assert "d2t" in _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", tmp_path / "b", "--max-prompts", 1))


def test_empty_prompts_file(tiny_target_dir, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    (tmp_path / "p.jsonl").write_text("\n\n")
    assert "no prompts" in _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--prompts",
                                                tmp_path / "p.jsonl"))


def test_unreachable_server(tiny_target_dir, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    text = _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--server", f"http://127.0.0.1:{port}"))
    assert "unreachable" in text


def test_tree_mode_bad_settings(tiny_target_dir, tmp_path):
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    text = _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--topk", 2, "--num-steps", 2,
                                "--num-draft-tokens", 8))
    assert len(text.splitlines()) == 1 and "topk + (num_steps - 1) * topk^2 = 6" in text
    assert "--num-draft-tokens" in _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--topk", 4))
    assert "--live" in _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--topk", 4,
                                            "--num-draft-tokens", 8, "--live"))
    # vLLM 0.33.0 drafts chains only (probes/vllm.json tree_drafts): a tree cannot be served, said before loading
    assert "chains only" in _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--engine", "vllm",
                                                 "--topk", 4, "--num-draft-tokens", 8))


def test_tree_mode_runs(tiny_target_dir, tiny_canary):
    res = _run("accept-rate", "-t", tiny_target_dir, "-d", tiny_canary, "--trained-boundaries", "1,3,5",
               "--max-prompts", 2, "--max-new-tokens", 12, "--topk", 4, "--num-draft-tokens", 8, "--json", "-")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["settings"]["mode"] == "tree" and data["settings"]["num_draft_tokens"] == 8
    assert data["settings"]["tree_attention"] == "kv_by_slot"  # SGLang's, from probes/sglang.json
    assert data["accept_length"]["trained"] >= 1.0


def test_train_canary_bad_boundaries(tiny_target_dir, tmp_path):
    _one_line_error(_run("train-canary", "-t", tiny_target_dir, "--boundaries", "0,3,99", "--out", tmp_path / "c"))


def test_server_through_the_cli(tiny_target_dir, tiny_canary, tmp_path):
    """--server with --api-key: the reading lands in the JSON and the report, the key nowhere; a reply of the
    wrong shape is one line, exit 2."""
    from tests.accept.fake_engines import FakeSGLang

    class Broken(FakeSGLang):
        broken = False

        def generate(self, ids, sp, rank=None):
            out = super().generate(ids, sp, rank)
            return {**out, "meta_info": "?"} if self.broken else out

    fake = Broken(steps=3, api_key="s3cret")
    fake.start()
    try:
        common = ["accept-rate", "-t", tiny_target_dir, "-d", tiny_canary, "--trained-boundaries", "1,3,5",
                  "--max-prompts", 2, "--max-new-tokens", 8, "--server", fake.url, "--api-key", "s3cret"]
        res = _run(*common, "--json", tmp_path / "r.json", "--report", tmp_path / "rep")
        assert res.exit_code == 0, res.output
        data = json.loads((tmp_path / "r.json").read_text())
        assert data["server"]["kind"] == "sglang" and data["server"]["requests"] == 2
        assert data["server"]["accept_length"] > 1 and data["server"]["key_source"] == "option"
        assert "--api-key '<redacted>'" in data["provenance"]["command"]
        for p in [tmp_path / "r.json", *(tmp_path / "rep").iterdir()]:
            assert "s3cret" not in p.read_text()
        assert "over the 2 audited requests" in " ".join(res.output.split())
        assert "\nserver sglang http" in res.output and "[bold]" not in res.output  # styled, not markup shown
        fake.broken = True
        text = _one_line_error(_run(*common))
        assert "meta_info" in text and len(text.splitlines()) <= 2
    finally:
        fake.stop()


def test_a_server_that_takes_the_connection_and_never_answers_is_found_out_in_seconds(tiny_target_dir, tmp_path):
    """--server-kind sglang skips detection; the short request sent first (engines.options.PROBE_PATH) still finds a
    server that accepts connections and stays silent, long before the 300 s per-request timeout."""
    import threading
    import time

    from eagle_audit.engines.http import DEFAULT_TIMEOUT, PROBE_TIMEOUT

    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held, stop = [], threading.Event()

    def accept_and_stay_silent():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        text = _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--server-kind", "sglang",
                                    "--server", f"http://127.0.0.1:{listener.getsockname()[1]}"))
        took = time.monotonic() - t0
    finally:
        stop.set()
        thread.join()
        for c in held:
            c.close()
        listener.close()
    assert held, "the server took no connection"
    assert "does not answer" in text and f"within {PROBE_TIMEOUT:g} s" in text, text
    assert took < PROBE_TIMEOUT + 20 < DEFAULT_TIMEOUT, took


def test_library_hints_are_shown_with_the_flags(tiny_target_dir, tmp_path):
    """A library message names parameters (errors.param); the CLI shows them as its flags, the values too."""
    path = write_tiny_draft(tmp_path / "d", nested_ids=[0, 2, 4])
    text = _one_line_error(_run("accept-rate", "-t", tiny_target_dir, "-d", path, "--topk", 4, "--live",
                                "--num-draft-tokens", 8))
    assert text.startswith("error: --live runs chain mode only (--topk 1); --topk 4 is simulated"), text
    assert "`" not in text


def test_fail_under_gates_the_servers_figures(tiny_target_dir, tiny_canary):
    """--fail-under / --fail-under-positions on `accept-rate --server`: the server's own accept length (from
    SGLang's per-request meta_info, tests/accept/fake_engines.py) is gated, not only the simulation's."""
    from tests.accept.fake_engines import FakeSGLang

    fake = FakeSGLang(steps=3)
    fake.start()
    try:
        common = ["accept-rate", "-t", tiny_target_dir, "-d", tiny_canary, "--trained-boundaries", "1,3,5",
                  "--max-prompts", 2, "--max-new-tokens", 8, "--server", fake.url]
        res = _run(*common, "--json", "-")
        assert res.exit_code == 0, res.output
        served = json.loads(res.stdout)["server"]["accept_length"]
        bad = _run(*common, "--fail-under", f"{served + 0.001:.6f}")
        fails = [x for x in bad.output.splitlines() if x.startswith("fail:")]
        assert bad.exit_code == 1 and len(fails) == 1, bad.output
        assert f"sglang server accept length {served:.3f} < fail_under" in fails[0]
        ok = _run(*common, "--fail-under", "1", "--fail-under-positions", "0,0,0")
        assert ok.exit_code == 0, ok.output
        pos = _run(*common, "--fail-under-positions", "1,1,1")
        assert pos.exit_code == 1 and "sglang server accept length: position 1" in " ".join(pos.output.split())
    finally:
        fake.stop()
