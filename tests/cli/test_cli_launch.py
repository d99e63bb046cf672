"""`eagle-audit launch`: every engine's launch lines for the user's target and draft (eagle_audit/engines/lines.py),
from the same launch code `layers --server` and the served checks use. That vLLM's and SGLang's own argument
parsers take these lines and capture what they say: tests/served/test_served_vllm.py, test_served_sglang.py."""

from __future__ import annotations

import json

import pytest

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


# ---------------------------------------------------------------------------- the lines agree with `layers`

def _block_draft(path, n_slots: int, **config):
    """A DFlash (z-lab layout) or DSpark draft directory with weights (fc, norms), hidden 32."""
    import torch
    from safetensors.torch import save_file

    base = dict(architectures=["DFlashDraftModel"], model_type="qwen3", hidden_size=32, intermediate_size=64,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=512, rms_norm_eps=1e-6,
                num_hidden_layers=n_slots, block_size=16)
    base.update(config)
    path.mkdir()
    (path / "config.json").write_text(json.dumps(base))
    save_file({"fc.weight": torch.zeros(32, n_slots * 32), "hidden_norm.weight": torch.ones(32),
               "norm.weight": torch.ones(32)}, str(path / "model.safetensors"))
    return path


def _served_by_layers(target, draft, engine):
    from eagle_audit.layers.run import LayersOptions, run_layers

    r = run_layers(LayersOptions(target=str(target), draft=str(draft), engine=engine, static=True,
                                 use_installed_engine=False))
    return [s.label() for s in r.served.states], r


def test_dflash_on_sglang_captures_what_layers_says_sglang_feeds(config_only_target, tmp_path):
    """issue 42: the capture-only line of a DFlash draft named the EAGLE-3 default (B2, B18, B33) while `layers`
    says SGLang feeds B2, B10, B18, B26, B34 (its build_target_layer_ids over the draft's 5 layers)."""
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    draft = _block_draft(tmp_path / "dflash", 5)
    _, by = _lines(_run("-t", target, "-d", draft, "--engines", "sglang", "--json", "-"))
    line = by["sglang"]["serving"]
    assert line["capture"]["states"] == _served_by_layers(target, draft, "sglang")[0] == ["B2", "B10", "B18", "B26",
                                                                                          "B34"]
    argv = line["argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "DFLASH"
    i = argv.index("--return-aux-hidden-state-layer-ids")
    assert argv[i + 1:i + 6] == ["1", "9", "17", "25", "33"]  # DFLASH capture-only needs the ids written out


@pytest.mark.parametrize("kind", ["eagle3", "dflash", "dflash-ids", "dspark"])
def test_every_serving_line_agrees_with_layers(config_only_target, make_draft, tmp_path, kind):
    target = config_only_target("Qwen3ForCausalLM", 36, "qwen3")
    if kind == "eagle3":
        draft = make_draft(nested_ids=[1, 17, 32])
    elif kind == "dflash":
        draft = _block_draft(tmp_path / kind, 3)
    elif kind == "dflash-ids":
        draft = _block_draft(tmp_path / kind, 3, dflash_config={"target_layer_ids": [1, 17, 32]})
    else:
        draft = _block_draft(tmp_path / kind, 3, architectures=["DSparkDraftModel"], dspark_target_layer_ids=[1, 17, 32])
    _, by = _lines(_run("-t", target, "-d", draft, "--json", "-"))
    for engine, lines in by.items():
        served, r = _served_by_layers(target, draft, engine)
        cap = lines["serving"]["capture"]
        crashed = r.served.failure is not None or r.served.unsupported is not None
        if cap is None:
            assert crashed, (engine, lines["serving"]["notes"])
        else:
            assert cap["states"] == served, engine
        assert (lines["warning"] is None) == (r.verdict == "match"), (engine, lines["warning"])


def test_a_miswired_draft_gets_one_warning_line_pointing_at_the_fixed_copy():
    res = _run()  # the demo: its top-level ids are read by vLLM, not by SGLang
    assert res.exit_code == 0
    warnings = [line for line in res.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "mis-wired on sglang" in warnings[0]
    assert "eagle-audit layers --engine sglang --write-fixed-config demo-draft-v2-fixed-sglang" in warnings[0]
    data, by = _lines(_run("--json", "-"))
    assert by["vllm"]["warning"] is None and "LAYER_OFFSET" in by["sglang"]["warning"]
    assert_documented(data["engines"][0])
