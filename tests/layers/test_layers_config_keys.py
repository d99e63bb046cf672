"""DRAFT_CONFIG_KEY: a draft config whose keys the engine's draft class sizes a module from is absent or contradicts
the weights is a finding with what the engine then does (its config class's default, or its load error), never a
match. The engines' own reading is executed from the wheels in tests/engine_wheels/test_engine_draft_config_keys.py."""

import json

import pytest


def key_findings(r):
    return [f for f in r.findings if f.code == "DRAFT_CONFIG_KEY"]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_complete_config_has_no_finding(config_only_target, make_draft, audit, engine):
    r = audit(config_only_target("LlamaForCausalLM", 30), make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27]),
              engine=engine, static=True)
    assert key_findings(r) == []


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("key, said", [
    ("hidden_size", "hidden_size 4096 (absent: LlamaConfig's default)"),
    ("num_attention_heads", "num_attention_heads 32 (absent: LlamaConfig's default)"),
    ("intermediate_size", "intermediate_size 11008 (absent: LlamaConfig's default)"),
    ("num_key_value_heads", "num_key_value_heads 4 (absent: LlamaConfig's default)"),
    ("num_hidden_layers", "builds 32 decoder layer(s)"),
    ("model_type", "ValueError: Unrecognized model in"),
])
def test_a_missing_key_is_an_error_naming_what_the_engine_builds(config_only_target, make_draft, audit, engine, key, said):
    r = audit(config_only_target("LlamaForCausalLM", 30), make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27],
                                                                     drop=(key,)), engine=engine, static=True)
    [f] = key_findings(r)
    assert r.verdict == "mismatch" and f.severity == "error"
    assert said in f.what and key in f.fix
    if key in ("hidden_size", "intermediate_size", "num_hidden_layers"):
        assert f"{key}: {dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1)[key]}" in f.fix


def test_draft_vocab_size_absent(config_only_target, make_draft, audit):
    target = config_only_target("LlamaForCausalLM", 30)
    draft = make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27], drop=("draft_vocab_size",))
    [sg] = key_findings(audit(target, draft, engine="sglang", static=True))
    assert "AttributeError: 'LlamaConfig' object has no attribute 'draft_vocab_size'" in sg.what
    assert "(128)" in sg.fix  # lm_head.weight's rows
    [vl] = key_findings(audit(target, draft, engine="vllm", static=True))  # vLLM takes vocab_size: lm_head 512 rows
    assert "builds lm_head for 512" in vl.what and "[128, 32]" in vl.what


def test_draft_vocab_size_null_is_read_as_absent_by_sglang(config_only_target, make_draft, audit):
    r = audit(config_only_target("LlamaForCausalLM", 30), make_draft(nested_ids=[1, 14, 26], draft_vocab=None),
              engine="sglang", static=True)
    assert key_findings(r) == []


def test_a_contradicting_key(config_only_target, make_draft, audit):
    draft = make_draft(nested_ids=[1, 14, 26])
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "draft_vocab_size": 300}))
    [f] = key_findings(audit(config_only_target("LlamaForCausalLM", 30), draft, engine="sglang", static=True))
    assert "builds lm_head for 300" in f.what and "draft_vocab_size 300" in f.what and "[128, 32]" in f.what
    assert f.fix.startswith("Write draft_vocab_size: 128 in config.json")
    assert "Attempted to load weight" in f.why


def test_vllm_vocab_size_absent_sizes_the_logits_wrongly(config_only_target, make_draft, audit):
    r = audit(config_only_target("LlamaForCausalLM", 30),
              make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27], drop=("vocab_size",)), engine="vllm",
              static=True)
    [f] = key_findings(r)
    assert "vocab_size 32000 (absent: LlamaConfig's default)" in f.what and "512 tokens" in f.what
    assert "index out of range" in f.why


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3", "mistral"])
def test_the_recorded_class_defaults_are_the_installed_transformers_own(model_type):
    # a static audit reads the defaults from CLASS_DEFAULTS, never importing transformers: they must be the
    # ones transformers' config class builds with, or the static and the full audit would disagree
    from transformers import CONFIG_MAPPING

    from eagle_audit.layers.config_keys import CLASS_DEFAULTS, SIZE_KEYS

    name, recorded = CLASS_DEFAULTS[model_type]
    cls = CONFIG_MAPPING[model_type]
    made = cls()
    assert name == cls.__name__
    assert recorded == {k: getattr(made, k) for k in SIZE_KEYS if getattr(made, k, None) is not None}
