"""The target's argmax at every position from an SGLang reference server (``return_logprob`` with
``logprob_start_len`` 0 and ``top_logprobs_num`` 1): the test server answers through the wheel's own
logprob path (tests/served/sglang_pieces.py); the client reads ``input_top_logprobs`` /
``output_top_logprobs`` into :attr:`ServedStates.next_tokens`, and ``fingerprint`` and ``accept-rate`` on a
target directory without weights give what they give with the weights here."""

from __future__ import annotations

import json

import pytest
import torch

from eagle_audit.engines.http import BadServerReply
from eagle_audit.engines.options import ServerOptions
from eagle_audit.engines.sglang.states import read_sglang_states
from eagle_audit.engines.sglang.launch import sglang_reference
from eagle_audit.engines.launch import TargetShape
from eagle_audit.engines.sglang.states import request_body
from tests.served.served_tiny import HIDDEN, N_LAYERS, prompts
from tests.served.sglang_server import FakeSGLang, Faults, Target, serving

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def fake(sglang_pieces, sglang_capture, served_target):
    def make(faults=Faults(), extra=()):
        launch = sglang_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN))
        return FakeSGLang(sglang_pieces, sglang_capture, list(launch.argv[3:]) + list(extra), served_target,
                          "LlamaForCausalLM", faults)
    return make


def _capture(served_target):
    return sglang_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN)).capture


def test_the_reply_layout_is_the_wheels(fake, served_target):
    """What the wheel's logprob path writes: one entry per prompt token, the first null, the last prompt
    position's top-1 moved to output_top_logprobs[0]; the states are unchanged by asking for it."""
    srv = fake()
    ids = prompts(1)[0]
    plain = srv.generate(request_body(ids, 3))
    asked = srv.generate(request_body(ids, 3, next_tokens=True))
    meta = asked["meta_info"]
    assert meta["hidden_states"] == plain["meta_info"]["hidden_states"]
    itl, otl = meta["input_top_logprobs"], meta["output_top_logprobs"]
    assert len(itl) == len(ids) and itl[0] is None and len(otl) == 3
    assert all(len(e) == 1 and len(e[0]) == 3 and e[0][2] is None for e in itl[1:] + otl)  # [logprob, id, text]
    assert len(meta["input_token_logprobs"]) == len(ids) and meta["input_token_logprobs"][0][0] is None
    assert [e[0][1] for e in otl] == asked["output_ids"]
    assert list(meta)[-1] == "hidden_states" and list(meta).index("input_top_logprobs") < list(meta).index("cached_tokens")


def test_next_tokens_are_the_targets_argmax_at_every_position(fake, served_target):
    capture = _capture(served_target)
    local = Target(served_target)
    with serving(fake()) as url:
        got = read_sglang_states(ServerOptions(url, "sglang"), prompts(3), capture, max_new_tokens=4,
                                 next_tokens=True)
        plain = read_sglang_states(ServerOptions(url, "sglang"), prompts(1), capture, max_new_tokens=4)
    assert plain[0].next_tokens is None
    for s in got:
        seq = list(s.token_ids)
        want = local.model(torch.tensor([seq])).logits[0].argmax(-1).tolist()  # [T]
        assert list(s.next_tokens) == want and len(seq) == s.states.shape[0]
        assert list(s.next_tokens[len(s.prompt) - 1:]) == list(s.output_ids)  # the greedy continuation


def test_a_logprob_request_from_position_0_reuses_no_prefix(fake, served_target):
    """schedule_batch.py:1766-1775 caps the radix match at logprob_start_len: even a server whose cache
    ignores extra_key prefills the whole prompt, so the states are whole (the plain request is refused)."""
    capture = _capture(served_target)
    p = prompts(1)[0]
    with serving(fake(Faults(ignore_extra_key=True))) as url:
        opts = ServerOptions(url, "sglang")
        read_sglang_states(opts, [p], capture, next_tokens=True)
        again = read_sglang_states(opts, [p + [7, 8]], capture, next_tokens=True)[0]
        assert again.states.shape[0] == len(p) + 2
        with pytest.raises(BadServerReply, match="radix-cache prefix hit"):
            read_sglang_states(opts, [p + [7, 8, 9]], capture)


def test_a_reply_without_logprobs_or_not_greedy_is_refused(fake, served_target, monkeypatch):
    capture = _capture(served_target)
    srv = fake()
    real = srv.generate

    def drop(body):
        r = real(body)
        r["meta_info"].pop("input_top_logprobs", None)
        return r

    def shuffled(body):
        r = real(body)
        (lp, tok, text), = r["meta_info"]["output_top_logprobs"][1]
        r["meta_info"]["output_top_logprobs"][1] = [(lp, tok + 1, text)]
        return r

    for bad, match in ((drop, "no meta_info.input_top_logprobs"), (shuffled, "did not decode greedily")):
        monkeypatch.setattr(srv, "generate", bad)
        with serving(srv) as url:
            with pytest.raises(BadServerReply, match=match):
                read_sglang_states(ServerOptions(url, "sglang"), prompts(1), capture, max_new_tokens=3,
                                   next_tokens=True)
    json.dumps(real(request_body(prompts(1)[0], 2, next_tokens=True)))


# ----------------------------------------------------------------------------- the commands on a weights-free target

FP_PROMPTS = [torch.randint(0, 256, (6 + i,), generator=torch.Generator().manual_seed(100 + i)).tolist()
              for i in range(6)]


@pytest.fixture(scope="module")
def canary(served_target, tmp_path_factory):
    """A draft trained on B2, B3, B4 of the served target (its weights carry a wiring to read)."""
    from eagle_audit.accept.canary import CanaryOptions, train_canary
    from eagle_audit.target import load_target

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(1)
        ps = [torch.randint(0, 256, (4 + i % 20,), generator=g).tolist() for i in range(20)]
        out = tmp_path_factory.mktemp("served-canary") / "canary"
        train_canary(load_target(str(served_target)), ps, CanaryOptions(boundaries=(2, 3, 4), epochs=40,
                                                                       max_new_tokens=48, draft_vocab=200, lr=3e-3), out)
    finally:
        torch.set_num_threads(before)
    return out


def _fingerprint_json(r) -> dict:
    d = r.to_json()
    d.pop("provenance")
    d["search"].pop("seconds", None)
    if d["search"].get("weights"):
        d["search"]["weights"].pop("seconds")  # wall time, not a result
    return d


def test_fingerprint_without_weights_gives_the_local_answer(fake, served_target, served_target_no_weights, canary):
    """The same inference, number for number, over the same states (the local source told to search only
    what the reference server captures); and the same verdict and wiring as the local search of every state."""
    from dataclasses import replace

    from eagle_audit.fingerprint.api import fingerprint
    from eagle_audit.fingerprint.options import FingerprintOptions
    from eagle_audit.fingerprint.run import run_fingerprint
    from eagle_audit.source import SourceRequest, open_source

    kw = dict(prompt_ids=FP_PROMPTS, max_new_tokens=24, dtype="float32", use_installed_engine=False)
    everything = fingerprint(str(served_target), str(canary), **kw)
    with serving(fake()) as url:
        served = fingerprint(str(served_target_no_weights), str(canary), states_server=url, **kw)
    local = open_source(SourceRequest(str(served_target), dtype="float32"))
    local.spec = replace(local.spec, states=tuple(_capture(served_target).states))
    same = run_fingerprint(FingerprintOptions(str(served_target), str(canary), use_installed_engine=False,
                                              max_new_tokens=24, dtype="float32",
                                              prompt_ids=tuple(map(tuple, FP_PROMPTS))), source=local)
    a = json.dumps(_fingerprint_json(served), sort_keys=True).replace(str(served_target_no_weights), "T")
    b = json.dumps(_fingerprint_json(same), sort_keys=True).replace(str(served_target), "T")
    assert a == b
    assert served.verdict == everything.verdict
    # the wiring the weights support, slot by slot (an undetermined slot names no state: its best is noise)
    assert served.to_json()["inferred"]["states"] == everything.to_json()["inferred"]["states"]
    assert [f.code for f in served.findings] == [f.code for f in everything.findings]
    assert served.verdict == "match" and served.confidence == everything.confidence != "none"
    notes = " ".join(served.provenance["notes"])
    assert "not searched: B0, B6, B6+norm" in notes and served.provenance["source"]["backend"] == "server"


def test_accept_rate_without_weights_gives_the_local_accept_length(fake, served_target, served_target_no_weights,
                                                                   canary):
    from eagle_audit import api

    kw = dict(prompt_ids=FP_PROMPTS, max_new_tokens=16, dtype="float32", use_installed_engine=False, gen_batch=1)
    local = api.accept_rate(served_target, canary, **kw)
    srv = fake()
    with serving(srv) as url:
        served = api.accept_rate(served_target_no_weights, canary, states_server=url, **kw)
    assert served.al("trained") == local.al("trained") and served.al("served") == local.al("served")
    assert served.to_json()["per_position"] == local.to_json()["per_position"]
    assert srv.requests == len(FP_PROMPTS)  # the continuation's request carried every state the simulation read
    src = served.provenance["source"]
    assert src["backend"] == "server" and "sglang server" in src["origin"]
    assert any(n.startswith("target states and greedy continuations: from the sglang server") for n in
               served.provenance["notes"])
    assert local.provenance["source"]["backend"] == "local"


def test_cli_fingerprint_and_accept_rate_on_a_weights_free_target(fake, served_target, served_target_no_weights,
                                                                  canary, tmp_path):
    from typer.testing import CliRunner

    from eagle_audit.cli.main import app

    run = CliRunner().invoke
    with serving(fake()) as url:
        r = run(app, ["accept-rate", "-t", str(served_target_no_weights), "-d", str(canary), "--states-server", url,
                      "--max-prompts", "2", "--max-new-tokens", "8", "--dtype", "float32", "--builtin-rules"])
        assert r.exit_code in (0, 1), r.output
        assert "target states and greedy continuations from the sglang server" in " ".join(r.stdout.split())
        r = run(app, ["accept-rate", "-t", str(served_target), "-d", str(canary), "--states-server", url,
                      "--max-prompts", "1"])
        assert r.exit_code == 2 and "--states-server takes every target state" in r.stderr, r.output
        r = run(app, ["fingerprint", "-t", str(served_target), "-d", str(canary), "--states-server", url,
                      "--max-prompts", "1"])
        assert r.exit_code == 2 and "--states-server takes every target state" in r.stderr, r.output
    import typer

    cmd = typer.main.get_command(app).commands["accept-rate"]
    help_ = next(p.help for p in cmd.params if p.name == "states_server")
    assert "Unlike --server, which serves the draft and reports its own accept length" in help_


def test_a_server_gives_no_decode(fake, served_target_no_weights):
    """train-canary's data (``StateSource.decode``: a seeded, batched decode with its states) is not what a
    server hands out: its spec says so and asking is one line, exit 2."""
    from eagle_audit.errors import AuditError
    from eagle_audit.source import DECODE, CannotGive, SourceRequest, open_source

    with serving(fake()) as url:
        src = open_source(SourceRequest(str(served_target_no_weights), server=url))
        assert src.spec.backend == "server" and not src.spec.can(DECODE)
        with pytest.raises(CannotGive, match="cannot give decoded text with its states") as e:
            src.decode(prompts(1), [], 4)
    assert isinstance(e.value, AuditError) and "\n" not in e.value.message
