"""vLLM 0.33.0's own code, executed on CPU (tests/engine_wheels/vllm_engine.py), against eagle-audit's resolution of
probes/vllm.json (V2 runner) and probes/vllm-v1.json: the draft config goes through the V2 runner's ids reader
and setter and the target's forward; eagle-audit must name exactly the states vLLM feeds, in order, or its
failure (exception, message, phase), or that the architecture has no EAGLE-3 capture at all."""

from __future__ import annotations

import pytest

from eagle_audit.conventions import builtin_conventions
from eagle_audit.probe import builtin_base, probe_engine, to_convention
from tests.engine_wheels.vllm_engine import ARCHS, EngineRun

ENGINES = builtin_conventions("engine")
V2, V1 = ENGINES["vllm"], ENGINES["vllm-v1"]
UNSUPPORTED = ("fails", "start-up", "RuntimeError: Model does not support EAGLE3 interface")


def id_sets(n: int) -> dict[str, list[int] | None]:
    return {
        "default (no ids)": None, "IN-k default": [2, n // 2, n - 3], "OUT-k default": [1, n // 2 - 1, n - 4],
        "embedding 0": [0, n // 2, n - 3], "embedding -1": [-1, n // 2 - 1, n - 4], "with N-1": [1, n // 2, n - 1],
        "with N": [2, n // 2, n], "beyond N": [2, n // 2, n + 1], "negative -2": [-2, n // 2, n - 4],
        "duplicates": [2, 2, n - 3], "empty": [], "single": [n - 3], "unsorted": [n - 3, 2, n // 2],
    }


@pytest.fixture(scope="module")
def engine(vllm_wheel) -> EngineRun:
    return EngineRun(vllm_wheel)


def engine_says(engine: EngineRun, arch: str, n: int, cfg: dict) -> tuple:
    out = engine.run(arch, n, cfg)
    if out.failed_at:
        return ("fails", out.failed_at, f"{out.error}: {out.message}")
    return ("feeds", out.captured)


def audit_says(arch: str, n: int, cfg: dict) -> tuple:
    w = V2.resolve(cfg, arch, n)
    if w.unsupported:
        return UNSUPPORTED
    if w.failure:
        return ("fails", w.failure.at, w.failure.text())
    return ("feeds", tuple(s.label() for s in w.states))


@pytest.mark.parametrize("n", [8, 61])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_capture_matches_the_engine(engine, arch, n):
    wrong = {}
    for name, ids in id_sets(n).items():
        cfg = {} if ids is None else {"eagle_aux_hidden_state_layer_ids": ids}
        got, want = audit_says(arch, n, cfg), engine_says(engine, arch, n, cfg)
        if got != want:
            wrong[name] = f"ids {ids}: eagle-audit {got}, vLLM {want}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_the_issue_claims_hold(engine):
    d = engine.run("DeepseekV3ForCausalLM", 61, {"eagle_aux_hidden_state_layer_ids": [0, 30, 58]})
    assert (d.failed_at, d.error) == ("first forward", "TypeError")
    assert engine.run("LlamaForCausalLM", 32, {"eagle_aux_hidden_state_layer_ids": [2, 16, 32]}).captured == \
        ("B2", "B16", "B32")  # N: the pre-norm final boundary
    nested_only = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
    assert engine.run("LlamaForCausalLM", 32, nested_only).captured == ("B2", "B16", "B29")  # V2: the default


CONFIGS = [
    {}, {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}, {"eagle_aux_hidden_state_layer_ids": []},
    {"eagle_aux_hidden_state_layer_ids": None}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_aux_hidden_state_layer_ids": [], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_aux_hidden_state_layer_ids": [4, 5], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_config": {"layer_ids": [1, 2]}}, {"eagle_aux_hidden_state_layer_ids": [], "eagle_config": {"layer_ids": [3]}},
    {"eagle_config": {"layer_ids": []}}, {"dflash_config": {"target_layer_ids": [1, 2]}},
    {"dflash_config": {"target_layer_ids": []}, "eagle_config": {"layer_ids": [5]}},
    {"dflash_config": {"layer_ids": [4, 6]}}, {"dflash_config": {"target_layer_ids": [1, 2]}, "eagle_config": {}},
    {"dflash_config": {"target_layer_ids": [1, 2]}, "eagle_config": {"use_aux_hidden_state": True}},
    {"dflash_config": {"target_layer_ids": [1, 2]}, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [7]}},
    {"dspark_target_layer_ids": [1, 2]}, {"dspark_target_layer_ids": [1, 2], "model_type": "deepseek_v41"},
    {"target_layer_ids": [3]}, {"target_layer_ids": [3], "dspark_target_layer_ids": [9]},
]


@pytest.fixture(scope="module")
def probed_v2(vllm_wheel):
    """The V2 convention `eagle-audit probe vllm` derives from the same wheel's source."""
    return to_convention(probe_engine("vllm", vllm_wheel), builtin_base("vllm"))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: str(c))
def test_ids_readers(engine, probed_v2, cfg):
    """Both runners' readers: the ids they hand the setter (None: the model's default); the V2 places,
    shifts and empty-list handling as the probe derives them from source, too."""
    for conv, reader in ((V2, engine.ids_v2), (V1, engine.ids_v1), (probed_v2, engine.ids_v2)):
        want = reader(cfg)
        ids, place, shift = conv.read_draft_ids(cfg)
        got = None if ids is None else tuple(i + shift for i in ids)
        assert got == (tuple(want) if want is not None else None), (conv.name, place)
