"""TorchSpec's HF-backend capture (lightseekorg/TorchSpec@6f21829, torchspec/models/target/eagle3_target_model.py
HFTargetModel.generate_eagle3_data), run on tiny random targets, == eagle-audit's probes/torchspec-hf.json.

TorchSpec is not on PyPI (``torchspec`` 0.0.1 is a name reservation), so CI cannot fetch it: this test runs where
``EAGLE_AUDIT_TORCHSPEC_SRC`` names a checkout of that commit (its ``torchspec/`` folder is imported module by
module, without the package ``__init__`` files, which import numba and ray) and is skipped elsewhere; the rules it
checks are cited with file:line in the convention file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from eagle_audit.api import capture, load_target
from eagle_audit.conventions import get_convention
from eagle_audit.states import State
from tests.wheels import wheel_modules

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def torchspec_root() -> Path:
    root = os.environ.get("EAGLE_AUDIT_TORCHSPEC_SRC")
    if not root or not (Path(root) / "torchspec/models/target/eagle3_target_model.py").is_file():
        pytest.skip("TorchSpec is not on PyPI: set EAGLE_AUDIT_TORCHSPEC_SRC to a lightseekorg/TorchSpec@6f21829 "
                    "checkout to run its HF-backend capture (the rules are cited in probes/torchspec-hf.json)")
    return Path(root)


@pytest.mark.parametrize("key", ["llama", "qwen3", "deepseek_v3"])
def test_hf_backend_capture_is_torchspec_hf(torchspec_root, tiny_targets, key):
    tt = tiny_targets[key]
    n = tt.num_layers
    with wheel_modules(torchspec_root, "torchspec") as load:
        HFTargetModel = load("torchspec.models.target.eagle3_target_model").HFTargetModel
    target = load_target(str(tt.path))
    ids = torch.tensor([[5, 17, 33, 2, 41, 9, 77, 12]])
    conv = get_convention("torchspec-hf", "trainer")
    checked = 0
    for layer_ids in (None, [n - 2, 0, 1], [0, n // 2, n - 1], [0, 1, n], [1, 1, 2], [-1, 1, 2]):
        ts = HFTargetModel(target.model)
        ts.set_aux_hidden_states_layers(layer_ids)
        cfg = {} if layer_ids is None else {"eagle_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}}
        w = conv.resolve(cfg, tt.architecture, n)
        try:
            out = ts.generate_eagle3_data(ids, torch.ones_like(ids), torch.ones_like(ids))
        except (ValueError, RuntimeError):  # TorchSpec refuses these ids (a default with duplicates on 4 layers)
            assert w.failure is not None and w.failure.error == "ValueError", (key, layer_ids)
            continue
        assert w.failure is None, (key, layer_ids)
        caps = capture(target, ids[0].tolist(), list(w.states) + [State(n, normed=True)])
        ours = torch.cat([caps[s] for s in w.states], dim=-1)
        assert torch.allclose(out.hidden_states[0].float(), ours.float(), atol=1e-5), (key, layer_ids)
        assert torch.allclose(out.last_hidden_states[0].float(), caps[State(n, normed=True)].float(), atol=1e-5)
        checked += 1
    assert checked >= 2


def _fixup_export_config(root: Path):
    """tools/convert_to_hf.py's ``_fixup_export_config``, compiled alone out of the checkout (the tool imports
    torchspec.models, which needs ray)."""
    import ast
    import json

    source = (root / "tools/convert_to_hf.py").read_text()
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_fixup_export_config")
    namespace: dict = {"json": json}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "convert_to_hf.py", "exec"), namespace)
    return namespace["_fixup_export_config"]


@pytest.mark.parametrize("ids", [None, [1, 29, 57], [0, 30, 59], [3, 10, 40]])
def test_vllm_export_convention_is_torchspec_hf_on_the_training_ids(torchspec_root, ids):
    """The exporter (--vllm) rewrites a kimi_k2 draft's ids; the export convention on the exported config trains on
    exactly what torchspec-hf trains on with the config before export."""
    fixup = _fixup_export_config(torchspec_root)
    native = {"model_type": "kimi_k2", "architectures": ["Eagle3DeepseekV2ForCausalLM"]}
    if ids is not None:
        native["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    exported = fixup(native, export_for_vllm=True)
    assert fixup(native, export_for_vllm=False) == native  # the native export keeps the training ids
    trained = get_convention("torchspec-hf", "trainer").resolve(native, "DeepseekV3ForCausalLM", 61)
    export = get_convention("torchspec-hf-vllm-export", "trainer").resolve(exported, "DeepseekV3ForCausalLM", 61)
    assert export.states == trained.states and (export.failure is None) == (trained.failure is None)
    if ids is not None:
        assert list(exported["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) == [i + 1 for i in ids]
