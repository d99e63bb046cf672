"""DFlash and DSpark drafts: SGLang 0.5.23's and vLLM 0.33.0's own code, executed from the wheels, against the
rules eagle-audit holds for them (probes/sglang-dflash.json, sglang-dspark.json, vllm-dflash.json).

What runs (compiled out of the wheels with tests/wheels.py; nothing is copied or imported from the engines):

* SGLang's id resolution for block drafts: ``spec_aux_hidden_state.py`` ``_resolve_dflash_aux_hidden_state`` with
  the real ``_map_muse_target_layer_ids``, ``speculative/dflash_utils.py`` ``parse_dflash_draft_config`` /
  ``DFlashDraftConfig.resolve_target_layer_ids`` / ``build_target_layer_ids`` and
  ``dspark_components/dspark_config.py`` ``parse_dspark_draft_config``: what the target's setter is handed;
* each architecture's ``set_dflash_layers_to_capture`` (and the inner model's), then the model forward of
  tests/engine_wheels/sglang_engine.py (the same stubs as for EAGLE-3: layer i receives B_i), and the draft's width
  check ``DFlashDraftModel.project_target_hidden`` (models/dflash.py) on what was captured;
* vLLM's V2 runner start-up and model forward (tests/engine_wheels/vllm_engine.py) on DFlash / DSpark configs, the
  speculators DFlash config loader ``update_dflash`` (transformers_utils/configs/speculators/algos.py), the
  DFlash draft's ``_get_dflash_fc_input_size`` and ``combine_hidden_states`` (models/qwen3_dflash.py).
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import typing
from collections import abc

import pytest
import torch

from eagle_audit import expr
from eagle_audit.conventions import builtin_conventions
from eagle_audit.probe.block import DEFAULT_IDS
from tests.engine_wheels.sglang_engine import ARCHS, H, EngineRun, Obj, label, tag

pytestmark = pytest.mark.full

ENGINES = builtin_conventions("engine")
SPEC_AUX = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
DFLASH_UTILS = "sglang/srt/speculative/dflash_utils.py"
DSPARK_CONFIG = "sglang/srt/speculative/dspark_components/dspark_config.py"
TYPING = {"Any": typing.Any, "List": typing.List, "Optional": typing.Optional, "Tuple": typing.Tuple,
          "Sequence": abc.Sequence, "Integral": numbers.Integral, "dataclass": dataclasses.dataclass,
          "logger": logging.getLogger("sglang-under-test"), "logging": logging}

#: SGLang architectures whose DFlash setter the stub harness runs: the EAGLE-3 harness's, with the inner model's
#: DFlash setter where the ForCausalLM hands the shifted ids to it.
DFLASH_INNER = {"Qwen3MoeForCausalLM": ("qwen3_moe.py", "Qwen3MoeModel"), "Qwen2MoeForCausalLM": None}
SGLANG_ARCHS = ("LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM",
                "Glm4MoeLiteForCausalLM", "GptOssForCausalLM")


class _Struct:
    """``msgspec.Struct`` as DSparkDraftConfig uses it (keyword construction, attribute access, methods):
    msgspec is not a test dependency, and the struct only carries the parsed fields."""

    def __init_subclass__(cls, **kw):
        pass

    def __init__(self, **kw):
        self.__dict__.update(kw)


_Msgspec = Obj(Struct=_Struct)


class SGLangBlock:
    """SGLang 0.5.23's block-draft code, compiled from the wheel."""

    def __init__(self, wheel):
        self.run_ = EngineRun(wheel)
        src = self.run_.src
        self.utils = src.definitions(DFLASH_UTILS, (
            "DEFAULT_DFLASH_MASK_TOKEN", "build_target_layer_ids", "_cfg_get", "_get_text_config", "_get_dflash_config",
            "_parse_optional_int", "DFlashDraftConfig", "parse_dflash_draft_config"), TYPING)
        self.dspark = src.definitions(DSPARK_CONFIG, (
            "SUPPORTED_DSPARK_MARKOV_HEAD_TYPES", "_cfg_get", "_get_text_config", "_get_nested_config",
            "_get_dspark_config", "DSparkDraftConfig",
            "parse_dspark_draft_config"), {**TYPING, "parse_dflash_draft_config": self.utils["parse_dflash_draft_config"],
                                           "json": __import__("json"), "msgspec": _Msgspec})
        self.aux = src.definitions(SPEC_AUX, ("_MUSE_LAYER_OUTPUT_DRAFT_ARCHITECTURES", "_map_muse_target_layer_ids"))
        self.resolver = src.function(SPEC_AUX, "_resolve_dflash_aux_hidden_state", {
            **TYPING, "_map_muse_target_layer_ids": self.aux["_map_muse_target_layer_ids"],
            "parse_dflash_draft_config": self.utils["parse_dflash_draft_config"],
            "parse_dspark_draft_config": self.dspark["parse_dspark_draft_config"],
            "is_deepseek_v4": lambda cfg: False})
        self.width = src.function("sglang/srt/models/dflash.py", "DFlashDraftModel.project_target_hidden", {})

    def ids_for(self, draft: dict, n: int, kind: str = "dflash", target_type: str = "llama") -> list[int]:
        """What ``_resolve_dflash_aux_hidden_state`` hands the target's setter (raises as SGLang does)."""
        cfg = Obj(dflash_use_aux_hidden_state=False, dflash_target_layer_ids=None, dflash_draft_num_layers=None,
                  dspark_num_stages=None, draft_model_config=None, draft_kv_num_layers=None)
        draft_model_config = Obj(hf_config=Obj(**draft))
        g = self.resolver.__globals__
        g["ModelConfig"] = Obj(from_server_args=lambda *a, **k: draft_model_config)
        g["get_spec"] = lambda: Obj(speculative_draft_model_path="draft", speculative_draft_model_revision=None)
        target = Obj(hf_text_config=Obj(num_hidden_layers=n), hf_config=Obj(model_type=target_type))
        algo = Obj(is_dflash_family=lambda: True, is_dspark=lambda: kind == "dspark")
        self.resolver(config=cfg, server_args=Obj(), model_config=target, spec_algorithm=algo, is_draft_worker=False)
        return cfg.dflash_target_layer_ids

    def capture(self, arch_name: str, n: int, ids: list[int]):
        """The target's DFlash setter with ``ids``, then one forward: ("feeds", labels) or ("fails", at, error)."""
        arch = ARCHS[arch_name]
        run = self.run_
        target = run.build(arch, n)
        setter = run.fn(arch.file, f"{arch.causal}.set_dflash_layers_to_capture")
        inner = DFLASH_INNER.get(arch_name)
        if inner:
            type(target.model).set_dflash_layers_to_capture = run.fn(inner[0], f"{inner[1]}.set_dflash_layers_to_capture")
        try:
            setter(target, list(ids))
        except Exception as e:  # noqa: BLE001 - the engine's own failure is the result
            return ("fails", "start-up", f"{type(e).__name__}: {e}")
        batch = Obj(can_run_tbo=False, forward_mode=Obj(is_idle=lambda: False), aux_hidden_states_buffer=None)
        try:
            aux = target.forward(torch.arange(3), torch.arange(3).reshape(1, 3), batch)
            packed = run.aux["pack_aux_hidden_states"](aux)
        except Exception as e:  # noqa: BLE001
            return ("fails", "first forward", f"{type(e).__name__}: {e}")
        # the draft's width check: fc was sized for len(ids) states
        draft = Obj(quantizable=False, fc=Obj(in_features=len(ids) * H, forward=lambda x: x), num_context_features=len(ids),
                    hidden_norm=lambda x: x,
                    config=Obj(hidden_size=H))
        try:
            self.width(draft, packed)
        except ValueError as e:
            return ("fails", "first forward", f"ValueError: {str(e).split('.')[0]}")
        return ("feeds", tuple(label(c) for c in packed.split(H, dim=-1)))


@pytest.fixture(scope="module")
def sg(sglang_wheel) -> SGLangBlock:
    return SGLangBlock(sglang_wheel)


def audit_says(conv, arch: str, n: int, config: dict) -> tuple:
    w = conv.resolve(config, arch, n)
    if w.failure:
        text = w.failure.text()
        return ("fails", w.failure.at, text.split(".")[0] if "dim mismatch" in text else text)
    return ("feeds", tuple(s.label() for s in w.states))


def test_the_default_is_sglangs_build_target_layer_ids(sg):
    for n in range(4, 70):
        for d in range(1, 9):
            assert expr.evaluate(DEFAULT_IDS, N=n, D=d) == sg.utils["build_target_layer_ids"](n, d), (n, d)


def block_cases(n: int) -> dict[str, dict]:
    base = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 3, "hidden_size": H}
    dc = lambda ids: {**base, "dflash_config": {"target_layer_ids": ids}}  # noqa: E731
    return {
        "no ids (default)": dict(base), "one layer, default": {**base, "num_hidden_layers": 1},
        "z-lab ids": dc([1, n // 2, n - 3]), "id -1": dc([-1, n // 2, n - 3]), "id 0": dc([0, n // 2, n - 3]),
        "id N-1": dc([1, n // 2, n - 1]), "id N": dc([1, n // 2, n]), "empty": dc([]),
        "duplicates": dc([1, 1, n - 3]), "unsorted": dc([n - 3, 1, n // 2]),
        "top-level target_layer_ids": {**base, "target_layer_ids": [2, n // 2, n - 4]},
        "both places": {**base, "target_layer_ids": [2, 3, 4], "dflash_config": {"target_layer_ids": [1, n // 2, n - 3]}},
        "dspark_config only": {**base, "dspark_config": {"target_layer_ids": [2, 3, 4]}},
    }


@pytest.mark.parametrize("n", [8, 61])
@pytest.mark.parametrize("arch", SGLANG_ARCHS)
def test_sglang_dflash_capture_matches_the_engine(sg, arch, n):
    """sglang-dflash.json says what SGLang's resolver, the architecture's DFlash setter, its forward and the
    draft's width check do, for every id set."""
    wrong = {}
    for name, cfg in block_cases(n).items():
        try:
            ids = sg.ids_for(cfg, n)
            want = sg.capture(arch, n, ids)
        except ValueError as e:
            want = ("fails", "start-up", f"ValueError: {e}")
        got = audit_says(ENGINES["sglang-dflash"], arch, n, cfg)
        if got[:2] != want[:2] or (got[0] == "feeds" and got != want) or \
                (got[0] == "fails" and got[2].split(":")[0] != want[2].split(":")[0]):
            wrong[name] = f"eagle-audit {got}, SGLang {want}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_sglang_dspark_ids_and_the_ignored_dspark_config(sg):
    n = 36
    base = {"architectures": ["Qwen3DSparkModel"], "num_hidden_layers": 3, "markov_rank": 8, "markov_head_type": "vanilla"}
    for cfg in ({**base, "dspark_target_layer_ids": [3, 20, 30]},
                {**base, "dspark_config": {"target_layer_ids": [3, 20, 30]}},
                {**base, "dspark_target_layer_ids": [3, 20, 30], "dflash_config": {"target_layer_ids": [1, 2, 5]}},
                {**base, "dflash_config": {"target_layer_ids": [1, 2, 5]}}):
        ids = sg.ids_for(cfg, n, kind="dspark")
        w = ENGINES["sglang-dspark"].resolve(cfg, "LlamaForCausalLM", n)
        assert [s.boundary for s in w.states] == sorted({i + 1 for i in ids}), cfg  # Llama's DFlash setter: +1


def test_sglang_stops_on_a_dflash_config_without_its_layer_count(sg):
    """A DFlash config in the speculators layout keeps its layer count in transformer_layer_config: SGLang's
    parse_dflash_draft_config reads only the top level (or text_config) and raises at start-up, whatever ids the
    config gives; its default ids are an expression over that count, so the audit under SGLang's rules stops in one
    line naming the config (resolution.side_of); with num_hidden_layers at the top level both read the default."""
    from eagle_audit.errors import BadCheckpoint
    from eagle_audit.resolution import side_of

    n = 36
    cfg = {"architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash", "block_size": 8,
           "mask_token_id": 3, "aux_hidden_state_layer_ids": [2, 18],
           "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": 64}}
    for c in (cfg, {**cfg, "dflash_config": {"target_layer_ids": [1, 17]}}):
        with pytest.raises(ValueError, match="DFLASH requires draft num_hidden_layers in config"):
            sg.ids_for(c, n)
    with pytest.raises(BadCheckpoint, match="draft/config.json: .*own layer count"):
        side_of(ENGINES["sglang-dflash"], cfg, "LlamaForCausalLM", n, where="draft/config.json")
    top = {**cfg, "num_hidden_layers": 1}
    w = ENGINES["sglang-dflash"].resolve(top, "LlamaForCausalLM", n)
    assert [s.boundary for s in w.states] == [i + 1 for i in sg.ids_for(top, n)]  # [N // 2] for D = 1: Llama's +1


def test_sglang_muse_mapping(sg):
    n = 36
    for arch, want in ((["MuseGlimmerAssistantModel"], [2, 18]), (["DFlash2DraftModel"], [2, 18]),
                       (["DFlashDraftModel"], [1, 17])):
        cfg = {"architectures": arch, "num_hidden_layers": 2, "dflash_config": {"target_layer_ids": [1, 17]}}
        assert sg.ids_for(cfg, n, target_type="muse_glimmer") == want
        w = ENGINES["sglang-dflash"].resolve(cfg, "MuseGlimmerForCausalLM", n)
        assert list(w.capture_indices) == want  # Muse's setter keeps them verbatim (captures before layer k)


# ---------------------------------------------------------------------------- vLLM


@pytest.fixture(scope="module")
def vl(vllm_wheel):
    from tests.engine_wheels.vllm_engine import EngineRun as VllmRun

    run = VllmRun(vllm_wheel)
    src = run.src
    fc_size = src.function("vllm/model_executor/models/qwen3_dflash.py", "_get_dflash_fc_input_size",
                           {"get_eagle3_aux_layers_from_config": run.ns["get_eagle3_aux_layers_from_config"]})
    combine = src.function("vllm/model_executor/models/qwen3_dflash.py",
                           "DFlashQwen3ForCausalLM.combine_hidden_states", {})
    loader = src.function("vllm/transformers_utils/configs/speculators/algos.py", "update_dflash", {})
    return run, fc_size, combine, loader


def vllm_says(vl, arch: str, n: int, cfg: dict) -> tuple:
    run, fc_size, combine, _ = vl
    out = run.run(arch, n, cfg)
    if out.failed_at:
        return ("fails", out.failed_at, f"{out.error}: {out.message}")
    spec = Obj(speculative_config=Obj(draft_model_config=Obj(hf_config=Obj(**cfg))))
    width = fc_size(Obj(speculative_config=spec.speculative_config))
    draft = Obj(model=Obj(use_aux_hidden_state=True, fc=Obj(input_size=width, forward=lambda x: x)))
    states = torch.cat([tag(int(c[1:])) for c in out.captured], dim=-1) if out.captured else torch.zeros(3, 0)
    try:
        combine(draft, states)
    except (ValueError, TypeError) as e:
        return ("fails", "first forward", f"ValueError: {str(e).split('.')[0]}")
    return ("feeds", out.captured)


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV3ForCausalLM"])
def test_vllm_dflash_capture_matches_the_engine(vl, arch):
    n = 36
    wrong = {}
    cases = {**block_cases(n),
             "dspark ids": {"architectures": ["Qwen3DSparkModel"], "num_hidden_layers": 3, "hidden_size": H,
                            "dspark_target_layer_ids": [1, 17, 33]},
             "dspark ids, deepseek_v41": {"architectures": ["X"], "model_type": "deepseek_v41", "num_hidden_layers": 3,
                                          "hidden_size": H,
                                          "dspark_target_layer_ids": [1, 17, 33]},
             "mixed, EAGLE-3 ids first": {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 3, "hidden_size": H,
                                          "eagle_aux_hidden_state_layer_ids": [1, 17, 33],
                                          "dflash_config": {"target_layer_ids": [1, 17, 33]}}}
    for name, cfg in cases.items():
        want = vllm_says(vl, arch, n, cfg)
        got = audit_says(ENGINES["vllm-dflash"], arch, n, cfg)
        if got[:2] != want[:2] or (got[0] == "feeds" and got != want) or \
                (got[0] == "fails" and got[2].split(":")[0] != want[2].split(":")[0]):
            wrong[name] = f"eagle-audit {got}, vLLM {want}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_vllm_speculators_dflash_loader(vl):
    """algos.py update_dflash: aux ids become the top-level EAGLE-3 ids (read first, verbatim) and
    dflash_config.target_layer_ids = aux - 1; eagle-audit reads the aux ids of the speculators config directly."""
    *_, loader = vl
    spec_cfg = {"speculators_model_type": "dflash", "aux_hidden_state_layer_ids": [2, 18, 33], "mask_token_id": 3}
    loaded: dict = {}
    loader(spec_cfg, loaded)
    assert loaded["eagle_aux_hidden_state_layer_ids"] == [2, 18, 33]
    assert loaded["dflash_config"]["target_layer_ids"] == [1, 17, 32]
    run = vl[0]
    assert list(run.ids_v2(loaded)) == [2, 18, 33]
    w = ENGINES["vllm-dflash"].resolve(spec_cfg, "LlamaForCausalLM", 36)
    assert list(w.capture_indices) == [2, 18, 33] and w.ids_source == "aux_hidden_state_layer_ids"
