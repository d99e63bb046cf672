"""`layers --server`: with the target's weights local, each served state against the local capture (findings
on the draft's slots); with a target directory of config and tokenizer only, every state from the server and
the same verdicts, findings and cosines as the local audit. The server is the SGLang 0.5.23 test server
(tests/served/sglang_server.py)."""

from __future__ import annotations

import json

import pytest

from eagle_audit import api
from eagle_audit.engines.sglang.launch import sglang_reference
from eagle_audit.engines.launch import TargetShape
from tests.served.served_tiny import HIDDEN, N_LAYERS
from tests.served.sglang_server import FakeSGLang, Faults, serving

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def fake(sglang_pieces, sglang_capture, served_target):
    def make(faults=Faults()):
        launch = sglang_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN))
        return FakeSGLang(sglang_pieces, sglang_capture, list(launch.argv[3:]), served_target, "LlamaForCausalLM",
                          faults)
    return make


def _audit(target, draft, url, **kw):
    return api.audit_layers(target, draft, trained_boundaries=kw.pop("trained", [2, 3, 4]), max_prompts=3,
                            max_tokens=24, states_server=url, dtype="float32", **kw)


def test_served_vs_local_clean_and_shifted(fake, served_target, make_draft):
    draft = make_draft(nested_ids=[1, 2, 3])  # SGLang serves B2 B3 B4
    with serving(fake()) as url:
        clean = _audit(served_target, draft, url)
    assert clean.verdict == "match" and not clean.findings
    table = clean.served_states["slots"]
    assert [s["verdict"] for s in table] == ["ok"] * 5 and clean.served_states["mode"] == "served vs local"
    with serving(fake(Faults(deeper=2))) as url:  # reference slot 2 = B3 is served B4: the draft's slot 1
        bad = _audit(served_target, draft, url)
    assert [(f.code, f.slot) for f in bad.findings] == [("ENGINE_STATE_SHIFTED", 1)]
    assert "serves B4 where its rules say B3" in bad.findings[0].what
    json.dumps(bad.to_json())


@pytest.mark.parametrize("trained", [[2, 3, 4], [1, 3, 5]])
def test_no_weights_mode_gives_the_local_verdicts(fake, served_target, served_target_no_weights, make_draft, trained):
    draft = make_draft(nested_ids=[1, 2, 3])
    # the test server answers as SGLang 0.5.23: the local audit names that engine (unnamed, it judges every engine)
    local = api.audit_layers(served_target, draft, trained_boundaries=trained, max_prompts=3, max_tokens=24,
                             dtype="float32", engine="sglang@0.5.23")
    with serving(fake()) as url:
        served = _audit(served_target_no_weights, draft, url, trained=trained)
    assert served.verdict == local.verdict
    assert [(f.code, f.slot) for f in served.findings] == [(f.code, f.slot) for f in local.findings]
    assert [(s.verdict, s.served, s.trained) for s in served.slots] == [(s.verdict, s.served, s.trained)
                                                                       for s in local.slots]
    for a, b in zip(served.slots, local.slots):
        assert a.cosine == pytest.approx(b.cosine, abs=1e-6)
    assert served.served_states["mode"] == "states from the server"
    assert served.served_states["source"]["backend"] == "server"


def test_cli_layers_server(fake, served_target, served_target_no_weights, make_draft, cli):
    draft = make_draft(nested_ids=[1, 2, 3])
    with serving(fake(Faults(partial=(2, 4)))) as url:
        r = cli("-t", served_target, "-d", draft, "--trained-boundaries", "2,3,4", "--max-prompts", "2",
                "--dtype", "float32", "--states-server", url, "--json", "-")
    assert r.exit_code == 1, r.stderr
    data = json.loads(r.stdout)
    assert [(f["code"], f["slot"]) for f in data["findings"]] == [("ENGINE_STATE_MISMATCH", 1)]
    with serving(fake()) as url:  # no weights: one line naming what the server lacks, exit 2
        r = cli("-t", served_target_no_weights, "-d", draft, "--trained-boundaries", "0,3,4", "--max-prompts", "2",
                "--states-server", url)
    assert r.exit_code == 2 and "cannot give B0" in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_the_served_reading_reports_progress(fake, served_target, make_draft):
    calls = []
    with serving(fake()) as url:
        _audit(served_target, make_draft(nested_ids=[1, 2, 3]), url, progress=lambda d, t: calls.append((d, t)))
    assert calls.count((3, 3)) >= 2 and (0, 3) in calls  # the local capture, then the served reading, request by request


def test_a_busy_states_server_is_waited_out_and_said(fake, served_target, make_draft, cli):
    """A 503 with Retry-After from the states server (issue 35): the request is retried after the wait it asks for,
    the audit goes on, and the wait is in the result's notes."""
    draft = make_draft(nested_ids=[1, 2, 3])
    with serving(fake(Faults(busy=1))) as url:
        r = cli("-t", served_target, "-d", draft, "--trained-boundaries", "2,3,4", "--max-prompts", "2",
                "--dtype", "float32", "--states-server", url, "--json", "-")
    assert r.exit_code in (0, 1), r.stderr
    notes = " ".join(json.loads(r.stdout)["provenance"]["notes"])
    assert "HTTP 503, retried after the 1 s its Retry-After asked" in notes, notes
