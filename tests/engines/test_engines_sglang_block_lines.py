"""SGLang's speculative launch line for block drafts (eagle_audit/engines/sglang/launch.py): the algorithm of the
draft's kind (``DFLASH``, ``DSPARK``; ``EAGLE3`` otherwise); a DFlash line verifies ``--speculative-num-draft-tokens``
= the draft's block_size and names no steps or topk (SGLang forces both to 1); a DSpark line leaves the count to
SGLang (gamma + 1, from the draft). That SGLang 0.5.23's own argument parser and speculative validation accept these
lines and resolve them so: tests/engine_wheels/test_sglang_block_launch_engine.py (full tier)."""

from __future__ import annotations

import json

from eagle_audit.engines.sglang.launch import sglang_speculative


def dflash(ids=(1, 14, 26), block=4) -> dict:
    cfg = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
           "dflash_config": {"target_layer_ids": list(ids), "mask_token_id": 4}}
    if block is not None:
        cfg["dflash_config"]["block_size"] = block
    return cfg


def flag(launch, name):
    argv = launch.argv
    return argv[argv.index(name) + 1] if name in argv else None


def test_dflash_line_verifies_the_trained_block(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dflash(block=8)))
    launch = sglang_speculative("/models/smol", str(tmp_path), 3)  # the config read from the draft directory
    assert launch.argv[:3] == ("python", "-m", "sglang.launch_server")
    assert flag(launch, "--speculative-algorithm") == "DFLASH"
    assert flag(launch, "--speculative-draft-model-path") == str(tmp_path)
    assert flag(launch, "--speculative-num-draft-tokens") == "8"
    assert flag(launch, "--speculative-num-steps") is None and flag(launch, "--speculative-eagle-topk") is None
    assert any("block_size" in n for n in launch.notes), launch.notes
    four = sglang_speculative("/m", "/d", 3, draft_config=dflash(block=4))
    assert flag(four, "--speculative-num-draft-tokens") == "4" and not four.notes  # block 4 = 3 drafts: no note
    unsized = sglang_speculative("/m", "/d", 5, draft_config=dflash(block=None))
    assert flag(unsized, "--speculative-num-draft-tokens") == "6" and any("no block_size" in n for n in unsized.notes)


def test_dspark_line_leaves_the_window_to_sglang():
    launch = sglang_speculative("/m", "/d", 3, draft_config={
        "architectures": ["DSparkDraftModel"], "dspark_target_layer_ids": [1, 14, 26], "dspark_block_size": 7})
    assert flag(launch, "--speculative-algorithm") == "DSPARK"
    for name in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"):
        assert flag(launch, name) is None, name
    assert any("gamma + 1" in n for n in launch.notes), launch.notes


def test_eagle3_line_unchanged():
    launch = sglang_speculative("/m", "/d", 3, draft_config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}})
    assert launch.argv == ("python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm",
                           "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
                           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--port", "30000")
    assert flag(sglang_speculative("/m", "/nowhere", 3), "--speculative-algorithm") == "EAGLE3"  # no config.json
