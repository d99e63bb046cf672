"""`eagle-audit train-canary` through the CLI (eagle_audit/cli/train_canary.py), on the tiny random Llama
(8 layers): what it writes is a draft the other commands read back as trained on the asked boundaries, with the
ids in SGLang's convention; ``--json -`` is JSON alone on stdout; a second run replaces its own canary; its
refusals are one line, exit 2, before any training."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")

#: as small as a run can be: 2 prompts, 6 new tokens, 1 epoch (the wiring is what is checked, not the accuracy)
QUICK = ("--max-prompts", 2, "--max-new-tokens", 6, "--epochs", 1, "--draft-vocab", 16)


def _one_error_line(res) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    return lines[0]


def test_the_canary_is_written_in_sglang_ids_and_read_back_as_trained(cli, tiny_targets, tmp_path):
    target, out = tiny_targets["llama"].path, tmp_path / "canary"
    res = cli("--boundaries", "0,3,7", "--out", out, "-t", target, *QUICK, "--json", "-", command="train-canary")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # JSON alone on stdout: the human summary is not printed with --json -
    assert list(data["boundaries"]) == [0, 3, 7] and data["draft_vocab"] <= 16
    config = json.loads((out / "config.json").read_text())
    # SGLang 0.5.23 captures explicit id k as B(k+1): [B0, B3, B7] are ids [-1, 2, 6] (probes/sglang.json; it never
    # reaches B8 = BN of this target, which the audit calls UNREACHABLE_LAYER)
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [-1, 2, 6]
    assert config["eagle_audit_canary"]["trained_boundaries"] == [0, 3, 7]

    # the static audit reads the wiring back: trained from the canary record, served from the nested ids, equal
    audit = cli("-t", target, "-d", out, "--static", "--builtin-rules", "--engine", "sglang", "--json", "-")
    assert audit.exit_code == 0, audit.output
    slots = json.loads(audit.stdout)["slots"]
    assert [(s["trained"]["label"], s["served"]["label"]) for s in slots] == [("B0", "B0"), ("B3", "B3"), ("B7", "B7")]

    # a second run into the same --out replaces the canary it wrote (no --force needed), on other boundaries
    again = cli("--boundaries", "1,2,4", "--out", out, "-t", target, *QUICK, "--json", "-", command="train-canary")
    assert again.exit_code == 0, again.output
    assert json.loads((out / "config.json").read_text())["eagle_audit_canary"]["trained_boundaries"] == [1, 2, 4]


@pytest.mark.parametrize("args, needle", [
    (("--boundaries", "0,3,N+norm"), "residual boundaries only"),  # the post-norm state is not a boundary
    (("--boundaries", "0,3,9"), "--boundaries"),  # an 8-layer target has B0..B8
    (("--boundaries", "0,3,5", "--dtype", "float16"), "--dtype"),
])
def test_refusals_are_one_line_before_training(cli, tiny_targets, tmp_path, args, needle):
    out = tmp_path / "canary"
    line = _one_error_line(cli(*args, "--out", out, "-t", tiny_targets["llama"].path, *QUICK, command="train-canary"))
    assert needle in line, line
    assert not (out / "config.json").exists()  # nothing trained, nothing written
