"""End to end on SmolLM2-135M with a canary trained by a short schedule (cached between runs)."""

from __future__ import annotations

import json
import os

import pytest
import typer
from typer.testing import CliRunner

from eagle_audit.accept.live import run_live
from eagle_audit.runtime.eagle3 import flags_from_config, load_draft_model
from eagle_audit.simulate.accept import capture_cases, make_cases, simulate
from eagle_audit.cli.accept_rate import accept_rate
from eagle_audit.draft.read import read_draft
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State
from eagle_audit.target import default_target

from tests.accept.accept_tiny import SMOL_BOUNDARIES, SMOL_MISWIRED


def _training_prompts(target, n=2):
    """Prompts the short-schedule canary was trained on (9-16): its skill there is reliable; held-out
    acceptance is what bench/evidence/canary_cpu.py measures with a full schedule."""
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

    return resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()[8:16]


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


# ---------------------------------------------------------------------------- the shipped demo draft


@pytest.mark.full  # about 30-50 s of CPU: 8 prompts x 64 tokens through SmolLM2, five simulations
def test_demo_accept_rate_with_no_arguments_tells_the_layers_story(tmp_path):
    """`eagle-audit accept-rate` on the defaults: the shipped draft (trained on B0, B3, B16) loses most
    of its acceptance under SGLang's default wiring, and fixing slot 2 recovers part of it."""
    out = tmp_path / "r.json"
    res = CliRunner().invoke(_app(), ["accept-rate", "--json", str(out)])
    assert res.exit_code == 1, res.output
    data = json.loads(out.read_text())
    assert data["draft"]["layout"] == "speculators"
    assert [s["label"] for s in data["wirings"]["trained"]["states"]] == ["B0", "B3", "B16"]
    assert [s["label"] for s in data["wirings"]["served"]["states"]] == ["B2", "B15", "B27"]
    al = data["accept_length"]
    assert al["trained"] > 1.4 and al["served"] < 1.15 and al["trained"] - al["served"] > 0.3, al
    fixed = {a["slot"]: a["accept_length"] for a in data["attribution"]}
    assert set(fixed) == {0, 1, 2} and max(fixed.values()) < al["trained"]


def test_demo_draft_is_small_bf16_with_a_reduced_vocabulary():
    from safetensors import safe_open

    from eagle_audit.demo import DEMO_DIR, DEMO_TRAINED, demo_draft

    assert demo_draft() == str(DEMO_DIR)
    spec = read_draft(demo_draft())
    assert spec.config["eagle_aux_hidden_state_layer_ids"] == list(DEMO_TRAINED) and "eagle_config" not in spec.config
    assert "eagle_audit_canary" not in spec.config  # the audit reads the ids as it would for any draft
    assert spec.vocab.has_d2t and spec.vocab.d2t_in_t2d and spec.vocab.draft_vocab_size < spec.vocab_size
    size = (DEMO_DIR / "model.safetensors").stat().st_size
    assert size < 8_000_000, size
    with safe_open(str(DEMO_DIR / "model.safetensors"), framework="pt") as f:
        dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    assert dtypes == {"BF16", "I64", "BOOL"}, dtypes


def _app():
    from eagle_audit.cli.main import app

    return app
