"""`eagle-audit fingerprint` end to end: JSON schema, exit codes, the report's figure; bad input."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from eagle_audit.cli.main import app


def _invoke(*args):
    return CliRunner().invoke(app, ["fingerprint", *args])


@pytest.mark.parametrize("args, what", [
    (["-d", "/nonexistent/draft"], "/nonexistent/draft"),
    (["--prompts", "/nonexistent/prompts.jsonl"], "/nonexistent/prompts.jsonl"),
])
def test_bad_input_is_one_line_exit_2(args, what, smollm2_path):
    res = _invoke("-t", smollm2_path, *args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines[0].startswith("error:") and what in lines[0], res.output
    assert "Traceback" not in res.output


def _redeclared(src, tmp_path, lines: slice = slice(8, 11)):
    """The canary's weights with SGLang ids [0, 7, 20] (= [B1, B8, B21]) and no canary record, and a prompts
    file of its training prompts (three by default)."""
    draft = tmp_path / "draft"
    draft.mkdir()
    cfg = json.loads((src / "config.json").read_text())
    cfg.pop("eagle_audit_canary")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 7, 20]
    (draft / "config.json").write_text(json.dumps(cfg))
    os.symlink(src / "model.safetensors", draft / "model.safetensors")
    from importlib import resources

    lines = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()[lines]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(ln + "\n" for ln in lines))
    return draft, prompts


def test_cli_declared_wiring_differs(fp_canaries, smollm2_path, tmp_path, fp_threads):
    """The [B2, B15, B27] canary's weights with other SGLang ids in the config (and no canary record): exit 1,
    TRAINED_WIRING_DIFFERS, the engine fix for the measured wiring, and a report with the agreement figure. The
    search reads 3 of its training prompts, the confirmation the other 5 (never searched): the measured wiring
    beats the declared one there in simulated accept length, so the finding stands and says what it gains."""
    draft, prompts = _redeclared(fp_canaries["2-15-27"], tmp_path, slice(8, 16))
    out = tmp_path / "fp.json"
    res = _invoke("-t", smollm2_path, "-d", str(draft), "--prompts", str(prompts), "--max-new-tokens", "48",
                  "--max-prompts", "3", "--more-prompts", "0", "--json", str(out), "--report", str(tmp_path / "rep"))
    assert res.exit_code == 1, res.output
    data = json.loads(out.read_text())
    assert data["schema"] == "eagle-audit/fingerprint/2"
    from tests.docs_keys import assert_documented

    assert_documented(data, ("inferred", "agreement", "search"))
    assert_documented(data["inferred"], ("slots", "baseline"))
    inf = data["inferred"]
    assert inf["confidence"] in ("high", "ambiguous")
    for slot, want in zip(inf["slots"], ("B2", "B15", "B27")):
        assert want in slot["candidates"], slot
        assert {"best", "runner_up", "margin", "interval", "ambiguous"} <= set(slot)
        assert slot["interval"][0] <= slot["margin"] <= slot["interval"][1]
    assert inf["states"] == [s["state"] for s in inf["slots"]]  # guarded: a state, the set, or null
    for st, slot in zip(inf["states"], inf["slots"]):
        assert st == (None if slot["undetermined"] else slot["best"] if not slot["ambiguous"] else slot["candidates"])
    codes = [f["code"] for f in data["findings"]]
    assert "TRAINED_WIRING_DIFFERS" in codes
    conf = data["confirmation"]
    assert conf["prompts"] == 5 and conf["stands"] is True, conf
    gain = conf["gain"]
    assert gain["interval"][0] > 0 and gain["mean"] >= conf["material_gain"], gain
    al = {k: w["accept_length"] for k, w in conf["wirings"].items()}
    assert al["measured"] > al["declared"], al
    assert "tokens per verify" in data["findings"][codes.index("TRAINED_WIRING_DIFFERS")]["what"]
    assert data["declared"]["states"][0]["label"] == "B1"
    assert data["fix"]["possible"]
    for got, slot in zip(data["fix"]["resolved"], inf["slots"]):  # the measured state where the weights say one
        assert slot["undetermined"] or got["label"] in slot["candidates"]
    assert len(data["agreement"]["top1"]) == 3 and len(data["agreement"]["states"]) == 32
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    assert 'id="fingerprint"' in html and "slot 2: inferred " in html and "slot 2: declared B21" in html
    assert "trained wiring" in res.output.lower()


def test_layers_suggests_the_fingerprint_and_measures_with_it(fp_canaries, smollm2_path, tmp_path, fp_threads):
    draft, prompts = _redeclared(fp_canaries["2-15-27"], tmp_path)
    res = CliRunner().invoke(app, ["layers", "-t", smollm2_path, "-d", str(draft), "--static", "--engine", "sglang",
                                   "--json", "-"])
    assert res.exit_code == 0, res.output  # SGLang feeds what the config declares: nothing to see without weights
    assert any("fingerprint" in s for s in json.loads(res.stdout)["suggestions"])
    res = CliRunner().invoke(app, ["layers", "-t", smollm2_path, "-d", str(draft), "--static", "--trainer",
                                   "fingerprint"])
    assert res.exit_code == 2 and res.output.startswith("error:"), res.output
    res = CliRunner().invoke(app, ["layers", "-t", smollm2_path, "-d", str(draft), "--trainer", "fingerprint",
                                   "--prompts", str(prompts), "--no-scan", "--json", "-"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    trained = [s["label"] for s in data["trained"]["states"]]
    assert data["trained"]["convention"] == "fingerprint" and trained[2] == "B27"  # declared B21: excluded
    # on 3 prompts x 48 tokens the shallow slots may be undetermined (interval honest for 3 prompts): the audit
    # then keeps the declared state there (no finding from a slot the weights cannot tell), and says so
    notes = " ".join(data["provenance"]["notes"])
    for got, declared, true in zip(trained[:2], ("B1", "B8"), (("B2", "B3"), ("B14", "B15", "B16"))):
        assert got in true or (got == declared and "undetermined" in notes), (got, notes)
    assert [s["label"] for s in data["served"]["states"]] == ["B1", "B8", "B21"]
    assert data["suggestions"] == []


def test_cli_without_confirmation_no_finding_from_the_weights_stands(fp_canaries, smollm2_path, tmp_path, fp_threads):
    """The same redeclared canary with no prompts left for the confirmation (--confirm-prompts 0): the weights'
    preference is not judged in accept length on text that did not choose it, so it raises nothing (exit 0: SGLang
    feeds what the config declares), and the declared claim says why."""
    draft, prompts = _redeclared(fp_canaries["2-15-27"], tmp_path)
    res = _invoke("-t", smollm2_path, "-d", str(draft), "--prompts", str(prompts), "--max-new-tokens", "48",
                  "--confirm-prompts", "0", "--json", "-")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["confirmation"] is None and data["findings"] == [] and data["fix"] is None
    declared = data["claims"][0]
    assert declared["source"] == "declared" and declared["agrees"] is True and "not confirmed" in declared["note"]
