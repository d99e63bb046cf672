"""Convention files: loading, validation, and resolution of ids into boundaries.

The expected boundaries are the ones stated in /work/shared/reference/conventions.md (Table 2) and
sglang.md, read from upstream source: Llama with N = 32 and DeepSeek-V3 with N = 61.
"""

import json
from pathlib import Path

import pytest

from eagle_audit.conventions import (ID_PLACES, SCHEMA, builtin_conventions, get_convention, load_convention_file,
                                     parse_convention, probes_dir, read_ids)
from eagle_audit.errors import BadConvention, UnknownArchitecture, UnknownConvention

LLAMA, DSV3, GPTOSS = "LlamaForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM"


def nested(ids):
    return {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}


def top(ids):
    return {"eagle_aux_hidden_state_layer_ids": list(ids)}


def boundaries(wiring):
    assert all(not s.normed for s in wiring.states)
    return [s.boundary for s in wiring.states]


# ---------------------------------------------------------------------------- registry


def test_registries_hold_every_builtin_pipeline():
    assert {"sglang", "trtllm", "vllm", "vllm-v1", "vllm-dflash", "vllm-v1-dflash"} <= set(builtin_conventions("engine"))
    assert {"eagle", "modelopt", "specforge", "speculators", "speculators-legacy", "trtllm"} <= set(
        builtin_conventions("trainer"))


def test_every_probe_file_cites_its_upstream_source_and_version():
    files = sorted(probes_dir().glob("*.json"))
    assert len(files) >= 10
    for f in files:
        c = load_convention_file(f)
        assert c.source.strip() and c.version.strip(), f
        assert c.path == str(f)
        for rule in c.rules.values():
            assert rule.default_ids


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(UnknownConvention) as info:
        get_convention("sglang-nightly", "engine")
    assert "unknown engine 'sglang-nightly'" in info.value.message
    assert "sglang" in info.value.hint and "vllm-v1" in info.value.hint and "convention .json" in info.value.hint


def test_a_trainer_file_is_not_an_engine():
    path = str(probes_dir() / "specforge.json")
    with pytest.raises(UnknownConvention, match="specforge.json is a trainer, not a"):
        get_convention(path, "engine")
    assert get_convention(path, "trainer").name == "specforge"


def test_same_name_differs_by_kind():
    assert get_convention("trtllm", "engine").kind == "engine"
    assert get_convention("trtllm", "trainer").kind == "trainer"


# ---------------------------------------------------------------------------- resolution: Table 2


@pytest.mark.parametrize("kind, name, arch, n, config, expected", [
    # SpecForge 0.2.0 passes its ids ([1, N//2-1, N-4] by default) to SGLang 0.5.14's setter: its rules
    ("trainer", "specforge", LLAMA, 32, {}, [2, 16, 29]),
    ("trainer", "specforge", DSV3, 61, {}, [2, 30, 58]),  # its default [1, 29, 57] starts at 1: +1
    ("trainer", "specforge", DSV3, 61, nested([1, 29, 57]), [2, 30, 58]),
    ("trainer", "specforge", DSV3, 61, nested([2, 30, 58]), [2, 30, 58]),  # DeepSeek: verbatim unless ids[0] == 1
    ("trainer", "specforge", LLAMA, 32, nested([26, 1, 14]), [2, 15, 27]),  # SGLang's loop: ascending
    # the removed HF-hook backend: +1 everywhere, config order
    ("trainer", "specforge-hf", LLAMA, 32, nested([26, 1, 14]), [27, 2, 15]),
    ("trainer", "specforge-hf", DSV3, 61, nested([2, 30, 58]), [3, 31, 59]),
    ("trainer", "eagle", LLAMA, 32, nested([7, 8, 9]), [2, 16, 29]),  # hard-coded: ids are never read
    ("trainer", "speculators", LLAMA, 32, top([2, 16, 29]), [2, 16, 29]),
    ("trainer", "speculators", DSV3, 61, {}, [2, 30, 58]),
    ("trainer", "speculators-legacy", LLAMA, 32, {}, [3, 17, 30]),
    ("trainer", "speculators-legacy", DSV3, 61, {}, [3, 31, 59]),
    ("trainer", "modelopt", LLAMA, 32, {}, [2, 16, 29]),
    ("trainer", "modelopt", DSV3, 61, nested([1, 29, 57]), [2, 30, 58]),
    ("trainer", "trtllm", LLAMA, 32, {}, [2, 16, 29]),
    # SGLang: default verbatim, explicit +1
    ("engine", "sglang", LLAMA, 32, {}, [2, 16, 29]),
    ("engine", "sglang", LLAMA, 32, nested([1, 15, 28]), [2, 16, 29]),
    ("engine", "sglang", LLAMA, 32, top([2, 16, 29]) | nested([0, 2, 5]), [1, 3, 6]),  # nested only
    ("engine", "sglang", "Qwen3VLForConditionalGeneration", 4, nested([0, 1, 2]), [1, 2, 3]),
    # SGLang DeepSeek: +1 only if ids[0] == 1, else verbatim
    ("engine", "sglang", DSV3, 61, {}, [2, 30, 58]),
    ("engine", "sglang", DSV3, 61, nested([1, 29, 57]), [2, 30, 58]),
    ("engine", "sglang", DSV3, 61, nested([2, 30, 58]), [2, 30, 58]),
    ("engine", "sglang", DSV3, 61, nested([0, 3, 31]), [0, 3, 31]),
    ("engine", "sglang", "KimiK25ForConditionalGeneration", 61, nested([1, 29, 57]), [2, 30, 58]),
    # SGLang gpt-oss: verbatim if max(ids) == N, else +1
    ("engine", "sglang", GPTOSS, 36, nested([24, 30, 36]), [24, 30, 36]),
    ("engine", "sglang", GPTOSS, 36, nested([1, 17, 33]), [2, 18, 34]),
    # vLLM V2 (default runner): top-level or eagle_config.layer_ids, IN-k; nested ids ignored
    ("engine", "vllm", LLAMA, 32, nested([1, 15, 28]), [2, 16, 29]),
    ("engine", "vllm", GPTOSS, 36, nested([1, 17, 33]), [2, 18, 33]),
    ("engine", "vllm", LLAMA, 32, top([2, 16, 29]), [2, 16, 29]),
    ("engine", "vllm", LLAMA, 32, {"eagle_config": {"layer_ids": [4, 9, 1]}}, [1, 4, 9]),  # sorted
    ("engine", "vllm", LLAMA, 32, top([0, 3, 32]), [0, 3, 32]),  # embedding and pre-norm final reachable
    # vLLM V1: top-level, else nested, verbatim
    ("engine", "vllm-v1", LLAMA, 32, nested([1, 15, 28]), [1, 15, 28]),
    ("engine", "vllm-v1", DSV3, 61, nested([1, 29, 57]), [1, 29, 57]),
    ("engine", "vllm-v1", LLAMA, 32, top([2, 16, 29]) | nested([1, 15, 28]), [2, 16, 29]),
    ("engine", "trtllm", LLAMA, 32, {}, [2, 16, 29]),
    ("engine", "trtllm", LLAMA, 32, nested([1, 15, 28]), [2, 16, 29]),
])
def test_resolve_matches_the_reference_tables(kind, name, arch, n, config, expected):
    wiring = get_convention(name, kind).resolve(config, arch, n)
    assert boundaries(wiring) == expected
    assert not wiring.dropped


def test_resolution_records_where_ids_came_from_and_what_was_ignored():
    sglang = get_convention("sglang", "engine")
    w = sglang.resolve(top([0, 3, 16]), LLAMA, 30)
    assert (w.ids, w.ids_source, w.ignored_places) == (None, "default", ("top_level",))
    assert w.case == "default [2, N // 2, N - 3]"
    assert w.rule == "common"
    w = sglang.resolve(nested([1, 15, 28]), LLAMA, 32)
    assert (w.ids, w.ids_source, w.ignored_places) == ((1, 15, 28), "nested", ())
    assert w.case == "explicit ids, +1"
    w = sglang.resolve(nested([2, 30, 58]), DSV3, 61)
    assert (w.rule, w.case) == ("deepseek_first_id", "explicit ids, verbatim")
    w = get_convention("vllm", "engine").resolve(nested([1, 15, 28]), LLAMA, 32)
    assert w.ignored_places == ("nested",) and w.ids_source == "default"


def test_override_ids_win_over_the_config():
    w = get_convention("specforge", "trainer").resolve(nested([1, 15, 28]), LLAMA, 32, override_ids=(0, 9, 20))
    assert boundaries(w) == [1, 10, 21] and w.ids_source == "override"


@pytest.mark.parametrize("name, arch, n, ids, kept, dropped", [
    ("sglang", LLAMA, 32, [1, 15, 31], [2, 16], [32]),  # +1 reaches N, which the loop never captures
    ("sglang", "Qwen3MoeForCausalLM", 4, [0, 1, 3], [1, 2], [4]),
    ("sglang", DSV3, 61, [-1, 2, 30], [2, 30], [-1]),  # -1 != 1: verbatim, below the loop
    ("vllm-v1", DSV3, 61, [0, 30, 58], [30, 58], [0]),  # DeepSeek residual is None at layer 0
])
def test_unreachable_capture_indices_are_dropped(name, arch, n, ids, kept, dropped):
    w = get_convention(name, "engine").resolve(nested(ids) | top(ids), arch, n)
    assert boundaries(w) == kept
    assert list(w.dropped) == dropped


def test_sglang_rules_per_architecture():
    sglang = get_convention("sglang", "engine")
    assert sglang.rule_for(LLAMA).name == "common"
    assert sglang.rule_for("Qwen3MoeForCausalLM").name == "moe_unguarded"
    assert sglang.rule_for(DSV3).name == "deepseek_first_id"
    assert sglang.rule_for(GPTOSS).name == "gpt_oss_boundary"
    assert sglang.rule_for(GPTOSS).reachable(6) == (0, 6)
    assert sglang.rule_for(LLAMA).reachable(6) == (0, 5)
    assert sglang.rule_for("MiniMaxM3SparseForConditionalGeneration").indices(None, 32)[0] == (3, 17, 30)


def test_sglang_unsupported_and_undeclared_architectures():
    sglang = get_convention("sglang", "engine")
    with pytest.raises(UnknownArchitecture, match="no EAGLE-3 capture for Glm4ForCausalLM: glm4.py"):
        sglang.rule_for("Glm4ForCausalLM")
    with pytest.raises(UnknownArchitecture, match="declares no capture rule for architecture FooForCausalLM") as info:
        sglang.rule_for("FooForCausalLM")
    assert "LlamaForCausalLM" in info.value.hint and "sglang.json" in info.value.message
    # trainers and vLLM fall back to their generic rule
    assert get_convention("vllm", "engine").rule_for("FooForCausalLM").name == "in_k"
    assert get_convention("specforge-hf", "trainer").rule_for("FooForCausalLM").name == "out_k"
    with pytest.raises(UnknownArchitecture, match="SpecForge 0.2.0 .* declares no capture rule"):
        get_convention("specforge", "trainer").rule_for("FooForCausalLM")  # SGLang 0.5.14 has no setter for it


def test_aux_count_and_flags():
    sglang, vllm = get_convention("sglang", "engine"), get_convention("vllm", "engine")
    assert sglang.aux_count({}) == 3
    assert sglang.aux_count(nested([1, 2])) == 2
    assert sglang.aux_count(nested([1, 2]) | {"num_aux_hidden_states": 4}) == 4
    assert sglang.aux_count(top([1, 2, 3, 4, 5])) == 3  # SGLang never reads the top-level key
    assert vllm.aux_count(nested([1])) == 1
    assert sglang.flag("norm_before_fc", {"eagle_config": {"norm_before_fc": True}}) is True
    assert sglang.flag("norm_before_fc", {"norm_before_fc": True}) is True
    assert sglang.flag("norm_before_fc", {}) is False
    assert sglang.flag("norm_before_residual", {"norm_before_residual": True}) is False  # not implemented
    assert vllm.flag("norm_before_residual", {"norm_before_residual": True}) is True


def test_each_side_reads_norm_output_with_its_own_semantics():
    from eagle_audit.resolution import flags_of

    sglang, specforge = get_convention("sglang", "engine"), get_convention("specforge", "trainer")
    # SGLang: true carries the normed hidden; the final norm always runs before lm_head
    assert (flags_of(sglang, {"norm_output": True}).norm_output, flags_of(sglang, {"norm_output": True}).head_norm) == (
        True, True)
    # SpecForge 0.2.0: absent means true = norm before lm_head only; false = no final norm at all
    for config, head in (({}, True), ({"norm_output": True}, True), ({"norm_output": False}, False)):
        f = flags_of(specforge, config)
        assert (f.norm_output, f.head_norm) == (False, head), config
    assert flags_of(specforge, {"eagle_config": {"norm_output": False}}).head_norm is True  # read at the top level only
    f = flags_of(specforge, {"norm_before_fc": True, "norm_before_residual": True})
    assert not f.norm_before_fc and not f.norm_before_residual and not f.fc_skip_at_hidden_width
    assert flags_of(sglang, {}).fc_skip_at_hidden_width


def test_read_ids_validates_the_config_value():
    assert read_ids(nested([1, 2]), "nested") == (1, 2)
    assert read_ids({"eagle_config": None}, "nested") is None
    assert read_ids({"eagle_aux_hidden_state_layer_ids": None}, "top_level") is None
    for bad in ([1, "2"], [True, 2], "1,2", 3):
        with pytest.raises(BadConvention, match="eagle_aux_hidden_state_layer_ids must be a list of integers"):
            read_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": bad}}, "nested")
    assert set(ID_PLACES) == {"nested", "top_level", "nested_layer_ids", "dflash_target_layer_ids",
                              "dspark_target_layer_ids", "target_layer_ids", "dflash_layer_ids", "dspark_config_ids",
                              "aux_hidden_state_layer_ids"}


# ---------------------------------------------------------------------------- loading user files


def minimal(**over):
    data = {"schema": SCHEMA, "name": "inhouse", "kind": "engine", "version": "1", "source": "our fork @abc",
            "ids_from": ["nested"], "rules": {"r": {"default_ids": "[2, N // 2, N - 3]", "explicit": [{"shift": 1}]}},
            "fallback_rule": "r"}
    data.update(over)
    return data


def test_a_user_convention_file_resolves(tmp_path):
    f = tmp_path / "inhouse.json"
    f.write_text(json.dumps(minimal(order="config")))
    conv = get_convention(str(f), "engine")
    assert conv.name == "inhouse" and conv.path == str(f)
    assert boundaries(conv.resolve(nested([9, 0, 4]), "AnyArch", 12)) == [10, 1, 5]


@pytest.mark.parametrize("over, message", [
    ({"schema": "eagle-audit/convention/0"}, "'schema' must be"),
    ({"colour": "red"}, "unknown key\\(s\\) colour"),
    ({"kind": "server"}, "kind must be 'trainer' or 'engine'"),
    ({"ids_from": ["sideways"]}, "ids_from: unknown place 'sideways'"),
    ({"order": "random"}, "order must be 'ascending' or 'config'"),
    ({"rules": {"r": {"default_ids": "[2, M]"}}}, "rules.r: unknown name 'M'"),
    ({"rules": {"r": {"default_ids": "[1]", "shfit": 1}}}, "rules.r: unknown key\\(s\\) shfit"),
    ({"rules": {"r": {}}}, "rules.r: missing key 'default_ids'"),
    ({"fallback_rule": "nope"}, "fallback_rule names rule 'nope'"),
    ({"architectures": {"LlamaForCausalLM": "nope"}}, "LlamaForCausalLM names rule 'nope'"),
    ({"draft_flags": {"fc_nrom": {"honoured": True}}}, "draft_flags: unknown flag 'fc_nrom'"),
    ({"tree_drafts": {"attention": "by_parent"}}, "tree_drafts.attention: unknown mode 'by_parent'"),
    ({"tree_drafts": {"mode": "kv_by_slot"}}, "tree_drafts must be"),
    ({"draft_flags": {"fc_norm": {"semantics": "head"}}}, "only norm_output takes one of carried, head"),
    ({"draft_flags": {"norm_output": {"read": ["sideways"]}}}, "draft_flags.norm_output.read: places are"),
    ({"rope_scaling": ["longrope"]}, "rope_scaling: known types are"),
    ({"captures_through": {"engine": "sglang"}}, "captures_through must be an object with 'engine' and 'version'"),
    ({"refuses": [{"kinds": ["dspark"], "error": "ValueError", "at": "start-up"}]}, "refuses: needs at, error, message"),
    ({"refuses": [{"error": "E", "message": "m", "at": "start-up"}]}, "refuses: a refusal names kinds"),
    ({"refuses": [{"kinds": ["dspork"], "error": "E", "message": "m", "at": "start-up"}]}, "refuses: kinds must be"),
    ({"refuses": [{"kinds": ["dspark"], "when": "1", "error": "E", "message": "m", "at": "start-up"}]},
     "refuses: unknown key\\(s\\) when"),
    ({"draft_weights": {"lm_head": {"policy": "shared"}}}, "draft_weights.lm_head: needs policy"),
    ({"draft_weights": {"norm": {"policy": "own"}}}, "draft_weights: unknown weight 'norm'"),
    ({"draft_weights": ["target"]}, "draft_weights: a JSON object"),
])
def test_malformed_convention_files_are_rejected_naming_file_and_key(tmp_path, over, message):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(minimal(**over)))
    with pytest.raises(BadConvention, match=message) as info:
        load_convention_file(f)
    assert str(f) in info.value.message


def test_a_refused_draft_is_the_wiring_failure_whatever_its_ids(tmp_path):
    """``refuses``: an engine that refuses a kind or class of draft at start-up (vLLM's V1 runner: DSpark, DFlash
    candidate-head drafts, mixed sliding/full DFlash drafts; tests/engine_wheels/test_vllm_v1_block_engine.py runs
    the engine's own check); it comes before an architecture without capture (config validation runs first)."""
    conv = get_convention("vllm-v1-dflash", "engine")
    dflash = {"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [1, 14, 26]}}
    assert conv.resolve(dflash, LLAMA, 30).failure is None
    for cfg, message in (({"architectures": ["Qwen3DSparkModel"], "dspark_target_layer_ids": [1, 14, 26]}, "dspark"),
                         ({"speculators_model_type": "dspark", "aux_hidden_state_layer_ids": [2]}, "dspark"),
                         ({**dflash, "architectures": ["DFlash2DraftModel"]}, "DFlash candidate-head drafts"),
                         ({**dflash, "layer_types": ["sliding_attention", "full_attention"]}, "mixed sliding/full")):
        for arch in (LLAMA, "Gemma3ForCausalLM"):  # Gemma3: no EAGLE-3 interface
            w = conv.resolve(cfg, arch, 30)
            assert w.failure is not None and w.failure.at == "start-up" and message in w.failure.message, (cfg, arch)
    assert conv.resolve({**dflash, "layer_types": ["sliding_attention"] * 2}, LLAMA, 30).failure is None
    f = tmp_path / "refusing.json"
    f.write_text(json.dumps(minimal(refuses=[{"architectures": ["Odd"], "error": "E", "message": "no", "at": "start-up"}])))
    user = load_convention_file(f)
    assert user.resolve({"architectures": ["Odd"]}, LLAMA, 30).failure.text() == "E: no"
    assert user.resolve({"architectures": ["Even"]}, LLAMA, 30).failure is None


def test_vllm_v1_block_ids_part_from_the_v2_runners():
    """The V1 runner reads DFlash ids its own way (gpu_model_runner.py _get_eagle3_aux_layers_from_config): no
    top-level target_layer_ids, and a non-empty eagle_config overrides dflash_config (tests/engine_wheels/
    test_vllm_v1_block_engine.py executes both wheels' code)."""
    v1, v2 = get_convention("vllm-v1-dflash", "engine"), get_convention("vllm-dflash", "engine")
    base = {"architectures": ["DFlashDraftModel"]}
    for cfg, want_v1, want_v2 in (
            ({**base, "dflash_config": {"target_layer_ids": [3, 9, 20]}}, [4, 10, 21], [4, 10, 21]),
            ({**base, "target_layer_ids": [3, 9, 20]}, [2, 18, 33], [4, 10, 21]),
            ({**base, "dflash_config": {"target_layer_ids": [3, 9, 20]}, "eagle_config": {"use_aux_hidden_state": True}},
             [2, 18, 33], [4, 10, 21]),
            ({**base, "dflash_config": {"target_layer_ids": [3, 9, 20]},
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [5, 6, 7]}}, [5, 6, 7], [4, 10, 21])):
        assert (boundaries(v1.resolve(cfg, LLAMA, 36)), boundaries(v2.resolve(cfg, LLAMA, 36))) == (want_v1, want_v2)


def test_tree_drafts_per_engine():
    """SGLang reads draft keys by slot; vLLM 0.33.0 drafts chains only; TensorRT-LLM declares nothing."""
    assert get_convention("sglang", "engine").tree_drafts.attention == "kv_by_slot"
    assert get_convention("vllm", "engine").tree_drafts.attention is None
    assert get_convention("vllm-v1", "engine").tree_drafts.attention is None
    assert get_convention("trtllm", "engine").tree_drafts is None


def test_missing_keys_and_broken_json(tmp_path):
    data = minimal()
    del data["source"]
    f = tmp_path / "nosource.json"
    f.write_text(json.dumps(data))
    with pytest.raises(BadConvention, match="missing key 'source'"):
        load_convention_file(f)
    g = tmp_path / "broken.json"
    g.write_text('{"schema": ')
    with pytest.raises(BadConvention, match="not valid JSON"):
        load_convention_file(g)
    h = tmp_path / "list.json"
    h.write_text("[]")
    with pytest.raises(BadConvention, match="expected a JSON object"):
        load_convention_file(h)
    with pytest.raises(UnknownConvention, match="no such convention file"):
        load_convention_file(tmp_path / "absent.json")


def test_parse_convention_checks_every_expression_at_load_time():
    with pytest.raises(BadConvention, match="unsupported call"):
        parse_convention(minimal(rules={"r": {"default_ids": "[2]", "max_capture": "open(1)"}}), "x.json")


def test_probes_dir_honours_the_environment(tmp_path, monkeypatch):
    (tmp_path / "only.json").write_text(json.dumps(minimal(name="only")))
    monkeypatch.setenv("EAGLE_AUDIT_PROBES", str(tmp_path))
    assert probes_dir() == tmp_path
    assert list(builtin_conventions("engine")) == ["only"]
    assert builtin_conventions("trainer") == {}
    monkeypatch.setenv("EAGLE_AUDIT_PROBES", str(tmp_path / "empty"))
    assert probes_dir() == Path(__file__).resolve().parents[2] / "probes"


@pytest.mark.full
def test_a_target_install_finds_its_convention_files(tmp_path):
    """``pip install --no-deps --target DIR .`` puts the convention files in DIR/share/eagle-audit/probes, beside the
    package, not under the interpreter's prefix: the installed package finds them there, and the CLI runs."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    target = tmp_path / "site"
    import importlib.util

    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []  # else pip fetches it
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *offline, "--target",
                    str(target), str(root)], check=True, cwd=tmp_path, capture_output=True)
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", "from eagle_audit.conventions import probes_dir; print(probes_dir())"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == str(target / "share/eagle-audit/probes"), out.stderr
    assert sorted(p.name for p in Path(out.stdout.strip()).glob("*.json")) == sorted(
        p.name for p in (root / "probes").glob("*.json"))


def test_draft_weights_are_kept(tmp_path):
    """``draft_weights``: how an engine release loads an EAGLE-3 draft's own embed_tokens / lm_head (vLLM before
    PR #28549 replaced them with the target's when the shapes agreed; probed by eagle_audit/probe/vllm_release.py)."""
    f = tmp_path / "old.json"
    weights = {"embed_tokens": {"policy": "target_if_same_shape", "source": "eagle.py:873"},
               "lm_head": {"policy": "own_if_in_checkpoint", "source": "eagle.py:1093"}}
    f.write_text(json.dumps(minimal(draft_weights=weights)))
    assert load_convention_file(f).draft_weights == weights
    f.write_text(json.dumps(minimal()))
    assert load_convention_file(f).draft_weights is None
