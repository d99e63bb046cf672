"""What `check` prints (issue 43): one screen at 80 columns with the verdict, what is wrong, the cost and the
prompts it was measured on, the fix as one line to copy and `--write-fixed-config`, how sure as a grade that
follows the evidence; each stage in full behind `-v`; no fix box printed twice."""

import re

import pytest

from eagle_audit.check.run import CheckOptions, grade, run_check

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = ["--builtin-rules", "--max-prompts", "3", "--max-tokens", "24", "--max-new-tokens", "8"]


def test_check_in_one_screen_and_in_full_with_verbose(tiny_targets, make_draft, cli, tmp_path):
    t, d = tiny_targets["llama"], make_draft(nested_ids=[1, 3, 5])
    base = ["-t", t, "-d", d, "--trained-boundaries", "0,3,6", "--engine", "sglang", *SMALL]
    res = cli(*base, "--write-fixed-config", tmp_path / "fixed", command="check")
    assert res.exit_code == 1, res.output
    out = res.stdout
    lines = out.splitlines()
    assert len(lines) <= 60, out
    assert "stage" not in out.split("\n", 1)[0] and not any(ln.startswith("─") for ln in lines)  # no per-stage section
    assert re.search(r"^how sure (high|medium|low): ", out, re.M), out
    assert "--write-fixed-config" in out and "cost accept length" in out and "prompts of the built-in chat set" in out
    patch = next(ln for ln in lines if ln.startswith("{"))
    assert patch.endswith("}")  # the patch: one line, whole
    assert (tmp_path / "fixed" / "config.json").is_file()
    full = cli(*base, "-v", command="check").stdout
    assert "stage captured" in full and len(full.splitlines()) > len(lines)
    assert sum("╭" in ln and "fix for" in ln for ln in full.splitlines()) <= 1, full  # the same fix box once


def test_grade_follows_the_evidence(tiny_targets, make_draft):
    r = run_check(CheckOptions(target=str(tiny_targets["llama"]), draft=str(make_draft(nested_ids=[1, 3, 5])),
                               trainer="specforge", engine="vllm", use_installed_engine=False, max_prompts=3,
                               max_tokens=24, max_new_tokens=8))
    v = r.verdict
    assert v.grade in ("high", "medium") and "the trained wiring is given" in v.grade_why  # trainer given, measured
    assert v.to_json()["grade"] == v.grade and f"how sure: {v.grade}" in v.summary() or v.status == "match"
    by = {s.name: s for s in r.stages}

    class NoWiring:  # a fingerprint that found no wiring the weights fit
        inferred, errors, slots, claims, confidence = None, (), (), (), "none"

    from dataclasses import replace

    by["fingerprint"] = replace(by["fingerprint"], ran=True, result=NoWiring())
    g, why = grade(by, v.problems)
    assert g == "low" and "fit no wiring" in why
