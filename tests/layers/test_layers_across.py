"""No silent engine (issue 41, item 3) and a draft across releases (item 5): with no engine named, every engine's
verdict at its newest built-in release, the worst setting the verdict and the exit status; with a range, every
known release's verdict, grouped ("wired right on SGLang 0.5.13 and later")."""

from __future__ import annotations

from eagle_audit.conventions.releases import ASSUMED


def test_no_engine_named_gives_every_engines_verdict(tiny_targets, make_draft, audit):
    """The issue's case: a SpecForge draft, ids [1, 3, 5] nested, on an 8-layer Llama: SGLang serves it as trained,
    vLLM 0.33.0 does not read the nested ids (the worst: mismatch)."""
    draft = make_draft(nested_ids=[1, 3, 5])
    r = audit(tiny_targets["llama"], draft, engine=None, trainer="specforge", static=True)
    assert r.errors == () and r.provenance["engine_rules"]["release"]["how"] == ASSUMED
    (vllm,) = r.engines
    assert (vllm.engine, vllm.version, vllm.how, vllm.verdict) == ("vllm", "0.33.0", ASSUMED, "mismatch")
    assert "IDS_NOT_READ" in vllm.errors
    assert r.verdict == "mismatch" and r.to_json()["engines"][0]["label"].startswith("vLLM 0.33.0")
    named = audit(tiny_targets["llama"], draft, engine="sglang", trainer="specforge", static=True)
    assert named.verdict == "match" and named.engines == ()  # an engine named: its verdict alone


def flat(result) -> str:
    return " ".join(result.stdout.split())  # the terminal's wrapping taken out


def test_cli_verdict_lines_name_the_release_and_how(tiny_targets, make_draft, cli):
    draft = make_draft(nested_ids=[1, 3, 5])
    t = tiny_targets["llama"]
    out = cli("-t", t, "-d", draft, "--trainer", "specforge", "--static")
    assert out.exit_code == 1, out.stdout
    assert "verdict: mismatch (no engine named: each engine at its newest release; the worst counts)" in flat(out)
    assert "SGLang 0.5.23 (assumed): match" in flat(out)
    assert "vLLM 0.33.0 (V2 model runner, default; assumed): mismatch: IDS_NOT_READ" in flat(out)
    out = cli("-t", t, "-d", draft, "--trainer", "specforge", "--static", "--engine", "SGLang@0.5.6")
    assert out.exit_code == 0 and "verdict: match on SGLang 0.5.6 (given)" in flat(out)
    assert "served SGLang 0.5.6 (given): ids [1, 3, 5]" in flat(out)
    out = cli("-t", t, "-d", draft, "--trainer", "specforge", "--static", "--engine", "sglang@0.5.7.post9")
    assert "verdict: match on SGLang 0.5.7 (nearest known to 0.5.7.post9)" in flat(out)


def test_a_range_gives_each_releases_verdict(tiny_targets, make_draft, audit):
    """The seed's rule on a DeepSeek-family target is not in the tiny set; the range view is held on the DFlash
    boundary instead: ids [1, 3, 5] nested are read +1 by every SGLang release from 0.5.6 on (one verdict, match)."""
    draft = make_draft(nested_ids=[1, 3, 5])
    r = audit(tiny_targets["llama"], draft, engine="sglang@0.5.6..0.5.23", trainer="specforge", static=True)
    versions = {e.version for e in r.engines} | {r.served.version}
    assert "0.5.6" in versions and "0.5.23" in versions and r.served.version == "0.5.23"
    assert all(e.verdict == "match" for e in r.engines) and r.verdict == "match"
