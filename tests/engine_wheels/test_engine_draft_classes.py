"""The draft classes of probes/sglang.json and probes/vllm.json (eagle_audit/conventions/draft_classes.py) against the engines'
own draft constructors, config loader and registries, executed from the wheels (draft_classes_engine.py): for
every config, eagle-audit's class, fc size and draft flags are what the engine's class sets."""

from __future__ import annotations

import pytest

from tests.engine_wheels.draft_classes_engine import (VLLM_DRAFTS, hf, sglang_draft_reads, sglang_entry_classes, vllm_draft_reads,
                                  vllm_registry, vllm_view)
from eagle_audit.conventions import builtin_conventions
from eagle_audit.resolution import flags_of

SGLANG = builtin_conventions("engine")["sglang"]
VLLM = builtin_conventions("engine")["vllm"]
KIMI = ["Eagle3DeepseekV2ForCausalLM"]

FLAG_CONFIGS = [
    {}, {"fc_norm": True}, {"use_aux_norm": True}, {"fc_norm": False, "use_aux_norm": True},
    {"eagle_config": {"fc_norm": True}}, {"norm_output": True}, {"eagle_config": {"norm_output": True}},
    {"norm_before_fc": True}, {"eagle_config": {"norm_before_fc": True}},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}}, {"eagle_aux_hidden_state_layer_ids": [1, 2]},
    {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": []}}, {"eagle_aux_hidden_state_layer_ids": []},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": None}, "eagle_aux_hidden_state_layer_ids": [5]},
    {"num_aux_hidden_states": 2, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}},
    {"num_aux_layers": 1, "num_aux_hidden_states": 2}, {"norm_before_residual": True},
]




def ours(conv, cfg: dict) -> dict:
    side = conv.for_draft(cfg)
    f = flags_of(conv, cfg)
    return {"class": side.draft_class.name, "aux": side.aux_count(cfg), "fc_norm": f.fc_norm,
            "norm_output": f.norm_output, "norm_before_fc": f.norm_before_fc,
            "norm_before_residual": f.norm_before_residual}


@pytest.mark.parametrize("cfg", FLAG_CONFIGS, ids=str)
@pytest.mark.parametrize("arch", ["LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"])
def test_sglang_draft_classes(sglang_src, arch, cfg):
    cfg = {"architectures": [arch], **cfg}
    got = ours(SGLANG, cfg)
    assert got["class"] == ("kimi_k25_eagle3" if arch in KIMI else "llama_eagle3")
    want = sglang_draft_reads(sglang_src, got["class"], cfg)
    assert {k: got[k] for k in ("aux", "fc_norm", "norm_output", "norm_before_fc")} == \
        {k: want[k] for k in ("aux", "fc_norm", "norm_output", "norm_before_fc")}
    assert got["norm_before_residual"] is False  # neither SGLang class reads it


def test_sglang_kimi_class_has_no_norm_before_fc_and_needs_one_layer(sglang_src):
    text = sglang_src.text("sglang/srt/models/kimi_k25_eagle3.py")
    assert "norm_before_fc" not in text and "norm_before_residual" not in text
    assert 'raise ValueError("EAGLE3 currently only supports 1 layer")' in text
    assert SGLANG.for_draft({"architectures": KIMI}).draft_class.attention == "mla"


@pytest.mark.parametrize("cfg", FLAG_CONFIGS + [{"eagle_config": {"use_aux_hidden_state": False}}], ids=str)
@pytest.mark.parametrize("name", list(VLLM_DRAFTS))
def test_vllm_draft_classes(vllm_src, name, cfg):
    arch = {"llama_eagle3": "LlamaForCausalLMEagle3", "qwen3_eagle3": "Eagle3Qwen3ForCausalLM",
            "deepseek_eagle3": "Eagle3DeepseekV3ForCausalLM"}[name]
    cfg = {"architectures": [arch], **cfg}
    got = ours(VLLM, cfg)
    assert got["class"] == name
    want = vllm_draft_reads(vllm_src, name, hf(cfg, VLLM_DRAFTS[name][2]))
    cls = VLLM.for_draft(cfg).draft_class
    if not want["use_aux_hidden_state"]:  # the class builds no fc
        assert cls.use_aux_hidden_state == "flag"
        return
    assert want["use_aux_hidden_state"] or cls.use_aux_hidden_state == "ignored"
    assert {k: got[k] for k in want if k in got} == {k: v for k, v in want.items() if k in got}


def test_vllm_use_aux_hidden_state_false(vllm_src):
    """llama_eagle3 and qwen3_eagle3 read eagle_config.use_aux_hidden_state and build no fc; deepseek_eagle3
    does not read it (its combine_hidden_states applies fc)."""
    cfg = {"eagle_config": {"use_aux_hidden_state": False}}
    for name, kind in (("llama_eagle3", "llama"), ("qwen3_eagle3", "qwen3"), ("deepseek_eagle3", "deepseek")):
        want = vllm_draft_reads(vllm_src, name, hf(cfg, kind))
        read = VLLM.for_draft({"architectures": [{"llama_eagle3": "LlamaForCausalLMEagle3",
                                                  "qwen3_eagle3": "Eagle3Qwen3ForCausalLM",
                                                  "deepseek_eagle3": "Eagle3DeepseekV2ForCausalLM"}[name]]}).draft_class
        assert (want["fc_in"] is None) == (read.use_aux_hidden_state == "flag"), name
    text = vllm_src.text("vllm/model_executor/models/deepseek_eagle3.py")
    assert "use_aux_hidden_state" not in text


SPECULATORS = [
    ({"speculators_model_type": "eagle3"}, "llama", "llama_eagle3"),
    ({"speculators_model_type": "eagle3", "norm_before_residual": False, "fc_norm": True}, "llama", "llama_eagle3"),
    ({"speculators_model_type": "eagle3", "norm_output": True}, "qwen3", "qwen3_eagle3"),
    ({"speculators_model_type": "peagle", "mask_token_id": 3}, "llama", "llama_eagle3"),
    ({"speculators_model_type": "peagle", "mask_token_id": 3, "norm_before_residual": True}, "qwen3", "qwen3_eagle3"),
    ({"speculators_model_type": "peagle", "mask_token_id": 3, "fc_norm": True}, "llama", "llama_eagle3"),
    ({"speculators_model_type": "eagle3", "eagle_aux_hidden_state_layer_ids": [2, 5]}, "llama", "llama_eagle3"),
    ({"speculators_model_type": "eagle3"}, "deepseek_v3", None),
]


@pytest.mark.parametrize("cfg,model_type,name", SPECULATORS, ids=str)
def test_vllm_speculators_loader(vllm_src, cfg, model_type, name):
    """algos.py's own updaters give the config the draft class reads; P-EAGLE's norm_before_residual is False
    when absent (eagle3's True); an unknown model_type is refused."""
    layer = {"model_type": model_type, "hidden_size": 8, "num_hidden_layers": 1}
    # as speculators writes it: no top-level model_type, a speculators_config (vLLM takes its speculators loader
    # only then: transformers_utils/config.py:361-367)
    cfg = {**cfg, "transformer_layer_config": layer,
           "speculators_config": {"algorithm": cfg["speculators_model_type"], "verifier": {"name_or_path": "t"}}}
    view, how = VLLM.speculators_loader.view(cfg)
    if name is None:
        with pytest.raises(ValueError, match="Unsupported model_type"):
            vllm_view(vllm_src, cfg)
        assert view is None and "Unsupported model_type" in how
        assert VLLM.for_draft(cfg).draft_class is None
        return
    want = vllm_view(vllm_src, cfg)
    assert view == want
    arch = want["architectures"][0]
    assert vllm_registry(vllm_src)[arch][0] == name
    got = ours(VLLM, cfg)
    assert got["class"] == name
    kind = {"llama": "llama", "qwen3": "qwen3"}[model_type]
    reads = vllm_draft_reads(vllm_src, name, hf({k: v for k, v in want.items() if k != "model_type"}, kind))
    for key in ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual", "aux"):
        assert got[key] == reads[key], key
    if cfg["speculators_model_type"] == "peagle":
        assert got["norm_before_residual"] is bool(cfg.get("norm_before_residual", False))
        assert "pard_token" in want and flags_of(VLLM, cfg).parallel_drafting  # base.py:133-134: parallel_drafting
    else:
        assert not flags_of(VLLM, cfg).parallel_drafting


def test_registries_are_complete(vllm_src, sglang_src):
    """Every EAGLE-3 draft architecture the wheels register is in a draft class, with the right module."""
    reg = vllm_registry(vllm_src)
    classes = {a: c.name for c in VLLM.draft_classes for a in c.architectures}
    for arch, (module, _) in reg.items():
        if module in VLLM_DRAFTS:
            assert classes.get(arch) == module, arch
    for arch, name in classes.items():
        assert reg[arch][0] == name, arch
    entries = sglang_entry_classes(sglang_src)
    eagle3 = {k: v for k, v in entries.items() if "Eagle3" in k}
    assert eagle3 == {"LlamaForCausalLMEagle3": "llama_eagle3.py", "Eagle3DeepseekV2ForCausalLM": "kimi_k25_eagle3.py"}
    mine = {a: c.name for c in SGLANG.draft_classes for a in c.architectures}
    assert {a: f"{n}.py" for a, n in mine.items()} == eagle3


def test_peagle_norm_before_residual_default():
    """vLLM 0.33.0 algos.py:71-73: P-EAGLE defaults norm_before_residual to False; eagle3 (:33-35) to True."""
    layer = {"transformer_layer_config": {"model_type": "llama"}, "speculators_config": {"verifier": {"name_or_path": "t"}}}
    assert flags_of(VLLM, {"speculators_model_type": "peagle", "mask_token_id": 1, **layer}).norm_before_residual is False
    assert flags_of(VLLM, {"speculators_model_type": "eagle3", **layer}).norm_before_residual is True


def test_vllm_reads_speculators_only_without_model_type(vllm_src):
    """transformers_utils/config.py (0.33.0): the speculators config class only when the config has no model_type
    and has speculators_config; probes/vllm.json's speculators_loader.used_when says exactly that."""
    text = vllm_src.text("vllm/transformers_utils/config.py")
    assert ('model_type = config_dict.get("model_type")\n        if model_type is None:\n            model_type = (\n'
            '                "speculators"\n                if config_dict.get("speculators_config") is not None') in text
    assert VLLM.speculators_loader.absent == ("model_type",) and VLLM.speculators_loader.present == ("speculators_config",)
    eagle = vllm_src.text("vllm/transformers_utils/configs/eagle.py")
    assert 'if arch.startswith("Eagle3") or arch.endswith("Eagle3")\n                else f"Eagle3{arch}"' in eagle
    rename = VLLM.draft_architecture_rename
    assert (rename.prefix, rename.keep_prefix, rename.keep_suffix) == ("Eagle3", "Eagle3", "Eagle3")
    # the registry prints the list of architectures: "[{arch}]" with one name's repr is that list's str
    assert 'f"Model architectures {architectures} are not supported for now. "' in vllm_src.text(
        "vllm/model_executor/models/registry.py")
    assert rename.error.format(arch=repr("X")) == f"Model architectures {['X']} are not supported for now"


def test_sglang_fix_of_the_demo_names_a_registered_class(sglang_src, smollm2_path, audit):
    """--write-fixed-config for SGLang writes an architecture SGLang 0.5.23's registry has (EntryClass of
    srt/models/*.py), and a plain config at the top level (model_type, hidden_size) as its Llama class reads it."""
    from eagle_audit.demo import demo_draft
    from eagle_audit.layers.fix import merge_patch

    r = audit(smollm2_path, demo_draft(), static=True)
    patch = r.fix.patch
    assert r.fix.possible and patch["architectures"][0] in sglang_entry_classes(sglang_src)
    fixed = merge_patch(_demo_config(), patch)
    assert fixed["model_type"] == "llama" and fixed["hidden_size"] == 576 and fixed["num_hidden_layers"] == 1
    assert SGLANG.for_draft(fixed).draft_class.name == "llama_eagle3"
    assert SGLANG.load_patch(fixed) == ({}, "")  # nothing more to change for SGLang to load it


def _demo_config() -> dict:
    import json
    from pathlib import Path

    from eagle_audit.demo import demo_draft

    return json.loads((Path(demo_draft()) / "config.json").read_text())
