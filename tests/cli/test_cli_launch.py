"""`eagle-audit launch`: every engine's launch lines for the user's target and draft (eagle_audit/engines/lines.py),
from the same launch code `layers --server` and the served checks use. That vLLM's and SGLang's own argument
parsers take these lines and capture what they say: tests/served/test_served_vllm.py, test_served_sglang.py."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from eagle_audit.cli.main import app
from eagle_audit.demo import demo_draft

from tests.docs_keys import assert_documented
from tests.draft_layouts import sglang_layout


def _run(*args):
    return CliRunner().invoke(app, ["launch", *map(str, args)])


def _lines(res):
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    return data, {e["engine"]: e for e in data["engines"]}


def test_the_demo_lines_for_every_engine():
    data, by = _lines(_run("--json", "-"))
    assert data["schema"] == "eagle-audit/launch/1" and list(by) == ["sglang", "vllm", "vllm-v1"]
    assert_documented(data)
    assert_documented(data["engines"][0], ("speculative",))
    assert not data["target"].endswith(".gguf")  # the GGUF's converted directory, which an engine loads
    # the demo declares its ids at the top level: vLLM (both runners) serves them, SGLang its default
    assert by["vllm"]["serving"]["capture"]["states"] == by["vllm-v1"]["serving"]["capture"]["states"] == ["B0", "B3", "B16"]
    assert by["sglang"]["serving"]["capture"]["states"] == ["B2", "B15", "B27"]
    assert len(by["vllm"]["reference"]["capture"]["states"]) == 31 and by["vllm"]["reference"]["capture"]["role"] == "reference"
    spec = by["vllm"]["speculative"]["argv"]
    assert spec[:2] == ["vllm", "serve"] and json.loads(spec[spec.index("--speculative-config") + 1]) == {
        "method": "eagle3", "model": data["draft"], "num_speculative_tokens": 3}
    assert by["vllm-v1"]["speculative"]["argv"][:2] == ["env", "VLLM_USE_V2_MODEL_RUNNER=0"]
    assert "--speculative-draft-model-path" in by["sglang"]["speculative"]["argv"]


def test_the_runners_read_nested_ids_differently(tmp_path):
    """The demo in SGLang's layout, ids (0, 3, 16) nested: the V2 runner's serving line captures its default, the
    V1 runner's the nested ids; the terminal shows each line whole."""
    d = sglang_layout(demo_draft(), tmp_path / "d", [0, 3, 16])
    _, by = _lines(_run("-d", d, "--engines", "vllm,vllm-v1", "--storage", tmp_path / "hs", "--json", "-"))
    assert by["vllm"]["serving"]["capture"]["states"] == ["B2", "B15", "B27"]
    assert by["vllm-v1"]["serving"]["capture"]["states"] == ["B0", "B3", "B16"]
    assert str(tmp_path / "hs") in by["vllm"]["serving"]["line"]
    res = _run("-d", d, "--engines", "vllm-v1")
    assert res.exit_code == 0 and "eagle_aux_hidden_state_layer_ids\": [0, 3, 16]" in res.output
    assert "serving: capture-only" in res.output and "reference: capture-only" in res.output


def test_bad_engines_are_one_line(tmp_path):
    res = _run("--engines", "vllm,trtllm")
    assert res.exit_code == 2 and res.output.strip().startswith("error: --engines") and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) <= 3
    res = _run("-d", tmp_path / "nothing")
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_block_drafts_get_their_algorithm(tmp_path):
    """A DFlash draft: SGLang's line runs DFLASH on the draft's block, vLLM's method dflash (never EAGLE-3)."""
    import torch
    from safetensors.torch import save_file

    d = tmp_path / "dflash"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 32,
        "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
        "rms_norm_eps": 1e-6, "dflash_config": {"target_layer_ids": [1, 14, 26], "mask_token_id": 4, "block_size": 8}}))
    save_file({"fc.weight": torch.zeros(32, 3 * 32), "hidden_norm.weight": torch.ones(32), "norm.weight": torch.ones(32)},
              str(d / "model.safetensors"))
    _, by = _lines(_run("-d", d, "--engines", "sglang,vllm", "--json", "-"))
    sg = by["sglang"]["speculative"]["argv"]
    assert sg[sg.index("--speculative-algorithm") + 1] == "DFLASH" and "EAGLE3" not in sg
    assert sg[sg.index("--speculative-num-draft-tokens") + 1] == "8" and "--speculative-num-steps" not in sg
    vl = by["vllm"]["speculative"]["argv"]
    assert json.loads(vl[vl.index("--speculative-config") + 1])["method"] == "dflash"
