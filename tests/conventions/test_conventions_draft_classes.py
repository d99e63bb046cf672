"""Drafts as the engines really serve them (eagle_audit/conventions/draft_classes.py), static audits: the draft class an
engine picks changes its fc sizing and flags; P-EAGLE's defaults; drafts without aux states; config-only drafts;
modelopt's offline pipeline (the NVIDIA gpt-oss-120b case); ids a trainer refuses; converted layouts."""

from __future__ import annotations

import json

import pytest

HIDDEN, VOCAB, DRAFT_VOCAB = 32, 512, 128  # tests/conftest.py: the tiny targets and make_draft


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def labels(states):
    return [s.label() for s in states]


def note(result, start: str) -> str:
    found = [n for n in result.provenance["notes"] if n.startswith(start)]
    assert found, (start, result.provenance["notes"])
    return found[0]


def config_only(tmp_path, name: str, drop: tuple[str, ...] = (), **cfg) -> str:
    """A draft directory with config.json and no weights (what a training config or a config read before a
    download is); ``drop``: base keys left out."""
    path = tmp_path / name
    path.mkdir()
    base = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": HIDDEN,
            "target_hidden_size": HIDDEN, "num_attention_heads": 4, "num_key_value_heads": 2,
            "intermediate_size": 64, "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB}
    (path / "config.json").write_text(json.dumps({k: v for k, v in {**base, **cfg}.items() if k not in drop}))
    return str(path)


# ---------------------------------------------------------------------------- the NVIDIA gpt-oss-120b case

GPT_OSS_V3 = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [24, 30, 36], "use_aux_hidden_state": True,
                               "norm_before_fc": True}}  # sgl-project/sglang PR #32334: boundaries [24, 30, 36]


@pytest.mark.parametrize("trainer", ["modelopt", None, "modelopt-offline"])
def test_gpt_oss_120b_eagle3_v3_is_served_correctly_by_sglang(config_only_target, tmp_path, audit, trainer):
    """nvidia/gpt-oss-120b-Eagle3-v3: ids [24, 30, 36] on the 36-layer target, trained offline by modelopt on
    vLLM-dumped states (IN-k), served by SGLang 0.5.23 verbatim (max(ids) == N): accept length 2.68 in PR #32334.
    No mismatch; --trainer modelopt alone takes the offline pipeline and says why."""
    target = config_only_target("GptOssForCausalLM", 36, "gpt_oss")
    r = audit(target, config_only(tmp_path, f"v3-{trainer}", **GPT_OSS_V3), trainer=trainer, static=True)
    assert r.verdict == "match" and codes(r, "error") == [], [f.what for f in r.findings]
    assert labels(r.trained.states) == labels(r.served.states) == ["B24", "B30", "B36"]
    if trainer == "modelopt":
        why = note(r, "`trainer='modelopt'`: assumed its pipeline modelopt-offline")
        assert "contain N = 36" in why and "compute_hidden_states_vllm.py" in why and "fingerprint" in why
    if trainer is None:
        assert "SpecForge 0.2.0 never captures index N" in note(r, "trainer not given: assumed modelopt-offline")
    assert "config-only draft" in note(r, "config-only draft")


def test_modelopt_without_id_n_is_the_online_pipeline(config_only_target, tmp_path, audit):
    target = config_only_target("GptOssForCausalLM", 36, "gpt_oss")
    cfg = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 32]}}  # nvidia/gpt-oss-120b-Eagle3-long-context
    r = audit(target, config_only(tmp_path, "long", **cfg), trainer="modelopt", static=True)
    assert r.verdict == "match" and labels(r.trained.states) == ["B2", "B18", "B33"]
    tell = note(r, "`trainer='modelopt'`: assumed its pipeline modelopt (no id equals N = 36)")
    assert "`trainer='modelopt-offline'`" in tell  # a parameter reference: the CLI shows --trainer modelopt-offline
    r = audit(target, config_only(tmp_path, "long-off", **cfg), trainer="modelopt-offline", static=True)
    assert r.verdict == "mismatch" and labels(r.trained.states) == ["B1", "B17", "B32"]


# ---------------------------------------------------------------------------- no aux states

SHORT = {"eagle_config": {"use_aux_hidden_state": False}}  # nvidia/gpt-oss-120b-Eagle3-short-context


@pytest.mark.parametrize("engine", ["sglang", "vllm", "vllm-v1"])
def test_draft_without_aux_states_reads_the_last_state(config_only_target, tmp_path, audit, engine):
    """use_aux_hidden_state: false (no fc): every engine reads the flag and feeds the post-norm final state, as
    modelopt trains it (hf_eagle.py:488-494): audited, not refused."""
    target = config_only_target("GptOssForCausalLM", 36, "gpt_oss")
    r = audit(target, config_only(tmp_path, f"short-{engine}", **SHORT), engine=engine, static=True)
    assert r.verdict == "match", [f.what for f in r.findings]
    assert labels(r.trained.states) == labels(r.served.states) == ["B36+norm"]
    assert "use_aux_hidden_state is false" in note(r, "trainer not given: assumed modelopt")
    assert r.draft["fc_source"] == "none"


def test_draft_without_aux_states_under_vllm_deepseek_class(config_only_target, tmp_path, audit):
    """vLLM's deepseek_eagle3 class never reads use_aux_hidden_state and applies fc to the final state."""
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    draft = config_only(tmp_path, "ds-short", architectures=["Eagle3DeepseekV3ForCausalLM"], **SHORT)
    r = audit(target, draft, engine="vllm", static=True)
    assert "ENGINE_CRASH" in codes(r, "error")
    assert "deepseek_eagle3 does not read use_aux_hidden_state" in r.findings[codes(r).index("ENGINE_CRASH")].what
    r = audit(target, config_only(tmp_path, "ds-short-sg", architectures=["Eagle3DeepseekV2ForCausalLM"], **SHORT),
              static=True)
    assert r.verdict == "match"  # SGLang's kimi_k25_eagle3 skips fc by width


def test_a_draft_with_weights_and_no_fc(tmp_path, make_draft, tiny_targets, audit):
    def drop_fc(sd):
        del sd["fc.weight"]

    draft = make_draft(nested_ids=[1, 2, 3], extra=SHORT, edit=drop_fc)
    r = audit(tiny_targets["llama"], draft, static=True)
    assert r.verdict == "match" and labels(r.served.states) == [f"B{tiny_targets['llama'].num_layers}+norm"]
    bad = make_draft(nested_ids=[1, 2, 3], edit=drop_fc)
    from eagle_audit.draft.read import read_draft
    from eagle_audit.errors import BadCheckpoint

    with pytest.raises(BadCheckpoint, match="no fc.weight: not an EAGLE-3 draft"):
        read_draft(str(bad))


# ---------------------------------------------------------------------------- the class decides the flags

def test_kimi_mla_class_ignores_norm_before_fc(config_only_target, tmp_path, audit):
    """The same config served by SGLang's llama_eagle3 class honours norm_before_fc; by kimi_k25_eagle3 (MLA,
    architectures Eagle3DeepseekV2ForCausalLM) it does not: a draft modelopt trained with it loses its input norm."""
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    ids = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "norm_before_fc": True}}
    llama = audit(target, config_only(tmp_path, "llama-cls", **ids), trainer="modelopt", static=True)
    assert "NORM_MISMATCH" not in codes(llama)
    assert "llama_eagle3" in note(llama, "draft class:")
    mla = audit(target, config_only(tmp_path, "mla-cls", architectures=["Eagle3DeepseekV2ForCausalLM"], **ids),
                trainer="modelopt", static=True)
    (f,) = [f for f in mla.findings if f.code == "NORM_MISMATCH"]
    assert "norm_before_fc" in f.what
    assert "kimi_k25_eagle3" in note(mla, "draft class:") and "kimi_k25_eagle3.py" in note(mla, "draft class:")


def test_kimi_mla_class_sizes_fc_from_top_level_ids(config_only_target, tmp_path, audit):
    """kimi_k25_eagle3.py:48-59 counts top-level ids when the nested key is absent; llama_eagle3 does not."""
    target = config_only_target("DeepseekV3ForCausalLM", 61, "deepseek_v3")
    cfg = {"eagle_aux_hidden_state_layer_ids": [1, 29], "num_aux_hidden_states": None}
    for arch, aux in (("Eagle3DeepseekV2ForCausalLM", 2), ("LlamaForCausalLMEagle3", 3)):
        r = audit(target, config_only(tmp_path, f"top-{arch}", architectures=[arch], **cfg), trainer="modelopt",
                  static=True)
        assert r.draft["fc_in"] == 2 * HIDDEN  # the config-only fc: its 2 ids
        mism = [f for f in r.findings if f.code == "AUX_COUNT_MISMATCH" and "sizes the draft's fc" in f.what]
        assert bool(mism) == (aux != 2), arch


def _peagle(tmp_path, name: str, drop: tuple[str, ...] = ("model_type",), **extra) -> str:
    """A speculators P-EAGLE config as speculators writes it: no top-level model_type (unless ``drop`` keeps it)."""
    layer = {"model_type": "llama", "hidden_size": HIDDEN, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 64, "num_hidden_layers": 1, "vocab_size": VOCAB}
    cfg = dict(architectures=["PeagleLlamaForCausalLM"], speculators_model_type="peagle", mask_token_id=3,
               transformer_layer_config=layer, eagle_aux_hidden_state_layer_ids=[2, 4, 5],
               speculators_config={"algorithm": "peagle", "verifier": {"name_or_path": "t"}})
    return config_only(tmp_path, name, drop=drop, **{**cfg, **extra})


def test_peagle_norm_before_residual_defaults_false_in_vllm(tiny_targets, tmp_path, audit):
    """vLLM 0.33.0's P-EAGLE loader (algos.py:71-73) defaults norm_before_residual to False, as speculators trains
    it: no NORM_MISMATCH (probes/vllm.json used to say True for any speculators_model_type)."""
    r = audit(tiny_targets["llama"], _peagle(tmp_path, "peagle"), engine="vllm", static=True)
    assert "NORM_MISMATCH" not in codes(r), [f.what for f in r.findings]
    assert "via speculators_model_type 'peagle'" in note(r, "draft class:")
    eagle3 = _peagle(tmp_path, "eagle3-spec")
    cfg = json.loads((tmp_path / "eagle3-spec" / "config.json").read_text())
    cfg.update(speculators_model_type="eagle3", architectures=["Eagle3Speculator"])
    (tmp_path / "eagle3-spec" / "config.json").write_text(json.dumps(cfg))
    r = audit(tiny_targets["llama"], eagle3, engine="vllm", static=True)
    (f,) = [f for f in r.findings if f.code == "NORM_MISMATCH"]  # eagle3: the loader's True, speculators' False
    assert "norm_before_residual" in f.what


def test_speculators_config_with_top_level_model_type_vllm_cannot_load(tiny_targets, tmp_path, audit):
    """vLLM 0.32.0/0.33.0 read a config through the speculators loader only without a top-level model_type
    (transformers_utils/config.py:361-367); with one, architectures stay Eagle3Speculator, which the registry
    lacks: the real engine stops with "Model architectures ['Eagle3Speculator'] are not supported for now"
    (checked against the running engine in tests/realvllm)."""
    path = _peagle(tmp_path, "mt", drop=(), speculators_model_type="eagle3", architectures=["Eagle3Speculator"])
    for engine in ("vllm", "vllm-v1"):
        r = audit(tiny_targets["llama"], path, engine=engine, static=True)
        (f,) = [f for f in r.findings if f.code == "DRAFT_CLASS_UNSUPPORTED"]
        assert "top-level model_type 'llama'" in f.what and "are not supported for now" in f.what, f.what
        assert "'Eagle3Speculator'" in f.what
    fine = _peagle(tmp_path, "nomt", speculators_model_type="eagle3", architectures=["Eagle3Speculator"])
    r = audit(tiny_targets["llama"], fine, engine="vllm", static=True)
    assert "DRAFT_CLASS_UNSUPPORTED" not in codes(r)


@pytest.mark.parametrize("arch, served", [("LlamaForCausalLM", "llama_eagle3"), ("LlamaForCausalLMEagle3", "llama_eagle3"),
                                          ("Qwen3ForCausalLM", "qwen3_eagle3"), ("MistralForCausalLM", None)])
def test_vllm_renames_a_plain_architecture(tiny_targets, tmp_path, audit, arch, served):
    """vLLM wraps a plain draft config in EAGLEConfig, which prefixes Eagle3 unless the name already starts or ends
    with it (transformers_utils/configs/eagle.py:55-62); the registry decides on the renamed name."""
    r = audit(tiny_targets["llama"], config_only(tmp_path, arch, architectures=[arch],
                                                 eagle_aux_hidden_state_layer_ids=[1, 3, 4]), engine="vllm", static=True)
    how = note(r, "draft class:")
    if served is None:
        assert "Eagle3MistralForCausalLM" in how and "DRAFT_CLASS_UNSUPPORTED" in codes(r), how
    else:
        assert f"serves it with {served}" in how, how


def test_speculators_model_type_vllm_cannot_load(tiny_targets, tmp_path, audit):
    path = _peagle(tmp_path, "ds")
    cfg = json.loads((tmp_path / "ds" / "config.json").read_text())
    cfg["transformer_layer_config"]["model_type"] = "deepseek_v3"
    (tmp_path / "ds" / "config.json").write_text(json.dumps(cfg))
    r = audit(tiny_targets["llama"], path, engine="vllm", static=True)
    (f,) = [f for f in r.findings if f.code == "DRAFT_CLASS_UNSUPPORTED"]
    assert "Unsupported model_type deepseek_v3 for peagle speculator" in f.what


def test_converted_layout_is_said(tiny_targets, make_draft, audit):
    r = audit(tiny_targets["llama"], make_draft(top_level_ids=[2, 4, 5], speculators=True), engine="vllm", static=True)
    said = note(r, "the speculators layout is also what a conversion writes")
    assert "eagle3_converter.py" in said and "fingerprint" in said


# ---------------------------------------------------------------------------- ids a trainer refuses

@pytest.mark.parametrize("ids,embedding", [([-1, 3, 5], True), ([1, 3], False), ([1, 2, 3, 5], False)])
def test_specforge_refuses_ids_it_cannot_train(config_only_target, tmp_path, audit, ids, embedding):
    """SpecForge 0.2.0 resolve_eagle_capture_layers (model_providers.py:205-210) takes exactly three
    non-negative ids: a config claiming SpecForge trained on the embedding (-1 in SGLang's spelling) is wrong."""
    target = config_only_target("LlamaForCausalLM", 12)
    cfg = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}, "num_aux_hidden_states": len(ids)}
    r = audit(target, config_only(tmp_path, f"sf{len(ids)}{ids[0]}", **cfg), trainer="specforge", static=True)
    (f,) = [f for f in r.findings if f.code == "TRAINER_REFUSES_IDS"]
    assert f"got {ids}" in f.what and f.severity == "warning"
    assert ("the embedding output" in f.what) == embedding


# ---------------------------------------------------------------------------- config-only audits

def test_config_only_draft_needs_static(config_only_target, tmp_path, cli):
    target = config_only_target("LlamaForCausalLM", 12)
    draft = config_only(tmp_path, "cfg", eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 5, 8]})
    res = cli("--target", str(target), "--draft", draft, "--engine", "sglang", "--builtin-rules")
    assert res.exit_code == 2 and "no *.safetensors or pytorch_model.bin weights" in res.stderr
    assert "Traceback" not in res.stderr and "--static" in res.stderr
    res = cli("--target", str(target), "--draft", draft, "--static", "--builtin-rules", "--json", "-")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["draft"]["has_weights"] is False and out["draft"]["fc_in"] == 3 * HIDDEN
    assert any("not checked without the weights" in n for n in out["provenance"]["notes"])
