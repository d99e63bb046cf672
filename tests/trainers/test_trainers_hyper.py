"""What the trainers' own capture code hands a draft on a hyper-connection target (DeepSeek-V4, transformers 5.25
``deepseek_v4``: ``hidden_states[k]`` and each decoder layer's output are ``[batch, tokens, streams, hidden]``),
run from their wheels on a tiny random DeepSeek-V4 (issue 45: "what the trainers that train drafts for it
capture").

* SpecForge 0.2.0, DFlash (``modeling/draft/dflash.py`` ``extract_context_feature``: ``hidden_states[id + 1]``
  from transformers' ``output_hidden_states``, concatenated on the last axis);
* ModelOpt 0.47.0, EAGLE-3 (``plugins/hf_eagle.py`` ``_collect_aux_hidden_states_forward_hook`` on each chosen
  decoder layer, ``pop_and_gather_aux_hiddens`` concatenating on the last axis).

Neither collapses the streams: the draft's fc is handed ``[batch, tokens, streams, k * hidden]``, each stream's
state side by side per stream, not the mean over the streams that vLLM 0.34.0 and SGLang 0.5.23 feed (docs/
coordinate.md). No trainer wheel here names ``deepseek_v4`` or ``hc_mult`` (SpecForge 0.2.0's EAGLE-3 capture
goes through SGLang 0.5.14, which has no DeepSeek-V4 model); speculators 0.9.0 captures through vLLM, whose V4
capture is the mean (tests/engine_wheels/test_mhc_engines.py)."""

from __future__ import annotations

import re
import zipfile
from types import SimpleNamespace

import pytest
import torch

from tests import wheels
from tests.hyper import tiny_v4_model

pytestmark = [pytest.mark.full, pytest.mark.usefixtures("one_thread")]

STREAMS, LAYERS, IDS = 4, 6, [1, 3, 4]


@pytest.fixture(scope="module")
def v4():
    return tiny_v4_model(layers=LAYERS, streams=STREAMS)


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 400, (1, 7), generator=torch.Generator().manual_seed(0))


def test_specforge_dflash_concatenates_the_streams_unreduced(v4, tokens):
    src = wheels.WheelSource(wheels.specforge_wheel())
    extract = src.function("specforge/modeling/draft/dflash.py", "extract_context_feature", {"torch": torch})
    with torch.inference_mode():
        hs = v4(input_ids=tokens, output_hidden_states=True, use_cache=False).hidden_states
    feature = extract(list(hs), IDS)
    H = v4.config.hidden_size
    assert hs[1].shape == (1, 7, STREAMS, H)
    assert feature.shape == (1, 7, STREAMS, len(IDS) * H)  # per stream, not [1, 7, 3 * H] of means
    mean = torch.cat([hs[i + 1].mean(dim=2) for i in IDS], dim=-1)
    assert not torch.allclose(feature.mean(dim=2), feature[:, :, 0])  # the streams differ, even at random init
    assert torch.allclose(feature.mean(dim=2), mean, atol=1e-6)  # only their mean is what the engines feed


def test_modelopt_hooks_hand_the_layer_outputs_streams_and_all(v4, tokens):
    src = wheels.WheelSource(wheels.modelopt_wheel())
    path = "modelopt/torch/speculative/plugins/hf_eagle.py"
    hook = src.function(path, "HFEagleModel._collect_aux_hidden_states_forward_hook", {"torch": torch})
    state = SimpleNamespace(_aux_hidden_states=[], training=False)
    layers = v4.model.layers
    handles = [layers[i].register_forward_hook(lambda m, a, o: hook(state, m, a, o)) for i in IDS]
    try:
        with torch.inference_mode():
            hs = v4(input_ids=tokens, output_hidden_states=True, use_cache=False).hidden_states
    finally:
        for h in handles:
            h.remove()
    H = v4.config.hidden_size
    # the gather, as pop_and_gather_aux_hiddens writes it: torch.cat([...], dim=-1)
    text = src.text(path)
    assert re.search(r"aux_hiddens = torch\.cat\(\s*\[h\.to\(self\.eagle_module\.fc\.weight\.device\) for h in "
                     r"aux_h_list\], dim=-1", text)
    gathered = torch.cat(state._aux_hidden_states, dim=-1)
    assert gathered.shape == (1, 7, STREAMS, len(IDS) * H)
    assert torch.equal(state._aux_hidden_states[0], hs[IDS[0] + 1])  # layer k's output: hidden_states[k + 1]


@pytest.mark.parametrize("wheel", ["specforge_wheel", "speculators_wheel", "modelopt_wheel"])
def test_no_trainer_wheel_names_deepseek_v4(wheel):
    """What the trainers here would capture for DeepSeek-V4 is their generic code above: none has V4 code."""
    path = getattr(wheels, wheel)()
    with zipfile.ZipFile(path) as z:
        hits = [n for n in z.namelist() if n.endswith(".py")
                and re.search(rb"deepseek_v4|DeepseekV4|hc_mult", z.read(n))]
    assert hits == [], hits
