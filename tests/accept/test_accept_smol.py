"""End to end on SmolLM2-135M with a canary trained by a short schedule (cached between runs)."""

from __future__ import annotations

import json
import os

import typer
from typer.testing import CliRunner

from eagle_audit.accept.live import run_live
from eagle_audit.accept.runtime import flags_from_config, load_draft_model
from eagle_audit.accept.simulate import capture_cases, make_cases, simulate
from eagle_audit.cli.accept_rate import accept_rate
from eagle_audit.draft import read_draft
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State
from eagle_audit.target import default_target

from accept_tiny import SMOL_BOUNDARIES, SMOL_MISWIRED


def _training_prompts(target, n=2):
    """Prompts the short-schedule canary was trained on (9-16): its skill there is reliable; held-out
    acceptance is what bench/canary_cpu.py measures with a full schedule."""
    return encode(load_prompts(None)[8:8 + n], target.tokenizer)


def test_trained_wiring_beats_miswiring_and_live_is_lossless(smol_target, smol_canary):
    spec = read_draft(str(smol_canary))
    draft = load_draft_model(spec, smol_target, flags_from_config(spec.config, spec.layout))
    trained, wrong = tuple(map(State, SMOL_BOUNDARIES)), tuple(map(State, SMOL_MISWIRED))
    cases, secs = make_cases(smol_target, _training_prompts(smol_target), 32)
    caps = capture_cases(smol_target, cases, trained + wrong)
    good = simulate(draft, cases, caps, trained, 3)
    bad = simulate(draft, cases, caps, wrong, 3)
    assert good.accept_length > bad.accept_length + 0.2, (good.accept_length, bad.accept_length)
    live = run_live(smol_target, draft, cases[:1], trained, 3, 32, secs)
    assert live.lossless
    assert live.stats.gains == good.gains[:1]


def _training_jsonl() -> list[str]:
    from importlib import resources

    return resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()[8:]


def test_cli_miswiring_exits_1(smol_canary, tmp_path):
    """The canary (trained on [2, 15, 27]) re-declared with top-level ids [0, 3, 16]: vLLM feeds them verbatim."""
    cfg = json.loads((smol_canary / "config.json").read_text())
    cfg.pop("eagle_config")
    cfg["eagle_aux_hidden_state_layer_ids"] = list(SMOL_MISWIRED)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    os.symlink(smol_canary / "model.safetensors", tmp_path / "model.safetensors")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(line + "\n" for line in _training_jsonl()[:2]))
    app = typer.Typer()
    app.command()(accept_rate)
    res = CliRunner().invoke(app, ["-t", default_target(), "-d", str(tmp_path), "--trained-boundaries", "2,15,27",
                                   "--engine", "vllm",
                                   "--prompts", str(prompts), "--max-new-tokens", "24", "--json", "-"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert [s["label"] for s in data["wirings"]["served"]["states"]] == ["B0", "B3", "B16"]
    assert data["accept_length"]["trained"] > data["accept_length"]["served"]
    assert {a["slot"] for a in data["attribution"]} == {0, 1, 2}
