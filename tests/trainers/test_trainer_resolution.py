"""eagle-audit's trainer resolution == what the trainer's own code trains on, on tiny random targets.

SpecForge 0.2.0: its own resolver (``model_providers.resolve_eagle_capture_layers``) picks the ids, which it hands
to the pinned SGLang 0.5.14's ``set_eagle3_layers_to_capture`` (executed here from the wheel, per architecture);
the capture loop of that SGLang captures index i before layer i for i in range(N) (the loop text is asserted).
speculators 0.9.0: its own resolver (``models/utils.resolve_target_layer_ids``) validates or defaults the ids;
``scripts/launch_vllm.py`` (not in the wheel; cited) appends N unless present, vLLM captures the input of each
listed layer in layer order, and ``train/data.py`` keeps all but the last captured state as draft inputs.
"""

from __future__ import annotations

import re
import warnings
from types import SimpleNamespace

import pytest
from transformers import AutoConfig

from eagle_audit.conventions import get_convention
from eagle_audit.resolution import side_of
from eagle_audit.states import State

#: target key -> (SGLang 0.5.14 model file, class whose setter runs, file holding the capture loop)
SGLANG_SETTERS = {
    "llama": ("llama.py", "LlamaForCausalLM", "llama.py"),
    "qwen3": ("qwen3.py", "Qwen3ForCausalLM", "qwen2.py"),
    "deepseek_v3": ("deepseek_v2.py", "DeepseekV2ForCausalLM", "deepseek_v2.py"),
    "gpt_oss": ("gpt_oss.py", "GptOssForCausalLM", "gpt_oss.py"),
}


def id_cases(n: int, deepseek: bool) -> list[list[int] | None]:
    cases = [None, [1, n // 2, n - 3], [n - 3, 1, n // 2], [1, 2, n - 1], [0, 2, n]]
    if deepseek:
        cases += [[2, n // 2, n - 3], [3, 5, n - 1]]  # ids not starting at 1: kept verbatim
    return cases


def draft_config(ids: list[int] | None) -> dict:
    return {"architectures": ["LlamaForCausalLMEagle3"],
            "eagle_config": {} if ids is None else {"eagle_aux_hidden_state_layer_ids": list(ids)}}


def sglang_capture(sglang, key: str, ids: list[int], n: int) -> tuple[list[int], list[int]]:
    """(captured indices in capture order, indices never reached) from SGLang 0.5.14's own setter."""
    file, cls, loop_file = SGLANG_SETTERS[key]
    setter = sglang.function(f"sglang/srt/models/{file}", f"{cls}.set_eagle3_layers_to_capture")
    this = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True), config=SimpleNamespace(num_hidden_layers=n),
                           model=SimpleNamespace())
    setter(this, list(ids))
    loop = sglang.text(f"sglang/srt/models/{loop_file}")
    assert re.search(r"for i in range\((self\.|normal_)start_layer, (self\.|normal_)end_layer\):", loop)
    assert "i in self.layers_to_capture" in loop
    wanted = list(this.model.layers_to_capture)
    return [i for i in range(n) if i in wanted], [i for i in wanted if not 0 <= i < n]


@pytest.mark.parametrize("key", list(SGLANG_SETTERS))
def test_specforge_resolution_is_its_resolver_through_sglang_0_5_14(key, tiny_targets, trainers, sglang_0_5_14):
    target = tiny_targets[key]
    n = target.num_layers
    conv = get_convention("specforge", "trainer")
    target_config = AutoConfig.from_pretrained(target.path)
    cfg = SimpleNamespace(model=SimpleNamespace(aux_hidden_state_layer_ids=None))
    for ids in id_cases(n, key == "deepseek_v3"):
        passed = trainers.resolve_eagle_capture_layers(cfg, draft_config(ids), target_config)
        captured, never = sglang_capture(sglang_0_5_14, key, passed, n)
        side = side_of(conv, draft_config(ids), target.architecture, n)
        assert side.states == tuple(State(i) for i in captured), (key, ids, passed)
        assert list(side.dropped) == never, (key, ids)
        assert side.order == "ascending"
    # a run override wins over the config, as in SpecForge
    cfg.model.aux_hidden_state_layer_ids = [n - 3, 1, 2]
    passed = trainers.resolve_eagle_capture_layers(cfg, draft_config([1, 2, 3]), target_config)
    captured, _ = sglang_capture(sglang_0_5_14, key, passed, n)
    side = side_of(conv, draft_config([1, 2, 3]), target.architecture, n, override_ids=(n - 3, 1, 2))
    assert side.states == tuple(State(i) for i in captured)


def launch_vllm_ids(ids: list[int] | None, n: int) -> list[int]:
    """scripts/launch_vllm.py@c05b95b main(): the ids vLLM is asked to capture (the script is not in the wheel)."""
    if ids:
        out = list(ids)
        if n not in out:
            out.append(n)
        return out
    return [2, n // 2, n - 3, n]


@pytest.mark.parametrize("key", list(SGLANG_SETTERS))
def test_speculators_resolution_is_its_resolver_and_datagen(key, tiny_targets, trainers):
    target = tiny_targets[key]
    n = target.num_layers
    conv = get_convention("speculators", "trainer")
    checked = 0
    for ids in id_cases(n, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the resolver warns when it applies its default
            try:
                resolved = trainers.resolve_target_layer_ids(ids, str(target.path))
            except ValueError:  # duplicate ids on a 4-layer target: speculators refuses to train, no draft exists
                continue
        checked += 1
        captured = sorted(launch_vllm_ids(resolved, n))  # vLLM extract_hidden_states: layer order, IN-k
        inputs = captured[:-1]  # train/data.py: hidden_states[:, :-1] feed the draft, [:, -1] is the verifier state
        config = {"speculators_model_type": "eagle3"} | ({} if ids is None else {"eagle_aux_hidden_state_layer_ids": ids})
        side = side_of(conv, config, target.architecture, n)
        assert side.states == tuple(State(i) for i in inputs), (key, ids)
    assert checked >= 2
