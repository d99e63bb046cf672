"""`check`: every stage on one loaded target (loads and forwards counted by spies on the real functions),
stages that cannot run say why, one verdict, the report, the CLI's exit codes and gates."""

import json

import pytest

from eagle_audit.capture import hooks_left
from eagle_audit.check.run import CheckOptions, run_check

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(use_installed_engine=False, max_prompts=3, max_tokens=24, max_new_tokens=8)


@pytest.fixture
def spy(monkeypatch):
    """Counts real target loads and the model's forwards: teacher-forced ones (use_cache False) by the
    token ids they run, and generation prefills / decode steps."""
    import eagle_audit.target as target_mod

    real = target_mod.load_target
    seen = {"loads": 0, "teacher": [], "cached": 0, "models": []}

    def load(*a, **kw):
        t = real(*a, **kw)
        seen["loads"] += 1

        def pre(module, args, kwargs):
            ids = kwargs.get("input_ids")
            if kwargs.get("use_cache") is False:
                seen["teacher"].extend(tuple(row) for row in ids.tolist())
            else:
                seen["cached"] += 1

        seen["handle"] = t.model.register_forward_pre_hook(pre, with_kwargs=True)
        seen["models"].append(t.model)
        return t

    monkeypatch.setattr(target_mod, "load_target", load)
    yield seen
    if "handle" in seen:
        seen["handle"].remove()


def test_every_stage_on_one_load_and_no_forward_twice(tiny_targets, make_draft, spy):
    draft = make_draft(nested_ids=[1, 3, 5])  # SGLang layout, trainer assumed from it: the fingerprint runs
    r = run_check(CheckOptions(target=str(tiny_targets["llama"]), draft=str(draft), **SMALL))
    assert [s.name for s in r.stages] == ["static", "captured", "served", "fingerprint", "accept_rate"]
    assert all(s.ran for s in r.stages if s.name != "served"), [(s.name, s.why) for s in r.stages]
    assert r.stage("served").why.startswith("no `states_server` given")  # the CLI shows --states-server
    assert spy["loads"] == 1 and r.source["counts"]["loads"] == 1
    teacher = spy["teacher"]
    assert len(teacher) == len(set(teacher)) == 6  # 3 prompts (captured) + 3 prompt+continuation (fingerprint)
    c = r.source["counts"]
    # the fingerprint continues its confirmation's 8 prompts (the built-in ones after the audit's 3) together with
    # the search's, before it knows the confirmation will run; this random draft fits no wiring
    # (REPRESENTATION_MISMATCH), so they are never captured
    assert r.stage("fingerprint").result.confirmation is None
    assert c["forwards"] == 6 and c["generations"] == 3 + 8 and c["generation_hits"] >= 3 and c["memo_hits"] >= 3
    prompts = {s for s in teacher if len(s) <= 24}
    assert len(prompts) == 3  # the accept-rate stage re-used the fingerprint's sequences: no forward of its own
    spy["handle"].remove()
    del spy["handle"]
    assert hooks_left(spy["models"][0]) == 0


def test_verdict_names_the_problem_the_stage_the_cost_and_the_fix(tiny_targets, make_draft):
    draft = make_draft(nested_ids=[1, 3, 5])
    r = run_check(CheckOptions(target=str(tiny_targets["llama"]), draft=str(draft), trainer="specforge",
                               engine="vllm", **SMALL))
    v = r.verdict
    cap = r.stage("captured").result
    assert r.stage("fingerprint").why.startswith("the trained wiring is given")  # trainer given: not measured
    assert {(p.code, p.slot) for p in v.problems} == {(f.code, f.slot) for f in cap.errors}
    if cap.errors:
        assert v.status == "mismatch" and v.sure == "captured" and v.fix_from == "captured"
        assert all("captured" in p.shown_by for p in v.problems)
    acc = r.stage("accept_rate").result
    assert v.cost["trained"] == acc.al("trained") and v.cost["served"] == acc.al("served")
    data = r.to_json()
    assert data["schema"] == "eagle-audit/check/1" and data["verdict"]["summary"] == v.summary()
    assert [s["name"] for s in data["stages"]] == ["static", "captured", "served", "fingerprint", "accept_rate"]


def test_config_only_target_runs_the_static_stage_and_says_why_not_the_rest(config_only_target, make_draft):
    target = config_only_target(num_layers=8)
    draft = make_draft(nested_ids=[1, 3, 5])
    r = run_check(CheckOptions(target=str(target), draft=str(draft), use_installed_engine=False))
    assert r.stage("static").ran and r.source is None
    for name in ("captured", "served", "fingerprint", "accept_rate"):
        st = r.stage(name)
        assert not st.ran and "holds a config and no weights" in st.why
    assert r.verdict.status == r.stage("static").verdict and r.verdict.cost is None


def test_cli_check_exit_codes_gates_json_and_report(tiny_targets, make_draft, cli, tmp_path):
    from eagle_audit.report.results import load_result
    from eagle_audit.report.render import render_markdown

    t, d = tiny_targets["llama"], make_draft(nested_ids=[1, 3, 5])
    base = ["-t", t, "-d", d, "--builtin-rules", "--max-prompts", "2", "--max-tokens", "16", "--max-new-tokens", "6",
            "--trained-boundaries", "2,4,6"]  # = what SGLang feeds for ids [1, 3, 5]: a match
    res = cli(*base, "--json", tmp_path / "c.json", "--report", tmp_path / "rep", command="check")
    assert res.exit_code == 0, res.output
    data = load_result(tmp_path / "c.json")
    assert data["verdict"]["status"] == "match"
    md = render_markdown(data)
    assert "| captured comparison (layers) | match |" in md and "| fingerprint (draft weights) | not run |" in md
    assert sorted(p.suffix for p in (tmp_path / "rep").iterdir()) == [".html", ".json", ".md"]
    again = cli(tmp_path / "c.json", "--md", tmp_path / "again.md", "--html", tmp_path / "again.html", command="report")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.md").read_text() == md  # `report` renders a check result as --report does
    assert "check: match" in (tmp_path / "again.html").read_text()
    fail = cli(*base, "--fail-under", "100", "--fail-under-positions", "1,1", "--json", "-", command="check")
    assert fail.exit_code == 1
    line = [x for x in fail.stderr.splitlines() if x.startswith("fail:")]
    assert len(line) == 1 and "< fail_under 100" in line[0] and "position 2 acceptance" in line[0]
    ok = cli(*base, "--fail-under", "1.0", "--fail-under-positions", "0,0,0", "--json", "-", command="check")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["verdict"]["gate"] == []
    bad = cli(*base, "--fail-under-positions", "0.4,0.2,0.1,0.05", command="check")
    assert bad.exit_code == 2 and "4 thresholds, but the draft runs 3 steps (--num-steps)" in bad.stderr


def test_cli_check_static_on_a_config_only_target_and_a_gate_that_cannot_be_read(config_only_target, make_draft, cli):
    target, draft = config_only_target(num_layers=8), make_draft(nested_ids=[1, 3, 5])
    res = cli("-t", target, "-d", draft, "--builtin-rules", "--json", "-", command="check")
    data = json.loads(res.stdout)
    assert res.exit_code == (1 if data["verdict"]["status"] == "mismatch" else 0)
    gated = cli("-t", target, "-d", draft, "--builtin-rules", "--fail-under", "2", command="check")
    assert gated.exit_code == 1 and "fail: no accept length to gate: needs the target's weights" in gated.stderr
