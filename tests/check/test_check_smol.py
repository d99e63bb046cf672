"""`check` on SmolLM2 and the fingerprint test canaries (tests/fingerprint: trained on known wirings): the
verdict where every stage agrees, and where only the weights can tell (a config that claims the wiring the
engine feeds while the weights were trained on another): TRAINED_WIRING_DIFFERS shown by the fingerprint,
the fix from it, the cost of the measured wiring."""

import json

import pytest

from eagle_audit.check.run import CheckOptions, run_check
from eagle_audit.states import State

pytestmark = pytest.mark.full  # SmolLM2, canaries (trained once, cached), the fingerprint's search: minutes


@pytest.fixture(scope="module")
def canaries(smollm2, audit_cache):
    import torch

    from tests.fingerprint.fp_canaries import train_all

    torch.set_num_threads(1)
    from tests import artefacts

    artefacts.ensure("fp-canaries")
    return train_all(smollm2, audit_cache, log=lambda m: None)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> str:
    """The built-in prompts 9-16: the text the canaries were trained on, as tests/fingerprint reads them (the
    fingerprint's interval, one unit per prompt, needs 8 of them x 96 tokens to name the canaries' shallow slots;
    on fewer, or on held-out text, a short canary's slots can stay undetermined: docs/fingerprint.md)."""
    from importlib import resources

    lines = (resources.files("eagle_audit") / "data" / "chat_prompts.jsonl").read_text().splitlines()
    path = tmp_path_factory.mktemp("prompts") / "canary-text.jsonl"
    path.write_text("\n".join(lines[8:16] + lines[16:24]) + "\n")  # then 8 for the fingerprint's confirmation
    return str(path)


def _run(smollm2_path, draft, prompts, **kw):
    return run_check(CheckOptions(target=smollm2_path, draft=str(draft), prompts=prompts, use_installed_engine=False,
                                  max_new_tokens=96, **kw))


def test_a_canary_served_as_trained_is_a_match_in_every_stage(smollm2_path, canaries, prompts):
    r = _run(smollm2_path, canaries["emb-3-16"], prompts, fingerprint=True)
    assert [s.name for s in r.stages if s.ran] == ["static", "captured", "fingerprint", "accept_rate"]
    assert r.verdict.status == "match" and r.verdict.problems == () and r.verdict.fix is None
    fp = r.stage("fingerprint").result
    assert fp.inferred is not None and all(sl.admits(s) for sl, s in zip(fp.slots, fp.declared.states))
    acc = r.stage("accept_rate").result
    assert acc.al("trained") == acc.al("served") and r.verdict.cost["loss"] == 0
    assert r.source["counts"]["loads"] == 1


def test_a_config_that_claims_the_served_wiring_is_caught_by_the_fingerprint(smollm2_path, canaries, prompts,
                                                                             tmp_path):
    src = canaries["emb-3-16"]  # trained on B0, B3, B16
    draft = tmp_path / "claims-default"
    draft.mkdir()
    config = json.loads((src / "config.json").read_text())
    del config["eagle_audit_canary"], config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    (draft / "config.json").write_text(json.dumps(config))
    for f in src.iterdir():
        if f.name != "config.json":
            (draft / f.name).symlink_to(f.resolve())
    r = _run(smollm2_path, draft, prompts)  # no trainer given: the wiring is assumed, so the fingerprint runs by itself
    st = {s.name: s for s in r.stages}
    assert st["static"].verdict == "match" and st["captured"].verdict == "match"  # both sides feed the default
    assert st["fingerprint"].ran and st["fingerprint"].verdict == "mismatch"
    v = r.verdict
    codes = {p.code: p for p in v.problems}
    assert codes["TRAINED_WIRING_DIFFERS"].shown_by == ("fingerprint",) and v.sure == "fingerprint"
    assert v.status == "mismatch" and v.fix_from == "fingerprint" and v.fix.possible
    fp, acc = st["fingerprint"].result, st["accept_rate"].result
    truth = [State(0), State(3), State(16)]
    assert all(t in sl.candidates for t, sl in zip(truth, fp.slots))  # the weights admit the true wiring
    measured = acc.trained.states  # the accept-rate stage costs the measured wiring, the fix serves it
    assert measured[:2] == (State(0), State(3)) and all(sl.admits(m) for sl, m in zip(fp.slots, measured))
    assert v.fix.resolved == measured
    assert v.cost["loss"] > 0.1, v.cost


def test_the_demo_check_in_one_screen_as_docs_say_and_its_cost_is_accept_rates(cli, smollm2_path, tmp_path):
    """Issue 43: `check` on the demo at 80 columns answers in at most 60 lines; docs/check.md's reuse counts are
    the ones `check -v` prints; the check's cost is `accept-rate`'s default figure (same prompts, same settings)."""
    import re
    from pathlib import Path

    res = cli("--json", tmp_path / "c.json", command="check")
    assert res.exit_code == 1, res.output
    assert len(res.stdout.splitlines()) <= 60, res.stdout
    assert "--write-fixed-config" in res.stdout and re.search(r"^how sure (high|medium|low): ", res.stdout, re.M)
    data = json.loads((tmp_path / "c.json").read_text())
    c = data["source"]["counts"]
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "check.md").read_text().split())
    assert (f"1 load, {c['forwards']} teacher-forced forwards ({c['memo_hits']} reused), {c['generations']} prompts "
            f"continued ({c['generation_hits']} reused)") in docs
    acc = cli("--json", tmp_path / "a.json", command="accept-rate")
    al = json.loads((tmp_path / "a.json").read_text())["accept_length"]
    assert (al["trained"], al["served"]) == (data["verdict"]["cost"]["trained"], data["verdict"]["cost"]["served"])
    assert acc.exit_code == 1
