"""DRAFT_CONFIG_KEY against the engines' own config reading and draft constructors, executed from the wheels
(tests/wheels.py): what eagle-audit says an engine does with a draft config that lacks a key is what the engine's
code does with it (transformers' config class, as the engines build it; SGLang 0.5.23 and vLLM 0.33.0 draft
classes compiled out of their wheels, parallel layers stubbed to record their sizes)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from tests.engine_wheels.draft_classes_engine import Obj, Rec
from tests.engine_wheels.sglang_engine import _draft_model_class
from tests.wheels import WheelSource

SGLANG_MODEL = "sglang/srt/models/llama_eagle3.py"
VLLM_MODEL = "vllm/model_executor/models/llama_eagle3.py"


def hf_config(draft) -> object:
    """The draft's config.json as both engines build it: transformers' AutoConfig.from_pretrained."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(draft))


def finding(audit, target, draft, engine):
    r = audit(target, draft, engine=engine, static=True)
    return [f for f in r.findings if f.code == "DRAFT_CONFIG_KEY"]


def test_both_engines_read_a_plain_draft_config_with_autoconfig(sglang_src, vllm_src):
    assert "config = AutoConfig.from_pretrained(" in sglang_src.text("sglang/srt/utils/hf_transformers/config.py")
    assert "config = AutoConfig.from_pretrained(" in vllm_src.text("vllm/transformers_utils/config.py")


def test_no_model_type(config_only_target, make_draft, audit):
    draft = make_draft(nested_ids=[1, 14, 26], drop=("model_type",))
    with pytest.raises(ValueError) as e:
        hf_config(draft)
    [f] = finding(audit, config_only_target("LlamaForCausalLM", 30), draft, "sglang")
    assert str(e.value).split(" Should")[0] in f.what  # "Unrecognized model in DIR."
    assert "Should have a `model_type` key in its config.json" in str(e.value)


def sglang_eagle3_init(src: WheelSource, config):
    ns = {"torch": torch, "nn": torch.nn, "copy": copy, "Optional": None, "LlamaModel": Rec, "ParallelLMHead": Rec,
          "LogitsProcessor": Rec, "add_prefix": lambda name, prefix: name,
          "get_parallel": lambda: Obj(pp_group=None), "get_spec": lambda: Obj(speculative_draft_window_size=None)}
    cls = src.cls(SGLANG_MODEL, "LlamaForCausalLMEagle3", ("__init__",), (torch.nn.Module,), ns)
    return cls(config)


def test_sglang_without_draft_vocab_size(sglang_src, config_only_target, make_draft, audit):
    draft = make_draft(nested_ids=[1, 14, 26], drop=("draft_vocab_size",))
    with pytest.raises(AttributeError) as e:
        sglang_eagle3_init(sglang_src, hf_config(draft))
    [f] = finding(audit, config_only_target("LlamaForCausalLM", 30), draft, "sglang")
    assert f"AttributeError: {e.value}" in f.what
    # null is read as absent: lm_head sized from vocab_size, no error (the audit has no finding)
    null = make_draft(nested_ids=[1, 14, 26], draft_vocab=None)
    model = sglang_eagle3_init(sglang_src, hf_config(null))
    assert model.lm_head.args[0] == 512 and model.load_lm_head_from_target
    assert finding(audit, config_only_target("LlamaForCausalLM", 30), null, "sglang") == []


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers"])
def test_sglang_builds_the_config_class_default(sglang_src, config_only_target, make_draft, audit, key):
    draft = make_draft(nested_ids=[1, 14, 26], drop=(key,))
    model = _draft_model_class(sglang_src)(hf_config(draft))
    [f] = finding(audit, config_only_target("LlamaForCausalLM", 30), draft, "sglang")
    if key == "hidden_size":
        assert f"builds fc.weight for {model.fc.out_features} on axis 0" in f.what and model.fc.out_features == 4096
    else:
        assert f"builds {len(model.layers)} decoder layer(s)" in f.what and len(model.layers) == 32


def vllm_eagle3_init(src: WheelSource, config, target_vocab: int = 512):
    ns = {"torch": torch, "nn": torch.nn, "LlamaModel": Rec, "ParallelLMHead": Rec, "LogitsProcessor": Rec,
          "get_draft_quant_config": lambda c: None, "maybe_prefix": lambda prefix, name: name, "VllmConfig": object}
    cls = src.cls(VLLM_MODEL, "Eagle3LlamaForCausalLM", ("__init__",), (torch.nn.Module,), ns)
    vllm_config = Obj(speculative_config=Obj(draft_model_config=Obj(hf_config=config), parallel_drafting=False),
                      model_config=Obj(get_total_num_hidden_layers=lambda: 30, get_vocab_size=lambda: target_vocab))
    return cls(vllm_config=vllm_config)


def test_vllm_without_draft_vocab_size_sizes_lm_head_from_vocab_size(vllm_src, config_only_target, make_draft, audit):
    draft = make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27], drop=("draft_vocab_size",))
    model = vllm_eagle3_init(vllm_src, hf_config(draft))
    [f] = finding(audit, config_only_target("LlamaForCausalLM", 30), draft, "vllm")
    assert f"builds lm_head for {model.lm_head.args[0]} on axis 0" in f.what and model.lm_head.args[0] == 512


def test_vllm_without_vocab_size_takes_the_default(vllm_src, config_only_target, make_draft, audit):
    draft = make_draft(nested_ids=[1, 14, 26], top_level_ids=[2, 15, 27], drop=("vocab_size",))
    config = hf_config(draft)
    vllm_eagle3_init(vllm_src, config)
    [f] = finding(audit, config_only_target("LlamaForCausalLM", 30), draft, "vllm")
    assert f"vocab_size {config.vocab_size} (absent: LlamaConfig's default)" in f.what
    assert "self.config.vocab_size," in vllm_src.text(VLLM_MODEL)  # compute_logits scatters into config.vocab_size columns
    assert json.loads((draft / "config.json").read_text()).get("vocab_size") is None
