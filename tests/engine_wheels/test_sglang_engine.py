"""SGLang 0.5.23's own code, executed on CPU (tests/engine_wheels/sglang_engine.py), against eagle-audit's resolution
of probes/sglang.json: for every architecture of the matrix and every id set, the draft config goes through
the engine's ids reader, setter and target forward; eagle-audit must name exactly the states the engine feeds
(in order, saying which are not the residual stream), or the engine's own failure (exception, message, phase).
"""

from __future__ import annotations

import pytest

from eagle_audit.conventions import builtin_conventions
from eagle_audit.probe import builtin_base, to_convention
from tests.engine_wheels.sglang_engine import ARCHS, EngineRun, draft_reads

SGLANG = builtin_conventions("engine")["sglang"]
FLAGS = ("norm_before_fc", "fc_norm", "norm_output")


def id_sets(n: int) -> dict[str, list[int] | None]:
    return {
        "default (no ids)": None, "OUT-k default": [1, n // 2 - 1, n - 4], "IN-k default": [2, n // 2, n - 3],
        "embedding -1": [-1, n // 2 - 1, n - 4], "id 0": [0, n // 2, n - 3], "with N-1": [1, n // 2 - 1, n - 1],
        "with N": [2, n // 2, n], "negative -2": [-2, n // 2, n - 4], "below -N": [-n - 2, n // 2, n - 4],
        "duplicates": [1, 1, n - 4], "empty": [], "single": [n - 4], "unsorted": [n - 4, 1, n // 2 - 1],
        "first id 1, with N": [1, n // 2, n],
    }


def nested(ids: list[int] | None) -> dict:
    return {} if ids is None else {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}


@pytest.fixture(scope="module")
def engine(sglang_wheel) -> EngineRun:
    return EngineRun(sglang_wheel)


def engine_says(engine: EngineRun, arch: str, n: int, draft_config: dict) -> tuple:
    use_aux, ids = engine.resolve_ids(draft_config)
    assert use_aux
    out = engine.run(arch, n, ids)
    if out.failed_at:
        return ("fails", out.failed_at, f"{out.error}: {out.message}")
    return ("feeds", out.captured)


@pytest.fixture(scope="module")
def probed(wheel_probe):
    """The convention `eagle-audit probe sglang` derives from the same wheel's source."""
    return to_convention(wheel_probe, builtin_base("sglang"))


def audit_says(arch: str, n: int, draft_config: dict, conv=SGLANG) -> tuple:
    w = conv.resolve(draft_config, arch, n)
    if w.failure:
        return ("fails", w.failure.at, w.failure.text())
    branch = dict(w.not_residual)
    return ("feeds", tuple(f"branch{s.boundary - 1}" if s.boundary in branch else s.label() for s in w.states))


@pytest.mark.parametrize("n", [8, 61])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_capture_matches_the_engine(engine, probed, arch, n):
    """probes/sglang.json, and the convention the probe derives from source, both say what SGLang does."""
    wrong = {}
    for name, ids in id_sets(n).items():
        cfg = nested(ids)
        want = engine_says(engine, arch, n, cfg)
        for which, conv in (("probes/sglang.json", SGLANG), ("probe", probed)):
            got = audit_says(arch, n, cfg, conv)
            if got != want:
                wrong[f"{which}, {name}"] = f"ids {ids}: eagle-audit {got}, SGLang {want}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_the_issue_claims_hold(engine):
    """The facts issue 12 reports, as SGLang 0.5.23 produces them."""
    n = 48
    q = engine.run("Qwen3MoeForCausalLM", n, [1, 23, n - 1])
    assert (q.failed_at, q.error, q.message) == ("start-up", "IndexError", f"index {n} is out of range")
    assert engine.run("Qwen3MoeForCausalLM", n, [-2, 23, 44]).captured == ("B24", "B45", f"B{n - 1}")  # B_{N+id+1}
    d = engine.run("DeepseekV3ForCausalLM", 61, [2, 30, 61])
    assert (d.failed_at, d.error, d.message) == ("first forward", "RuntimeError", "captured 2 of 3 aux hidden states")
    g = engine.run("Gemma3ForCausalLM", 34, [1, 15, 28])
    assert g.captured == ("branch1", "branch15", "branch28")  # not B2, B16, B29
    assert engine.run("Gemma3ForCausalLM", 34, [-1, 15, 28]).captured[0] == "B0"


@pytest.mark.parametrize("cfg", [
    {}, {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": None}}, {"eagle_config": None}, {"eagle_config": {}},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": []}},
    {"eagle_aux_hidden_state_layer_ids": [4, 5, 6], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_config": {"layer_ids": [1, 2, 3]}},
], ids=lambda c: str(c))
def test_ids_reader(engine, cfg):
    _, ids = engine.resolve_ids(cfg)
    w = SGLANG.resolve(cfg, "LlamaForCausalLM", 32)
    assert (list(w.ids) if w.ids is not None else None) == ids
    assert w.ids_source == ("default" if ids is None else "nested")


@pytest.mark.parametrize("cfg", [
    {}, {"fc_norm": True}, {"eagle_config": {"fc_norm": True}}, {"use_aux_norm": True},
    {"fc_norm": False, "use_aux_norm": True}, {"norm_before_fc": True}, {"eagle_config": {"norm_before_fc": True}},
    {"norm_before_fc": True, "eagle_config": {"norm_before_fc": False}},
    {"norm_before_fc": False, "eagle_config": {"norm_before_fc": True}}, {"norm_output": True},
    {"eagle_config": {"norm_output": True}}, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": []}},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}}, {"eagle_aux_hidden_state_layer_ids": [1, 2]},
    {"num_aux_hidden_states": 2, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}},
    {"num_aux_hidden_states": None, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}},
], ids=lambda c: str(c))
def test_draft_reads(engine, cfg):
    """llama_eagle3.py's LlamaModel.__init__: the flags it sets and the aux count it sizes fc for."""
    want = draft_reads(engine.src, cfg)
    got = {"aux": SGLANG.aux_count(cfg), **{f: bool(SGLANG.flag(f, cfg)) for f in FLAGS}}
    assert got == {k: want[k] for k in got}
