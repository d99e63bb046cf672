"""`eagle-audit probe sglang` on SGLang releases of every source layout, held to the rules that change between them.

Wheels (tests/wheels.py, fetched once; all in the full tier through their ``*_wheel`` fixtures):

* 0.4.4.post2, the first release with ``models/llama_eagle3.py``: the setter takes no ids and no reader exists
  (``ids_from`` is empty: the default always applies);
* 0.5.6: ids read in ``model_executor/model_runner.py``; DeepSeek's explicit ids always +1;
* 0.5.14: DeepSeek +1 only when ``ids[0] == 1`` (SGLang PR #25454);
* 0.5.21 / 0.5.23: Llama's capture at index 0 (id -1, the embedding output) raises TypeError up to 0.5.21
  (``hidden_states + residual`` with residual None); from 0.5.22 the layer-boundary capture takes it.

Where the release's own code can run without its package, it runs: 0.5.6's and 0.5.14's DeepSeek setter and
0.5.6's ``LlamaModel.forward`` are compiled out of the wheel (``tests/wheels.py`` ``WheelSource``) and their
results compared with what the probed convention resolves.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
import torch

from eagle_audit.probe import SUPPORTED, builtin_base, probe_engine, to_convention, to_convention_data
from eagle_audit.probe.emit import NONE_ADD_ERROR
from tests import wheels
from tests.wheels import WheelSource

DEEPSEEK = "DeepseekV3ForCausalLM"
MODELS = "sglang/srt/models/"


@pytest.fixture(scope="module")
def first_eagle3_wheel() -> Path:
    return wheels.sglang_wheel(wheels.SGLANG_FIRST_EAGLE3_VERSION)


@pytest.fixture(scope="module")
def sglang_056_wheel() -> Path:
    return wheels.sglang_wheel(wheels.SGLANG_MODEL_RUNNER_VERSION)


@pytest.fixture(scope="module")
def sglang_0514_wheel() -> Path:
    return wheels.sglang_wheel(wheels.SPECFORGE_SGLANG_VERSION)


@pytest.fixture(scope="module")
def sglang_0521_wheel() -> Path:
    return wheels.sglang_wheel(wheels.SGLANG_LAST_RESIDUAL_ADD_VERSION)


def _probe(wheel: Path):
    result = probe_engine("sglang", wheel)
    base = builtin_base("sglang")
    return result, to_convention(result, base), to_convention_data(result, base)


@pytest.fixture(scope="module")
def first(first_eagle3_wheel):
    return _probe(first_eagle3_wheel)


@pytest.fixture(scope="module")
def v056(sglang_056_wheel):
    return _probe(sglang_056_wheel)


@pytest.fixture(scope="module")
def v0514(sglang_0514_wheel):
    return _probe(sglang_0514_wheel)


@pytest.fixture(scope="module")
def v0521(sglang_0521_wheel):
    return _probe(sglang_0521_wheel)


NESTED = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}


# ----------------------------------------------------------------------------- 0.4.4.post2: no ids at all

def test_first_release_reads_no_ids(first):
    result, conv, data = first
    assert result.version == "0.4.4.post2"
    assert result.ids_from == () and conv.ids_from == () and data["ids_from"] == []
    assert result.ids_site.short() == "model_runner.py:213"
    assert any("calls set_eagle3_layers_to_capture() without ids" in n and "model_runner.py:213" in n
               for n in data["notes"])
    llama = result.get("LlamaForCausalLM")
    assert llama.status == SUPPORTED and llama.setter.short() == "llama.py:627-630"
    assert llama.rule.explicit == () and llama.rule.default_ids == "[2, N // 2, N - 3]"
    # a draft's nested ids are ignored: the default is captured
    wiring = conv.resolve(NESTED, "LlamaForCausalLM", 32)
    assert wiring.ids_source == "default" and wiring.capture_indices == (2, 16, 29)
    assert "nested" in wiring.ignored_places
    # no DeepSeek capture yet
    assert conv.unsupported_reason(DEEPSEEK) is not None


def test_first_release_capture_index_zero_raises(first):
    result, conv, _ = first
    rule = result.get("LlamaForCausalLM").rule
    assert rule.reach.min_capture == "1" and rule.reach.none_add.short() == "llama.py:307"
    failure = conv.rule_for("LlamaForCausalLM").failure_for((0, 5), 32)
    assert failure.error == "TypeError" and failure.message == NONE_ADD_ERROR


def test_first_release_draft_classes(first):
    _, conv, data = first
    assert [c.name for c in conv.draft_classes] == ["llama_eagle3"]
    assert any("EAGLE3 currently only supports 1 layer" in n and "llama_eagle3.py:160" in n for n in data["notes"])


def test_no_dflash_before_0_5_11(first_eagle3_wheel):
    from eagle_audit.errors import AuditError

    for name in ("sglang-dflash", "sglang-dspark"):
        with pytest.raises(AuditError, match="serves no D"):
            probe_engine(name, first_eagle3_wheel)


# ----------------------------------------------------------------------------- 0.5.6: the seed's release

def test_056_ids_reader_in_model_runner(v056):
    result, conv, data = v056
    assert result.version == "0.5.6"
    assert conv.ids_from == ("nested",)
    assert str(result.ids_site) == "sglang/srt/model_executor/model_runner.py:545"
    assert "ids reader not found" not in data["source"]
    # the CUDA-graph runner's call without ids is said, with its lines
    assert any("cuda_graph_runner.py:339" in n and "model_runner.py:552" in n for n in data["notes"])


def test_056_deepseek_always_plus_one(v056):
    result, conv, _ = v056
    rule = result.get(DEEPSEEK).rule
    assert [(c.when, c.shift) for c in rule.explicit] == [(None, 1)]
    assert result.get(DEEPSEEK).setter.short() == "deepseek_v2.py:4089-4101"
    # the seed's case: ids [2, 30, 58] in eagle_config on a 61-layer DeepSeek-V3 feed B3, B31, B59
    wiring = conv.resolve(NESTED, DEEPSEEK, 61)
    assert wiring.capture_indices == (3, 31, 59) and wiring.failure is None
    assert conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 30, 58]}}, DEEPSEEK,
                        61).capture_indices == (2, 31, 59)


def test_056_capture_index_zero_raises(v056):
    _, conv, _ = v056
    for arch in ("LlamaForCausalLM", DEEPSEEK):
        rule = conv.rule_for(arch)
        assert rule.min_capture == "1", arch
        failure = conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 2, 30]}}, arch, 61).failure
        assert failure is not None and failure.error == "TypeError", arch
    # Qwen2 guards the sum (``... if residual is not None else hidden_states``): index 0 works there
    assert conv.rule_for("Qwen2ForCausalLM").min_capture == "0"
    assert not any(f.error == "TypeError" for f in conv.rule_for("Qwen2ForCausalLM").index_failures)


# ----------------------------------------------------------------------------- 0.5.14: SGLang PR #25454

def test_0514_deepseek_plus_one_only_when_first_is_one(v0514):
    result, conv, _ = v0514
    rule = result.get(DEEPSEEK).rule
    assert [(c.when, c.shift) for c in rule.explicit] == [("ids[0] == 1", 1), (None, 0)]
    assert conv.resolve(NESTED, DEEPSEEK, 61).capture_indices == (2, 30, 58)
    assert conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 30, 58]}}, DEEPSEEK,
                        61).capture_indices == (2, 31, 59)
    assert str(result.ids_site).startswith("sglang/srt/model_executor/model_runner.py:")


# ----------------------------------------------------------------------------- the capture-index-0 boundary

def test_llama_index_zero_boundary(v0521, wheel_probe):
    result, conv, _ = v0521
    assert result.version == "0.5.21"
    assert result.get("LlamaForCausalLM").rule.reach.min_capture == "1"
    assert conv.rule_for("LlamaForCausalLM").failure_for((0,), 32).error == "TypeError"
    newest = wheel_probe.get("LlamaForCausalLM").rule.reach  # 0.5.23: the layer-boundary capture
    assert newest.min_capture == "0" and newest.none_add is None


# ----------------------------------------------------------------------------- the releases' own code, executed

def _setter(src: WheelSource, file: str, qualname: str):
    return src.function(MODELS + file, qualname, {"Optional": typing.Optional, "List": typing.List})


def _target(num_layers: int):
    return types.SimpleNamespace(pp_group=types.SimpleNamespace(is_last_rank=True),
                                 config=types.SimpleNamespace(num_hidden_layers=num_layers),
                                 model=types.SimpleNamespace(layers_to_capture=[]), capture_aux_hidden_states=False)


IDS = [None, [2, 30, 58], [1, 30, 58], [0, 1, 2], [1], [5, 1]]


@pytest.mark.parametrize("which", ["0.5.6", "0.5.14"])
def test_deepseek_setter_executed_equals_probe(which, sglang_056_wheel, sglang_0514_wheel, v056, v0514):
    wheel, (_, conv, _) = {"0.5.6": (sglang_056_wheel, v056), "0.5.14": (sglang_0514_wheel, v0514)}[which]
    setter = _setter(WheelSource(wheel), "deepseek_v2.py", "DeepseekV2ForCausalLM.set_eagle3_layers_to_capture")
    rule = conv.rule_for(DEEPSEEK)
    for ids in IDS:
        target = _target(61)
        setter(target, None if ids is None else list(ids))
        expected, _case = rule.indices(None if ids is None else tuple(ids), 61)
        assert tuple(target.model.layers_to_capture) == expected, (which, ids)


def test_first_release_setter_executed_equals_probe(first_eagle3_wheel, first):
    _, conv, _ = first
    setter = _setter(WheelSource(first_eagle3_wheel), "llama.py", "LlamaForCausalLM.set_eagle3_layers_to_capture")
    target = _target(32)
    setter(target)  # the release's setter takes no ids
    assert tuple(target.model.layers_to_capture) == conv.rule_for("LlamaForCausalLM").indices(None, 32)[0]


class _Layer:
    """Decoder layer i: returns (branch, residual) whose sum is the boundary B(i+1), as SGLang's layers do."""

    def __init__(self, i: int):
        self.i = i

    def __call__(self, positions, hidden_states, forward_batch, residual):
        return torch.full((2, 4), 0.25), torch.full((2, 4), self.i + 1 - 0.25)


def _llama_forward(wheel: Path, num_layers: int, capture: list[int]):
    forward = WheelSource(wheel).function(MODELS + "llama.py", "LlamaModel.forward", {
        "torch": torch, "Optional": typing.Optional, "PPProxyTensors": dict})
    model = types.SimpleNamespace(pp_group=types.SimpleNamespace(is_first_rank=True, is_last_rank=True),
                                  embed_tokens=lambda ids: torch.zeros(2, 4), start_layer=0, end_layer=num_layers,
                                  layers=[_Layer(i) for i in range(num_layers)], layers_to_capture=capture,
                                  norm=lambda h, r: (h + r, None))
    return forward(model, torch.arange(2), torch.arange(2), None)


def test_056_llama_forward_executed_equals_probe(sglang_056_wheel, v056):
    _, conv, _ = v056
    rule = conv.rule_for("LlamaForCausalLM")
    with pytest.raises(TypeError) as raised:
        _llama_forward(sglang_056_wheel, 8, [0, 3])
    failure = rule.failure_for((0, 3), 8)
    assert failure.error == "TypeError" and str(raised.value) == failure.message
    _, aux = _llama_forward(sglang_056_wheel, 8, [1, 4, 7])
    assert [float(a[0, 0]) for a in aux] == [1.0, 4.0, 7.0]  # index k is B_k, the stream entering layer k
    assert rule.failure_for((1, 4, 7), 8) is None and rule.reachable(8) == (1, 7)
