"""The speculative lines `eagle-audit launch` prints for DFlash and DSpark drafts (eagle_audit/engines/sglang/launch.py),
through SGLang 0.5.23's own argument checking, executed from the wheel (tests/wheels.py; nothing copied or imported
from the engine):

* the wheel's parser (tests/served/sglang_pieces.py: every field namespace, as ``ServerArgs.add_cli_args`` builds it);
* the per-algorithm hooks the dispatcher ``SpeculativeAlgorithm.handle_server_args`` (``speculative/spec_info.py:235-265``)
  calls: ``_handle_dflash`` and ``_handle_dspark`` (``arg_groups/speculative_hook.py:287-446``, ``:666-880``), with the
  draft config read by the wheel's own ``parse_dflash_draft_config`` (``speculative/dflash_utils.py``) and
  ``read_draft_checkpoint_config`` / ``parse_dspark_draft_config`` (``dspark_components/dspark_config.py``), and for the
  EAGLE-3 line ``_handle_eagle_family`` (``:1072-1282``);
* for the old EAGLE3 line on a DFlash draft, the EAGLE worker's ``EagleDraftWorker.init_lm_head``
  (``speculative/eagle_worker_v2.py:336-379``) on the wheel's ``DFlashDraftModel`` class (its methods compiled from
  ``models/dflash.py``).

Stubbed, each named where it is passed: ``resolving_view`` / ``resolved_view`` are the parsed namespace and
``declare_resolution`` writes to it (what SGLang's resolving view then reads); the device is ``cuda`` (what the
device hook resolves on a GPU host; ``_handle_dflash`` refuses ``cpu``, :292-303, as the test shows); one GPU, no
data-parallel attention (``attn_dp_enabled_of`` False); the draft attention backend pick
(``_resolve_dflash_draft_attention_backend``, :883-984) and the ragged-verify mode read are not run (neither sets
a count); transformers' ``get_config`` is the draft's config.json as attributes; the upper-casing and alias step of
``handle_speculative_decoding`` (:137-159) is not run: the lines spell the algorithm in upper case, a member name of
``SpeculativeAlgorithm`` (read from the wheel's class).
"""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest
import torch

from eagle_audit.engines.sglang.launch import sglang_speculative
from tests.engine_wheels.sglang_engine import Obj
from tests.engine_wheels.test_block_engine import TYPING, SGLangBlock

pytestmark = pytest.mark.full

HOOK = "sglang/srt/arg_groups/speculative_hook.py"
DSPARK_CONFIG = "sglang/srt/speculative/dspark_components/dspark_config.py"


@pytest.fixture(scope="module")
def pieces(sglang_wheel, tmp_path_factory):
    from tests.served.sglang_pieces import SGLangPieces

    return SGLangPieces(sglang_wheel, tmp_path_factory.mktemp("sglang-src"))


@pytest.fixture(scope="module")
def block(sglang_wheel) -> SGLangBlock:
    return SGLangBlock(sglang_wheel)


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def emit(self, record):
        self.seen.append(record.getMessage())


def _draft(tmp_path: Path, config: dict) -> Path:
    d = tmp_path / "draft"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    return d


def _get_config(path, **kw):  # transformers' get_config: the config.json as attributes (nested dicts kept)
    return Obj(**json.loads((Path(path) / "config.json").read_text()))


def validate(pieces, block, argv: tuple[str, ...], device: str = "cuda"):
    """The line parsed by the wheel's parser, then the wheel's hook for its algorithm: (namespace as resolved,
    the warnings SGLang logged). Raises what SGLang raises."""
    assert argv[:3] == ("python", "-m", "sglang.launch_server")
    ns = pieces.parse(list(argv[3:]))
    ns.device = device
    ns.attn_dp_size = 1
    ns.speculative_draft_model_revision = ns.speculative_draft_model_revision or "main"  # handle_speculative_decoding
    members = [t.id for n in _enum_body(block) for t in n.targets]  # SpeculativeAlgorithm.from_string: cls[name]
    assert ns.speculative_algorithm in members, members
    log = logging.getLogger("sglang-launch-under-test")
    seen = Warnings()
    log.addHandler(seen)
    log.setLevel(logging.WARNING)

    def declare(args, name, **kw):
        for k, v in kw.items():
            setattr(args, k, v)

    src = block.run_.src
    common = {**TYPING, "json": json, "logger": log, "resolving_view": lambda a: a, "resolved_view": lambda a: a,
              "declare_resolution": declare, "current_platform": Obj(is_out_of_tree=lambda: False),
              "attn_dp_enabled_of": lambda cfg: False, "get_config": _get_config,
              "envs": Obj(SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=Obj(get=lambda: False),
                          SGLANG_SIMULATE_ACC_LEN=Obj(get=lambda: -1.0))}
    try:
        if ns.speculative_algorithm == "DFLASH":
            fn = src.function(HOOK, "_handle_dflash", {
                **common, "parse_dflash_draft_config": block.utils["parse_dflash_draft_config"],
                "_resolve_dflash_draft_attention_backend": lambda args: None})
        elif ns.speculative_algorithm == "DSPARK":
            read = src.function(DSPARK_CONFIG, "read_draft_checkpoint_config", {
                **common, "parse_dspark_draft_config": block.dspark["parse_dspark_draft_config"],
                "_cfg_get": block.dspark["_cfg_get"]})
            gamma = src.definitions(DSPARK_CONFIG, ("DEFAULT_DSPARK_GAMMA",))["DEFAULT_DSPARK_GAMMA"]
            mode = Obj(STATIC="static", COMPACT="compact")
            fn = src.function(HOOK, "_handle_dspark", {
                **common, "DEFAULT_DSPARK_GAMMA": gamma, "read_draft_checkpoint_config": read,
                "RaggedVerifyMode": mode, "read_ragged_verify_mode": lambda: Obj(value="off")})
        else:
            fn = src.function(HOOK, "_handle_eagle_family", {
                **common, "_check_oot_speculative_algorithm": lambda **kw: None,
                "_disable_overlap_schedule_for_cpu": lambda args: None,
                "SpeculativeAlgorithm": Obj(from_string=lambda name: Obj(supports_mixed_chunk=lambda: True)),
                "model_config_of": lambda args: Obj(hf_config=Obj(architectures=["LlamaForCausalLM"])),
                "_handle_iquest_q1_mtp_draft": lambda args: False, "attention_backends_of": lambda view: (None, None),
                "_should_auto_enable_hip_rejection_sampling": lambda **kw: False,
                "get_platform": lambda: Obj(is_hip=False)})
        fn(ns)
    finally:
        log.removeHandler(seen)
    return ns, seen.seen


def _enum_body(block):
    node = block.run_.src.tree("sglang/srt/speculative/spec_info.py")
    cls = next(n for n in node.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeAlgorithm")
    return [n for n in cls.body if isinstance(n, ast.Assign)]


DFLASH = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 32,
          "dflash_config": {"target_layer_ids": [1, 14, 26], "mask_token_id": 4, "block_size": 8}}
DSPARK = {"architectures": ["DSparkDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 32,
          "dspark_target_layer_ids": [1, 14, 26], "dspark_block_size": 5, "dspark_markov_rank": 8,
          "dflash_config": {"mask_token_id": 4}}


def test_dflash_line_is_accepted_and_verifies_the_trained_block(pieces, block, tmp_path):
    d = _draft(tmp_path, DFLASH)
    line = sglang_speculative("/models/target", str(d), 3)
    ns, warned = validate(pieces, block, line.argv)
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens) == (1, 1, 8)
    assert not [w for w in warned if "overriding" in w or "Failed" in w], warned  # nothing of the line is overridden
    # what SGLang infers without the flag is the same block: the line only says it
    bare = tuple(a for i, a in enumerate(line.argv) if "--speculative-num-draft-tokens" not in line.argv[i - 1:i + 1])
    assert validate(pieces, block, bare)[0].speculative_num_draft_tokens == 8
    with pytest.raises(ValueError, match="DFLASH speculative decoding is not supported"):
        validate(pieces, block, line.argv, device="cpu")


def test_dspark_line_is_accepted_and_takes_gamma_plus_one(pieces, block, tmp_path):
    d = _draft(tmp_path, DSPARK)
    ns, warned = validate(pieces, block, sglang_speculative("/models/target", str(d), 3).argv)
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens) == (1, 1, 6)
    assert not [w for w in warned if "overriding" in w or "defaulting" in w or "Failed" in w], warned
    # the EAGLE-style counts of the old line are refused for this draft: 4 draft tokens is not gamma + 1
    old = ("python", "-m", "sglang.launch_server", "--model-path", "/models/target", "--speculative-algorithm", "DSPARK",
           "--speculative-draft-model-path", str(d), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
           "--speculative-num-draft-tokens", "4")
    with pytest.raises(ValueError, match="must equal gamma \\+ 1"):
        validate(pieces, block, old)


def test_the_eagle3_line_of_a_dflash_draft_fails_at_start(pieces, block, tmp_path):
    """The old line (EAGLE3 for every draft): its arguments pass (a 4-token chain, not the trained block of 8), then
    the EAGLE worker's init_lm_head calls set_embed on the DFlash draft model, which has none."""
    d = _draft(tmp_path, DFLASH)
    old = ("python", "-m", "sglang.launch_server", "--model-path", "/models/target", "--speculative-algorithm", "EAGLE3",
           "--speculative-draft-model-path", str(d), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
           "--speculative-num-draft-tokens", "4")
    ns, _ = validate(pieces, block, old)
    assert ns.speculative_num_draft_tokens == 4  # verifies 3 drafts a round, whatever the block
    src = block.run_.src
    draft_file = "sglang/srt/models/dflash.py"
    node = next(n for n in src.tree(draft_file).body if isinstance(n, ast.ClassDef) and n.name == "DFlashDraftModel")
    names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    names |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert not names & {"set_embed", "set_embed_and_head", "load_lm_head_from_target"}, names
    model_cls = src.cls(draft_file, "DFlashDraftModel", tuple(n.name for n in node.body if isinstance(n, ast.FunctionDef)),
                        (torch.nn.Module,), {"torch": torch, "nn": torch.nn, **TYPING})
    model = model_cls.__new__(model_cls)
    torch.nn.Module.__init__(model)
    init_lm_head = src.function("sglang/srt/speculative/eagle_worker_v2.py", "EagleDraftWorker.init_lm_head",
                                {"unwrap_lora_layer": lambda layer: layer})
    worker = Obj(target_worker=Obj(model_runner=Obj(model=Obj(lm_head=None))), draft_runner=Obj(model=model),
                 hot_token_id=None, speculative_algorithm=Obj(is_eagle3=lambda: True),
                 _resolve_shared_embed_and_head=lambda: (torch.zeros(4, 2), torch.zeros(4, 2)))
    with pytest.raises(AttributeError, match="'DFlashDraftModel' object has no attribute 'set_embed'"):
        init_lm_head(worker)
