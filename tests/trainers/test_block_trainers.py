"""Which boundary each DFlash id means when the trainers train, checked by running their code (issue 17):

* z-lab ``dflash`` 0.1.0 (installed ``--no-deps`` into the test cache): its ``extract_context_feature`` on a tiny
  Qwen3 target's ``output_hidden_states``, against the states eagle-audit captures for the ids under
  probes/dflash.json (id -1 the embedding, id N-1 the post-norm state); its ``DFlashDraftModel`` default ids and a
  checkpoint it saves, read back as a DFlash draft;
* SpecForge 0.2.0: ``extract_context_feature``, ``build_target_layer_ids`` (modeling/draft/dflash.py) and
  ``resolve_dflash_capture_layers`` (algorithms/model_providers.py), compiled out of the wheel;
* nvidia-modelopt 0.47.0: ``build_target_layer_ids`` (plugins/modeling_dflash.py), compiled out of the wheel;
* speculators 0.9.0: the DFlash converter's id translation (``convert/dflash/converter.py``
  ``DFlashConverter._build_config``) on a z-lab checkpoint, and the converted draft audited.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from tests import wheels
from eagle_audit import expr
from eagle_audit.conventions import get_convention
from eagle_audit.draft.read import read_draft

pytestmark = pytest.mark.full

DEFAULT = get_convention("dflash", "trainer").rules["hf_out_k"].default_ids


@pytest.fixture(scope="module")
def zlab():
    return wheels.import_from(wheels.installed(wheels.dflash_wheel()), "dflash.model")


def test_zlab_ids_are_the_outputs_of_layers_and_n_minus_1_is_post_norm(zlab, tiny_targets):
    from eagle_audit.capture import capture_states
    from eagle_audit.target import load_target

    tiny = tiny_targets["qwen3"]
    target = load_target(str(tiny.path))
    n = target.info.num_layers
    ids = torch.tensor([[5, 17, 42, 99, 7, 3]])
    conv = get_convention("dflash", "trainer")
    for layer_ids in ([-1, 0, 1], [1, n - 2, n - 1], [0, n // 2, n - 1]):
        cfg = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 3,
               "dflash_config": {"target_layer_ids": layer_ids}}
        states = conv.resolve(cfg, tiny.architecture, n).states
        with torch.inference_mode():
            out = target.model(input_ids=ids, output_hidden_states=True)
            theirs = zlab.extract_context_feature(out.hidden_states, layer_ids)  # z-lab's own selection
            caps = capture_states(target, ids, states)
        ours = torch.cat([caps[s] for s in states], dim=-1)
        assert torch.allclose(theirs.float(), ours.float(), atol=1e-5), (layer_ids, [s.label() for s in states])
    assert states[-1].normed and states[-1].boundary == n  # id N-1: hidden_states[N], after the final norm


def test_zlab_default_ids_and_a_saved_checkpoint(zlab, tmp_path):
    import transformers as T

    for n, d in ((8, 1), (8, 3), (36, 5), (61, 4)):
        cfg = T.Qwen3Config(num_hidden_layers=d, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=512, head_dim=8, num_target_layers=n, block_size=16)
        model = zlab.DFlashDraftModel(cfg)
        assert list(model.target_layer_ids) == expr.evaluate(DEFAULT, N=n, D=d), (n, d)
    cfg.architectures = ["DFlashDraftModel"]
    cfg.dflash_config = {"target_layer_ids": [1, 20, 35, 50], "mask_token_id": 3}
    model = zlab.DFlashDraftModel(cfg)
    model.save_pretrained(tmp_path / "zlab")
    draft = read_draft(str(tmp_path / "zlab"))
    assert (draft.kind, draft.layout, draft.aux_count(32)) == ("dflash", "dflash", 4)
    assert draft.block.ids["dflash_target_layer_ids"] == (1, 20, 35, 50) and draft.block.block_size == 16


def test_specforge_dflash_reads_only_dflash_config_and_the_layer_outputs():
    src = wheels.WheelSource(wheels.specforge_wheel())
    path = "specforge/modeling/draft/dflash.py"
    build = src.function(path, "build_target_layer_ids", {})
    extract = src.function(path, "extract_context_feature", {"torch": torch})
    for n in range(4, 40):
        for d in range(1, 6):
            assert build(n, d) == expr.evaluate(DEFAULT, N=n, D=d)
    hidden = [torch.full((1, 2, 1), float(k)) for k in range(9)]  # hidden_states[k] tagged k
    assert extract(hidden, [0, 3, 7]).flatten().tolist()[:3] == [1.0, 4.0, 8.0]  # id k -> hidden_states[k + 1]
    resolve = src.function("specforge/algorithms/model_providers.py", "resolve_dflash_capture_layers", {})
    assert resolve(None, {"dflash_config": {"target_layer_ids": [1, 5]}}, None) == [1, 5]
    with pytest.raises(ValueError, match="does not define target capture layer ids"):
        resolve(None, {"target_layer_ids": [1, 5]}, None)  # the top level is not read
    conv = get_convention("specforge-dflash", "trainer")
    assert conv.ids_from == ("dflash_target_layer_ids",)


def test_modelopt_default_ids():
    src = wheels.WheelSource(wheels.modelopt_wheel())
    build = src.function("modelopt/torch/speculative/plugins/modeling_dflash.py", "build_target_layer_ids", {})
    conv = get_convention("modelopt-dflash", "trainer").rules["hf_out_k"]
    for n in range(4, 40):
        for d in range(1, min(n, 6) + 1):
            assert build(n, d) == expr.evaluate(conv.default_ids, N=n, D=d), (n, d)
    text = src.text("modelopt/torch/speculative/plugins/hf_dflash.py")
    assert "raw_outputs.hidden_states[lid + offset]" in text and "offset = 1" in text  # the cited capture


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


def test_speculators_dflash_converter_adds_one_and_drops_the_final_id(tmp_path, audit, config_only_target):
    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    sys.modules.setdefault("loguru", types.SimpleNamespace(logger=_Logger()))  # the converter's logger only
    from tests.trainers.conftest import import_trainers

    converter = import_trainers(site, ("speculators.convert.dflash.converter",))[
        "speculators.convert.dflash.converter"].DFlashConverter()
    n = 36
    target = config_only_target("Qwen3ForCausalLM", n, "qwen3")
    source = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 3, "hidden_size": 32,
              "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
              "head_dim": 8, "block_size": 16, "num_target_layers": n,
              "dflash_config": {"target_layer_ids": [1, 17, n - 1], "mask_token_id": 3}}
    config = converter._build_config(source, str(target), None)
    assert config.aux_hidden_state_layer_ids == [2, 18]  # +1, and the id whose aux would be N is gone
    trained = get_convention("dflash", "trainer").resolve(source, "Qwen3ForCausalLM", n).states
    converted = get_convention("speculators-dflash", "trainer").resolve(
        {"aux_hidden_state_layer_ids": config.aux_hidden_state_layer_ids}, "Qwen3ForCausalLM", n).states
    assert [s.label() for s in trained] == ["B2", "B18", "B36+norm"]
    assert [s.label() for s in converted] == ["B2", "B18"]  # the post-norm plane is dropped with its id
    json.dumps(config.model_dump(mode="json"))  # a config the loader reads
