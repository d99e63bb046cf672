"""eagle_audit/inputs.py: what is checked before any weight loads (issue 43): a target directory without a
tokenizer, and (with provenance's release detection) a server that cannot be reached."""

import json
import time

import pytest

from eagle_audit.errors import AuditError
from eagle_audit.inputs import AuditInputs, check_tokenizer


def test_a_target_without_tokenizer_is_named_before_its_weights_load(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 1000}))
    (tmp_path / "model.safetensors").write_bytes(b"not read")  # never opened: the check comes first
    with pytest.raises(AuditError) as e:
        check_tokenizer(AuditInputs(target=str(tmp_path), draft="d"))
    assert str(tmp_path) in e.value.message and "tokenizer.json" in e.value.message and "prompt_ids" in e.value.hint
    (tmp_path / "tokenizer.json").write_text("{}")
    check_tokenizer(AuditInputs(target=str(tmp_path), draft="d"))  # present: nothing said


def test_an_unreachable_states_server_stops_the_command_before_the_target_loads(cli):
    t0 = time.monotonic()
    res = cli("--states-server", "http://127.0.0.1:9")
    assert res.exit_code == 2 and "unreachable" in res.stderr and "before the target loads" in res.stderr
    assert time.monotonic() - t0 < 30 and res.stdout == ""
