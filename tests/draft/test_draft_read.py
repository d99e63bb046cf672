"""Reading EAGLE-3 drafts (three layouts) into a frozen description, and rejecting broken ones."""

import hashlib
import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from eagle_audit.draft.read import load_tensor, read_draft, read_safetensors_header
from eagle_audit.draft.write import draft_config, random_weights, vocab_map, write_draft
from eagle_audit.errors import BadCheckpoint, InputNotFound


def test_sglang_layout_draft(make_draft):
    path = make_draft(nested_ids=[1, 3, 4])
    d = read_draft(str(path))
    assert d.layout == "sglang"
    assert d.architectures == ("LlamaForCausalLMEagle3",)
    assert (d.fc_out, d.fc_in, d.hidden_size, d.num_layers) == (32, 96, 32, 1)
    assert (d.target_hidden_size, d.num_aux_hidden_states, d.vocab_size) == (32, None, 512)
    assert d.config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert d.config_sha256 == hashlib.sha256((path / "config.json").read_bytes()).hexdigest()
    assert d.use_aux_hidden_state is True
    assert d.flags == {"norm_before_fc": None, "fc_norm": None, "norm_output": None, "norm_before_residual": None}
    assert d.has_weight("midlayer.self_attn.q_proj.weight") and d.has_weight("d2t")
    assert d.aux_count(32) == 3 and d.aux_count(48) == 2 and d.aux_count(64) is None and d.aux_count(0) is None
    assert d.to_json()["fc_in"] == 96


def test_vocab_map_is_read_as_offsets(make_draft):
    used = torch.tensor([500, 3, 7, 100] + list(range(200, 324)))
    path = make_draft(edit=lambda sd: sd.update(vocab_map(used, 512)))
    v = read_draft(str(path)).vocab
    assert (v.draft_vocab_size, v.has_d2t, v.has_t2d) == (128, True, True)
    assert (v.d2t_len, v.t2d_len, v.t2d_count) == (128, 512, 128)
    assert (v.min_target_id, v.max_target_id, v.d2t_in_t2d) == (3, 500, True)


def test_vocab_map_helper():
    m = vocab_map(torch.tensor([9, 2, 5]), 10)
    assert m["d2t"].tolist() == [2, 4, 7]  # target = i + d2t[i] -> [2, 5, 9]
    assert m["t2d"].nonzero().flatten().tolist() == [2, 5, 9]


def test_full_vocab_draft_has_no_map(make_draft):
    d = read_draft(str(make_draft(draft_vocab=None)))
    assert not d.vocab.has_d2t and not d.vocab.has_t2d and d.vocab.draft_vocab_size is None
    assert not d.has_weight("d2t")


def test_speculators_layout(make_draft):
    path = make_draft(top_level_ids=[2, 4, 5], speculators=True,
                      extra={"transformer_layer_config": {"hidden_size": 32, "num_hidden_layers": 2,
                                                          "vocab_size": 512}})
    d = read_draft(str(path))
    assert d.layout == "speculators"
    assert d.verifier == "tiny"
    assert d.num_layers == 2
    assert d.config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]


def test_flags_are_read_top_level_then_nested(make_draft):
    path = make_draft(nested_ids=[1, 3, 4], extra={"use_aux_norm": True, "norm_output": False})
    cfg = json.loads((path / "config.json").read_text())
    cfg["eagle_config"].update({"norm_before_fc": True, "use_aux_hidden_state": False})
    (path / "config.json").write_text(json.dumps(cfg))
    d = read_draft(str(path))
    assert d.flags == {"norm_before_fc": True, "fc_norm": True, "norm_output": False, "norm_before_residual": None}
    assert d.use_aux_hidden_state is False


def test_original_eagle_layout_in_pytorch_bin_with_model_prefix(tmp_path):
    cfg = draft_config(hidden_size=32, target_hidden_size=32, num_aux=3, vocab_size=512, draft_vocab_size=None,
                       num_heads=4, num_kv_heads=2, intermediate_size=64)
    sd = random_weights(cfg, num_aux=3)
    cfg["architectures"] = ["LlamaForCausalLM"]
    tmp_path.joinpath("config.json").write_text(json.dumps(cfg))
    torch.save({f"model.{k}": v for k, v in sd.items()}, tmp_path / "pytorch_model.bin")
    d = read_draft(str(tmp_path))
    assert d.layout == "eagle"
    assert (d.fc_out, d.fc_in) == (32, 96)
    assert d.has_weight("fc.weight") and not any(n.startswith("model.") for n in d.weight_names)
    assert torch.equal(load_tensor(tmp_path, "fc.weight"), sd["fc.weight"])
    assert load_tensor(tmp_path, "absent") is None


def test_model_prefix_in_safetensors(tmp_path):
    cfg = draft_config(hidden_size=32, target_hidden_size=32, num_aux=2, vocab_size=512, draft_vocab_size=64,
                       num_heads=4, num_kv_heads=2, intermediate_size=64, nested_ids=[1, 2])
    sd = random_weights(cfg, num_aux=2)
    write_draft(tmp_path, cfg, {f"model.{k}": v for k, v in sd.items()})
    d = read_draft(str(tmp_path))
    assert d.fc_in == 64 and d.vocab.has_d2t and d.vocab.max_target_id == 63


# ---------------------------------------------------------------------------- bad input


def test_missing_or_not_a_directory(tmp_path):
    with pytest.raises(InputNotFound, match="no such draft directory"):
        read_draft(str(tmp_path / "nope"))
    f = tmp_path / "file.json"
    f.write_text("{}")
    with pytest.raises(BadCheckpoint, match="a draft is a directory"):
        read_draft(str(f))


def test_bad_config(tmp_path):
    with pytest.raises(BadCheckpoint, match="config.json: missing"):
        read_draft(str(tmp_path))
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(BadCheckpoint, match="config.json: not valid JSON"):
        read_draft(str(tmp_path))
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(BadCheckpoint, match="config.json: expected a JSON object"):
        read_draft(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BadCheckpoint, match="no \\*.safetensors or pytorch_model.bin weights"):
        read_draft(str(tmp_path))


def test_not_an_eagle_draft(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    save_file({"model.embed_tokens.weight": torch.zeros(4, 2)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(BadCheckpoint, match="no fc.weight: not an EAGLE-3 draft \\(weights: embed_tokens.weight"):
        read_draft(str(tmp_path))


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[: len(b) // 2], "corrupt or truncated safetensors file \\(data ends at byte"),
    (lambda b: b[:5], "shorter than its 8-byte header length"),
    (lambda b: struct.pack("<Q", 10**12) + b[8:], "header length 1000000000000 does not fit"),
    (lambda b: b[:8] + b"\xff" * (len(b) - 8), "header is not JSON"),
])
def test_corrupt_safetensors(make_draft, damage, message):
    path = make_draft(nested_ids=[1, 3, 4])
    f = path / "model.safetensors"
    f.write_bytes(damage(f.read_bytes()))
    with pytest.raises(BadCheckpoint, match=message) as info:
        read_draft(str(path))
    assert str(f) in info.value.message


def test_safetensors_entry_size_is_checked(tmp_path):
    f = tmp_path / "x.safetensors"
    save_file({"fc.weight": torch.zeros(2, 3)}, str(f))
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert read_safetensors_header(f)["fc.weight"]["shape"] == [2, 3]
    header["fc.weight"]["shape"] = [2, 4]
    text = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    assert len(text) == n
    f.write_bytes(raw[:8] + text + raw[8 + n:])
    with pytest.raises(BadCheckpoint, match="'fc.weight' holds 24 bytes, its shape needs 32"):
        read_safetensors_header(f)


def test_unreadable_pytorch_bin(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a zip")
    with pytest.raises(BadCheckpoint, match="pytorch_model.bin: unreadable PyTorch checkpoint"):
        read_draft(str(tmp_path))
