"""Loading targets (HF directory, GGUF cache) and finding their decoder-layer stack."""

import json
import os
import re
import shutil

import pytest
import torch
import torch.nn as nn

from eagle_audit.errors import AuditError, BadCheckpoint, InputNotFound, UnknownArchitecture
from eagle_audit.target import (_gguf_cache, find_layer_stack, load_target, materialise, parse_dtype, read_config,
                                target_info)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_target_info_reads_the_text_config(tiny_targets, arch_key):
    key = arch_key
    t = tiny_targets[key]
    info = target_info(str(t))
    assert info.architecture == t.architecture
    assert info.num_layers == t.num_layers
    assert info.hidden_size == t.hidden_size == 32
    assert info.vocab_size == 512
    assert len(info.config_sha256) == 64
    assert info.first_k_dense_replace == (3 if key == "deepseek_v3" else None)


def test_layer_stack_is_found_for_every_architecture(tiny_targets, arch_key):
    t = tiny_targets[arch_key]
    loaded = load_target(str(t))
    stack = loaded.stack
    assert stack.path == t.stack_path
    assert len(stack) == t.num_layers
    assert stack.layers is loaded.model.get_submodule(t.stack_path)
    assert all(type(layer).__name__.endswith("DecoderLayer") for layer in stack.layers)
    parent = loaded.model.get_submodule(t.stack_path.rsplit(".", 1)[0])
    assert stack.final_norm is parent.norm
    if t.has_tokenizer:
        assert len(loaded.tokenizer("hi")["input_ids"]) == 2  # the tiny byte-level tokenizer
    else:  # transformers may build an empty tokenizer for a model saved without one
        assert loaded.tokenizer is None or loaded.tokenizer("hi")["input_ids"] == []
    assert loaded.device == "cpu" and loaded.dtype == "float32"
    assert not loaded.model.training


def test_deepseek_stack_has_dense_then_moe_layers(tiny_targets):
    stack = load_target(str(tiny_targets["deepseek_v3"])).stack
    kinds = [type(layer.mlp).__name__ for layer in stack.layers]
    assert len(kinds) == 61
    assert kinds[:3] == ["DeepseekV3MLP"] * 3
    assert set(kinds[3:]) == {"DeepseekV3MoE"}


def test_dtype_is_applied(tiny_targets):
    loaded = load_target(str(tiny_targets["llama"]), dtype="bfloat16")
    assert loaded.dtype == "bfloat16"
    assert loaded.stack.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.lin(x)


class _NoNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList(_Block() for _ in range(n))
        self.head = nn.Linear(4, 4)


class _Wrapper(nn.Module):
    """A vision stack of the same length with its own norm, deeper than the text stack."""

    def __init__(self, n):
        super().__init__()
        self.vision = nn.Module()
        self.vision.encoder = nn.Module()
        self.vision.encoder.blocks = nn.ModuleList(_Block() for _ in range(n))
        self.vision.encoder.norm = nn.LayerNorm(4)
        self.text = nn.Module()
        self.text.layers = nn.ModuleList(_Block() for _ in range(n))
        self.text.norm = nn.LayerNorm(4)


def test_no_findable_stack_is_a_clear_unknown_architecture():
    with pytest.raises(UnknownArchitecture, match="_NoNorm: no decoder-layer stack found "
                                                  "\\(a ModuleList of 3 layers beside a final norm\\)"):
        find_layer_stack(_NoNorm(3), 3)


def test_a_stack_of_the_wrong_length_is_not_taken(tiny_targets):
    model = load_target(str(tiny_targets["qwen3"])).model
    with pytest.raises(UnknownArchitecture, match="ModuleList of 5 layers"):
        find_layer_stack(model, 5)


def test_the_shallowest_stack_beside_a_norm_wins():
    model = _Wrapper(4)
    stack = find_layer_stack(model, 4)
    assert stack.path == "text.layers"
    assert stack.final_norm is model.text.norm


# ---------------------------------------------------------------------------- inputs


def test_missing_paths(tmp_path):
    with pytest.raises(InputNotFound, match="no such file or directory"):
        target_info(str(tmp_path / "nope"))
    with pytest.raises(InputNotFound, match="no such GGUF file"):
        target_info(str(tmp_path / "model.gguf"))


def test_a_directory_without_config_is_not_a_model(tmp_path):
    with pytest.raises(BadCheckpoint, match="no config.json in this directory"):
        load_target(str(tmp_path))
    f = tmp_path / "weights.bin"
    f.write_bytes(b"\0")
    with pytest.raises(BadCheckpoint, match="expected a model directory, a hub id or a .gguf file"):
        target_info(str(f))


def test_hub_id_not_in_the_local_cache_is_not_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(InputNotFound, match="not a hub id in the local cache \\(no download is attempted\\)"):
        target_info("nobody-here/no-such-model")


def test_unreadable_config_is_bad_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(BadCheckpoint, match="unreadable config"):
        read_config(str(tmp_path))


def test_a_config_its_own_class_rejects_is_bad_checkpoint(tmp_path):
    """A config class that validates itself (huggingface_hub's strict dataclasses, not a ValueError) and rejects
    the file: one line naming it, never a traceback."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if "glm5_next" not in CONFIG_MAPPING_NAMES:
        pytest.skip("transformers without GLM-5 Next (a strict config class)")
    # DSA attention layers with a rotary part: Glm5NextConfig.validate_architecture refuses it
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "glm5_next", "num_attention_heads": 4,
                                                      "num_key_value_heads": 2}))
    with pytest.raises(BadCheckpoint, match=f"{re.escape(str(tmp_path))}: unreadable config \\(StrictDataclass"):
        read_config(str(tmp_path))


def test_truncated_weights_are_bad_checkpoint(tiny_targets, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_targets["qwen3"].path, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(BadCheckpoint, match="the weights cannot be loaded") as info:
        load_target(str(broken))
    assert str(broken) in info.value.message


def test_architecture_from_model_type_when_the_config_names_none(tiny_targets, tmp_path):
    cfg = json.loads((tiny_targets["llama"].path / "config.json").read_text())
    cfg.pop("architectures")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert target_info(str(tmp_path)).architecture == "LlamaForCausalLM"


@pytest.mark.parametrize("name, device, expected", [
    ("auto", "cpu", torch.float32), ("auto", "cuda", torch.bfloat16), ("bf16", "cpu", torch.bfloat16),
    ("float16", "cpu", torch.float16), ("fp32", "cuda", torch.float32),
])
def test_parse_dtype(name, device, expected):
    assert parse_dtype(name, device) == expected


def test_bad_dtype_and_device(tiny_targets):
    with pytest.raises(AuditError, match="^`dtype`: unknown dtype 'int8'"):
        parse_dtype("int8", "cpu")
    with pytest.raises(AuditError, match="^`device`: 'tpu' is not cpu or cuda"):
        load_target(str(tiny_targets["qwen3"]), device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(AuditError, match="^`device='cuda'`: no CUDA device"):
            load_target(str(tiny_targets["qwen3"]), device="cuda")


# ---------------------------------------------------------------------------- the real target (GGUF)


def test_gguf_target_is_converted_once_into_the_cache(smollm2_path, audit_cache):
    from pathlib import Path

    cached = _gguf_cache(Path(smollm2_path))
    assert cached.parent == audit_cache / "gguf"
    weights = cached / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert materialise(smollm2_path) == cached  # the second call reuses the conversion
    assert weights.stat().st_mtime_ns == stamp
    assert not cached.with_name(cached.name + ".tmp").exists()
    info = target_info(smollm2_path)
    assert (info.architecture, info.num_layers, info.hidden_size) == ("LlamaForCausalLM", 30, 576)
    assert info.vocab_size == 49152


def test_gguf_target_loads_with_its_tokenizer(smollm2):
    assert smollm2.info.name.endswith(".gguf")
    assert smollm2.stack.path == "model.layers" and len(smollm2.stack) == 30
    ids = smollm2.tokenizer("Hello")["input_ids"]
    assert ids and max(ids) < 49152


def test_hub_id_in_the_local_cache_loads_from_it(tmp_path, tiny_targets):
    """A hub id resolves through huggingface_hub's own cache layout (models--org--name/snapshots/REV,
    refs/main), offline. A fresh process, since huggingface_hub reads HF_HUB_CACHE at import."""
    import shutil
    import subprocess
    import sys

    repo = tmp_path / "hub" / "models--tiny-org--tiny-llama"
    shutil.copytree(tiny_targets["llama"].path, repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    code = ("from eagle_audit.target import load_target; t = load_target('tiny-org/tiny-llama'); "
            "print(t.info.architecture, t.info.num_layers, len(t.stack))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    n = tiny_targets["llama"].num_layers
    assert out.stdout.split() == ["LlamaForCausalLM", str(n), str(n)], out.stderr


def test_a_broken_tokenizer_is_one_line_naming_it(tiny_targets, tmp_path):
    """A target whose tokenizer files are there but unreadable was loaded with no tokenizer, and the run failed
    later with "the target has no tokenizer": now the load says which files and why, one line."""
    import shutil

    from eagle_audit.errors import BadCheckpoint
    from eagle_audit.target import load_target

    broken = tmp_path / "t"
    shutil.copytree(tiny_targets["llama"].path, broken)
    (broken / "tokenizer.json").write_text("{not json")
    (broken / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    with pytest.raises(BadCheckpoint) as info:
        load_target(str(broken))
    msg = str(info.value)
    assert msg.startswith(f"{broken}: its tokenizer (tokenizer.json, tokenizer_config.json) cannot be read (")
    assert "\n" not in msg
