"""`eagle-audit layers` at the CLI edge: exit codes, JSON, --write-fixed-config, one-line errors, and
the SmolLM2 demo that runs with no arguments."""

import json
import re
import shutil

import pytest
import typer

from eagle_audit.cli.main import app

pytestmark = pytest.mark.usefixtures("one_thread")

FAST = ("--max-prompts", "2", "--max-tokens", "32")  # keep capture small on a 2-core CPU

NESTED_KEY = "eagle_aux_hidden_state_layer_ids"


def as_json(res) -> dict:
    assert "Traceback" not in res.output
    return json.loads(res.stdout)


def assert_bad_input(res, *names, audited=False):
    """Exit 2, one error line on stderr (plus an optional hint line), no traceback, naming ``names``;
    nothing on stdout unless the audit itself ran (``audited``) before the bad option was met."""
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: ")
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: ")), lines
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    assert audited or res.stdout == ""


# ---------------------------------------------------------------------------- exit codes and output


def test_match_exits_0_and_renders_a_table(cli, tiny_targets, make_draft):
    res = cli("-t", tiny_targets["llama"], "-d", make_draft(nested_ids=[1, 3, 4]), *FAST)
    assert res.exit_code == 0, res.output
    assert "verdict: match" in res.stdout and "0 error(s)" in res.stdout
    assert "Traceback" not in res.output


def test_mismatch_exits_1(cli, tiny_targets, make_draft):
    res = cli("-t", tiny_targets["llama"], "-d", make_draft(nested_ids=[1, 3, 4]), "--engine", "vllm-v1", "--static")
    assert res.exit_code == 1
    assert "LAYER_OFFSET" in res.stdout and "verdict: mismatch" in res.stdout
    assert f'{{"{NESTED_KEY}": [2, 4, 5]}}' in res.stdout


def test_json_to_stdout(cli, tiny_targets, make_draft):
    draft = make_draft(nested_ids=[1, 3, 4])
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--engine", "vllm-v1", "--json", "-", *FAST)
    assert res.exit_code == 1
    data = as_json(res)
    assert data["schema"] == "eagle-audit/layers/1"
    assert data["verdict"] == "mismatch"
    assert [s["verdict"] for s in data["slots"]] == ["offset -1"] * 3
    assert [s["trained"]["label"] for s in data["slots"]] == ["B2", "B4", "B5"]
    assert all(isinstance(s["cosine"], float) for s in data["slots"])
    assert [f["code"] for f in data["findings"]] == ["LAYER_OFFSET"] * 3
    assert data["fix"]["possible"] and data["fix"]["patch"] == {NESTED_KEY: [2, 4, 5]}
    assert data["fix"]["key"] == NESTED_KEY and data["fix"]["ids"] == [2, 4, 5]
    prov = data["provenance"]
    assert prov["eagle_audit"] and prov["torch"] and prov["transformers"].startswith("5.")
    assert prov["engine_rules"]["name"] == "vllm-v1" and prov["trainer_rules"]["name"] == "specforge"
    assert prov["num_prompts"] == 2 and prov["static"] is False
    assert data["target"]["num_layers"] == 8 and data["draft"]["path"] == str(draft)
    assert len(data["heatmap"]["states"]) == 10
    assert res.stderr == ""  # no progress or logs with --json - (and none when stderr is not a terminal)


def test_json_match_exits_0(cli, tiny_targets, make_draft):
    res = cli("-t", tiny_targets["deepseek_v3"], "-d", make_draft(nested_ids=[1, 29, 57]), "--json", "-", *FAST)
    assert res.exit_code == 0
    data = as_json(res)
    assert data["verdict"] == "match" and data["fix"] is None
    assert [s["served"]["boundary"] for s in data["slots"]] == [2, 30, 58]
    assert [f for f in data["findings"] if f["severity"] == "error"] == []


def test_json_to_a_file_keeps_the_table(cli, tiny_targets, make_draft, tmp_path):
    out = tmp_path / "result.json"
    res = cli("-t", tiny_targets["llama"], "-d", make_draft(nested_ids=[0, 2, 5]), "--engine", "vllm", "--static",
              "--json", out)
    assert res.exit_code == 1
    assert "IDS_NOT_READ" in res.stdout
    data = json.loads(out.read_text())
    assert [f["code"] for f in data["findings"]][0] == "IDS_NOT_READ"
    assert data["fix"]["patch"] == {NESTED_KEY: [1, 3, 6]}


# ---------------------------------------------------------------------------- --write-fixed-config


def test_write_fixed_config_then_reaudit_matches(cli, tiny_targets, make_draft, digest, tmp_path):
    target = tiny_targets["deepseek_v3"]
    draft = make_draft(nested_ids=[2, 30, 58])
    before = digest(draft)
    fixed = tmp_path / "fixed"
    res = cli("-t", target, "-d", draft, "--trained-boundaries", "0,3,31", "--write-fixed-config", fixed, "--engine", "sglang", *FAST)
    assert res.exit_code == 1, res.output
    assert "EMBEDDING_COMPOSITION" in res.stdout
    assert f"wrote {fixed / 'config.json'}" in " ".join(res.stderr.split())
    assert digest(draft) == before  # the input draft is byte-for-byte unchanged
    cfg = json.loads((fixed / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 3, 31]
    assert cfg["eagle_config"]["use_aux_hidden_state"] is True  # the rest of the config is kept
    assert (fixed / "model.safetensors").resolve() == (draft / "model.safetensors").resolve()
    res = cli("-t", target, "-d", fixed, "--trained-boundaries", "0,3,31", "--json", "-", "--engine", "sglang", *FAST)
    assert res.exit_code == 0, res.output
    data = as_json(res)
    assert data["verdict"] == "match"
    assert [s["served"]["label"] for s in data["slots"]] == ["B0", "B3", "B31"]
    assert all(s["cosine"] == pytest.approx(1.0, abs=1e-5) for s in data["slots"])


def test_write_fixed_config_for_vllm_moves_the_ids_to_the_top_level(cli, tiny_targets, make_draft, digest, tmp_path):
    target, draft = tiny_targets["llama"], make_draft(nested_ids=[0, 2, 5])
    before = digest(draft)
    fixed = tmp_path / "fixed"
    assert cli("-t", target, "-d", draft, "-e", "vllm", "--static", "--write-fixed-config", fixed).exit_code == 1
    assert digest(draft) == before
    assert json.loads((fixed / "config.json").read_text())[NESTED_KEY] == [1, 3, 6]
    assert cli("-t", target, "-d", fixed, "-e", "vllm", "--static").exit_code == 0
    # SGLang still reads the (unchanged) nested ids, which SpecForge trained with: it matches too
    assert cli("-t", target, "-d", fixed, "-e", "sglang", "--static").exit_code == 0


def test_write_fixed_config_refusals(cli, tiny_targets, make_draft, digest, tmp_path):
    target = tiny_targets["llama"]
    draft = make_draft(nested_ids=[1, 3, 4])
    before = digest(draft)
    res = cli("-t", target, "-d", draft, "-e", "vllm-v1", "--static", "--write-fixed-config", draft)
    assert_bad_input(res, draft, audited=True)
    assert "is the input draft" in res.stderr and res.stdout == ""  # refused before the audit runs
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("keep")
    res = cli("-t", target, "-d", draft, "-e", "vllm-v1", "--static", "--write-fixed-config", busy)
    assert_bad_input(res, busy, audited=True)
    assert "holds files eagle-audit did not write" in res.stderr and (busy / "x").read_text() == "keep"
    unreachable = make_draft(nested_ids=[1, 3, 7])
    res = cli("-t", target, "-d", unreachable, "--static", "--write-fixed-config", tmp_path / "never")
    assert_bad_input(res, "no config change fixes this for sglang", audited=True)
    assert not (tmp_path / "never").exists()
    res = cli("-t", target, "-d", draft, "--static", "--write-fixed-config", tmp_path / "nothing")
    assert res.exit_code == 0 and "nothing to fix" in res.stderr
    assert not (tmp_path / "nothing").exists()
    assert digest(draft) == before


# ---------------------------------------------------------------------------- bad input: exit 2, one line


def test_missing_target_path(cli, make_draft, tmp_path):
    assert_bad_input(cli("-t", tmp_path / "no-model", "-d", make_draft()), tmp_path / "no-model")


def test_missing_draft_path(cli, tiny_targets, tmp_path):
    assert_bad_input(cli("-t", tiny_targets["llama"], "-d", tmp_path / "no-draft"), tmp_path / "no-draft")


def test_non_eagle_checkpoint(cli, tiny_targets, make_draft):
    target = tiny_targets["llama"]
    res = cli("-t", target, "-d", target)  # a plain causal LM has no fc.weight: it is a target (issue 28.1)
    assert_bad_input(res, target.path)
    assert "this is a target model, not a draft" in res.stderr and "no fc.weight" in res.stderr
    no_fc = make_draft(edit=lambda sd: sd.pop("fc.weight"))  # a draft's config without its fc
    res = cli("-t", target, "-d", no_fc)
    assert_bad_input(res, no_fc)
    assert "no fc.weight: not an EAGLE-3 draft" in res.stderr


def test_draft_for_another_target(cli, tiny_targets, make_draft):
    draft = make_draft(target_hidden=48)  # fc takes 3 x 48
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--static")
    assert_bad_input(res, draft, tiny_targets["llama"].path)
    assert "hidden size 48" in res.stderr


def test_corrupt_draft_safetensors(cli, tiny_targets, make_draft):
    draft = make_draft(nested_ids=[1, 3, 4])
    weights = draft / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert_bad_input(cli("-t", tiny_targets["llama"], "-d", draft, "--static"), weights)


def test_corrupt_target_safetensors(cli, tiny_targets, make_draft, tmp_path):
    target = tmp_path / "target"
    shutil.copytree(tiny_targets["llama"].path, target)
    weights = target / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    res = cli("-t", target, "-d", make_draft(nested_ids=[1, 3, 4]), *FAST)
    assert_bad_input(res, target)
    assert "the weights cannot be loaded" in res.stderr


def test_engine_without_capture_is_a_finding(cli, config_only_target, make_draft):
    """An architecture the engine cannot capture for (GPT-NeoX is not registered in SGLang 0.5.23; GLM-4
    dense has no set_eagle3_layers_to_capture): exit 1 with ENGINE_UNSUPPORTED naming what is supported."""
    for arch, model_type, why in (("GPTNeoXForCausalLM", "gpt_neox", "declares no capture rule"),
                                  ("Glm4ForCausalLM", "glm4", "glm4.py has no set_eagle3_layers_to_capture")):
        target = config_only_target(arch, 8, model_type=model_type)
        res = cli("-t", target, "-d", make_draft(nested_ids=[1, 3, 4]), "--static", "--json", "-")
        assert res.exit_code == 1, res.output
        data = as_json(res)
        (finding,) = [f for f in data["findings"] if f["code"] == "ENGINE_UNSUPPORTED"]
        assert finding["severity"] == "error" and arch in finding["what"] and why in finding["what"]
        # the fix names the architectures nearest the target's, the why (-v, JSON) every one the engine captures for
        assert "captures for 43 architecture(s)" in finding["fix"] and "more (every one in the finding's why)" in finding["fix"]
        assert "LlamaForCausalLM" in finding["why"] and "Gemma3ForCausalLM" in finding["why"]
        assert [f["code"] for f in data["findings"]] == ["ENGINE_UNSUPPORTED"]
        assert data["served"]["unsupported"] and data["fix"]["possible"] is False


def test_gemma3_branch_capture_is_an_error(cli, tiny_targets, make_draft):
    """SGLang's Gemma 3 forward captures the previous layer's post-feedforward-norm branch output, not the
    residual stream: a draft trained on the stream is reported per slot, with a real target."""
    gemma = tiny_targets["gemma3_mm"]  # Gemma3ForConditionalGeneration, N = 4
    res = cli("-t", gemma, "-d", make_draft(nested_ids=[0, 1, 2]), "--json", "-", *FAST)
    assert res.exit_code == 1, res.output
    data = as_json(res)
    assert [s["served"]["label"] for s in data["slots"]] == ["B1", "B2", "B3"]
    assert [s["verdict"] for s in data["slots"]] == ["not residual"] * 3
    codes = [f["code"] for f in data["findings"]]
    assert codes == ["NOT_RESIDUAL_STREAM"] * 3
    assert "post_feedforward_layernorm branch output of layer 0" in data["findings"][0]["what"]
    assert data["fix"]["possible"] is False and "residual stream" in data["fix"]["explanation"]


def test_ids_that_crash_the_engine(cli, tiny_targets, config_only_target, make_draft):
    qwen_moe = tiny_targets["qwen3_moe"]  # N = 4: id 3 -> capture index 4, setattr(self.layers[4]) raises
    # trained on B4 (SpecForge's HF backend could; 0.2.0 captures through SGLang and would have crashed too)
    data = as_json(cli("-t", qwen_moe, "-d", make_draft(nested_ids=[1, 2, 3]), "--trainer", "specforge-hf", "--static",
                       "--json", "-"))
    (crash,) = [f for f in data["findings"] if f["code"] == "ENGINE_CRASH"]
    assert "IndexError: index 4 is out of range at start-up" in crash["what"]
    assert "UNREACHABLE_LAYER" not in [f["code"] for f in data["findings"]]
    assert data["fix"]["possible"] is False and "captures only boundaries 0..3" in data["fix"]["explanation"]
    deepseek = config_only_target("DeepseekV3ForCausalLM", 61, model_type="deepseek_v3")
    data = as_json(cli("-t", deepseek, "-d", make_draft(nested_ids=[1, 1, 57]), "--static", "--json", "-"))
    (crash,) = [f for f in data["findings"] if f["code"] == "ENGINE_CRASH"]
    assert "RuntimeError: captured 2 of 3 aux hidden states at the first target forward" in crash["what"]


def test_unknown_trainer_and_engine(cli, tiny_targets, make_draft):
    args = ("-t", tiny_targets["llama"], "-d", make_draft(), "--static")
    res = cli(*args, "--trainer", "specforj")
    assert_bad_input(res, "specforj")
    assert "known trainers: " in res.stderr and "specforge" in res.stderr
    res = cli(*args, "--engine", "sglang-nightly")
    assert_bad_input(res, "sglang-nightly")
    assert "known engines: " in res.stderr and "vllm-v1" in res.stderr


def test_malformed_convention_file(cli, tiny_targets, make_draft, tmp_path):
    args = ("-t", tiny_targets["llama"], "-d", make_draft(), "--static")
    broken = tmp_path / "fork.json"
    broken.write_text('{"schema": "eagle-audit/convention/1", "name": ')
    assert_bad_input(cli(*args, "--engine", broken), broken)
    unsafe = tmp_path / "unsafe.json"
    unsafe.write_text(json.dumps({"schema": "eagle-audit/convention/1", "name": "x", "kind": "engine", "version": "1",
                                  "source": "s", "ids_from": ["nested"], "fallback_rule": "r",
                                  "rules": {"r": {"default_ids": "[2, __import__('os').getpid()]"}}}))
    assert_bad_input(cli(*args, "--engine", unsafe), unsafe)
    missing = tmp_path / "absent.json"
    assert_bad_input(cli(*args, "--trainer", missing), missing)


def test_empty_prompts_file(cli, tiny_targets, make_draft, tmp_path):
    empty = tmp_path / "prompts.jsonl"
    empty.write_text("\n  \n")
    assert_bad_input(cli("-t", tiny_targets["llama"], "-d", make_draft(), "--prompts", empty), empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"nothing": 1}\n')
    assert_bad_input(cli("-t", tiny_targets["llama"], "-d", make_draft(), "--prompts", bad), f"{bad}:2")


def test_bad_option_values(cli, tiny_targets, make_draft):
    args = ("-t", tiny_targets["llama"], "-d", make_draft(), "--static")
    assert_bad_input(cli(*args, "--trained-boundaries", "2,x,5"), "--trained-boundaries")
    assert_bad_input(cli(*args, "--trained-boundaries", "2,4,99"), "--trained-boundaries")
    assert_bad_input(cli(*args, "--trained-ids", "1;2"), "--trained-ids")
    assert_bad_input(cli("-t", tiny_targets["llama"], "-d", make_draft(), "--dtype", "int4"), "--dtype")


def test_tokenizerless_target_without_static(cli, tiny_targets, make_draft):
    res = cli("-t", tiny_targets["qwen3"], "-d", make_draft(nested_ids=[0, 1, 2]), *FAST)
    assert_bad_input(res, "tokenizer")


# ---------------------------------------------------------------------------- help


def test_every_option_has_help_and_kebab_case():
    command = typer.main.get_command(app).commands["layers"]
    options = [p for p in command.params if isinstance(p, typer.core.TyperOption)]
    assert len(options) >= 17
    for p in options:
        assert p.help, p.name
        for opt in p.opts:
            assert re.fullmatch(r"--?[a-z][a-z0-9-]*", opt), opt
    assert "Exit codes: 0 the wiring matches, 1 a mismatch was found, 2 bad input, 3 internal error." in " ".join(command.help.split())


# ---------------------------------------------------------------------------- the SmolLM2 demo


def _plain(text: str) -> str:
    return " ".join(re.sub("[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋]", " ", text).split())


def test_demo_with_no_arguments(cli, smollm2_path, audit_cache):
    res = cli()
    assert res.exit_code == 1, res.output
    text = _plain(res.stdout)
    assert "IDS_NOT_READ" in text and "EMBEDDING_COMPOSITION slot 0" in text
    assert "LAYER_OFFSET slot 1" in text and "LAYER_OFFSET slot 2" in text
    assert f'"eagle_config": {{"{NESTED_KEY}": [-1, 2, 15]}}}}' in text
    # SGLang 0.5.23 registers no Eagle3Speculator and reads a plain config: the fix says so and writes both
    assert '{"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 576' in text
    assert "verdict: mismatch" in text
    from eagle_audit.demo import DEMO_DIR

    assert f"draft {DEMO_DIR.name}" in " ".join(res.stdout.split())  # by name in the summary; in full with -v
    assert f"draft {DEMO_DIR}" in " ".join(cli("-v").stdout.split())  # the shipped draft, read where it is installed
    assert not (audit_cache / "demo-draft-v2").exists()  # nothing written for it


def test_demo_as_json(cli, smollm2_path):
    res = cli("--json", "-", *FAST)
    assert res.exit_code == 1
    data = as_json(res)
    assert data["target"]["num_layers"] == 30 and data["target"]["architecture"] == "LlamaForCausalLM"
    assert data["draft"]["layout"] == "speculators"
    assert [s["trained"]["label"] for s in data["slots"]] == ["B0", "B3", "B16"]
    assert [s["served"]["label"] for s in data["slots"]] == ["B2", "B15", "B27"]
    assert [f["code"] for f in data["findings"]] == ["IDS_NOT_READ", "EMBEDDING_COMPOSITION", "LAYER_OFFSET",
                                                     "LAYER_OFFSET", "DRAFT_CONFIG_KEY"]  # SGLang: no model_type
    # the real model separates the states: the trained state is its own nearest, the served one is far
    for s in data["slots"]:
        assert s["nearest"]["label"] == s["trained"]["label"]
        assert s["cosine"] < 0.95
    assert data["slots"][0]["cosine"] < 0.2  # the embedding vs the output of layer 1
    fix = data["fix"]
    assert fix["possible"] and fix["key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert fix["ids"] == [-1, 2, 15]
    assert [s["label"] for s in fix["resolved"]] == ["B0", "B3", "B16"]
