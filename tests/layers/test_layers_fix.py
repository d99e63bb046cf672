"""Inverting an engine rule: the config change after which the engine feeds the trained states."""

import itertools

import pytest

from eagle_audit.conventions import SCHEMA, get_convention, parse_convention
from eagle_audit.draft.read import read_draft
from eagle_audit.conventions import Wiring
from eagle_audit.layers.fix import merge_patch
from eagle_audit.layers.fix import plan_fix as _plan_fix
from eagle_audit.resolution import Resolution, given_side, side_of
from eagle_audit.states import State

LLAMA, DSV3, GPTOSS = "LlamaForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM"


def states(*bs):
    return tuple(State(b) for b in bs)


@pytest.fixture
def draft(make_draft):
    """A 3-slot draft (hidden 32) whose ids, in every place, resolve to none of the tested states."""
    return read_draft(str(make_draft(nested_ids=[0, 1, 2], top_level_ids=[1, 2, 3])))


def plan_fix(eng, arch, n, trained, draft, target_hidden, trainer=None):
    """The fix for an engine and trained states given directly (the trainer's flags, if named)."""
    given = Wiring("user", "trainer", "-", "given", None, "boundaries", "test", tuple(s.boundary for s in trained),
                   tuple(trained))
    res = Resolution(given_side(given, draft, trainer), side_of(eng, draft.config, arch, n), arch, n)
    return _plan_fix(res, draft, target_hidden)


def fix_for(engine, arch, n, trained, draft, trainer=None):
    eng = engine if not isinstance(engine, str) else get_convention(engine, "engine")
    tr = get_convention(trainer, "trainer") if trainer else None
    return plan_fix(eng, arch, n, trained, draft, 32, tr)


def test_merge_patch_is_rfc7386_and_pure():
    config = {"a": 1, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "use_aux_hidden_state": True},
              "gone": 0}
    patch = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31]}, "gone": None, "new": {"x": [1]}}
    out = merge_patch(config, patch)
    assert out == {"a": 1, "new": {"x": [1]},
                   "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31], "use_aux_hidden_state": True}}
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3] and "gone" in config
    out["new"]["x"].append(2)
    assert patch["new"]["x"] == [1]


@pytest.mark.parametrize("engine, arch, n, trained, key, ids", [
    ("sglang", LLAMA, 30, (0, 3, 16), "eagle_config.eagle_aux_hidden_state_layer_ids", (-1, 2, 15)),
    ("sglang", LLAMA, 61, (0, 3, 31), "eagle_config.eagle_aux_hidden_state_layer_ids", (-1, 2, 30)),
    ("sglang", DSV3, 61, (0, 3, 31), "eagle_config.eagle_aux_hidden_state_layer_ids", (0, 3, 31)),
    ("sglang", DSV3, 61, (2, 30, 58), "eagle_config.eagle_aux_hidden_state_layer_ids", (1, 29, 57)),
    ("sglang", GPTOSS, 6, (2, 4, 6), "eagle_config.eagle_aux_hidden_state_layer_ids", (2, 4, 6)),
    ("sglang", GPTOSS, 6, (2, 4, 5), "eagle_config.eagle_aux_hidden_state_layer_ids", (1, 3, 4)),
    ("vllm", LLAMA, 8, (1, 3, 6), "eagle_aux_hidden_state_layer_ids", (1, 3, 6)),
    ("vllm", LLAMA, 8, (0, 3, 8), "eagle_aux_hidden_state_layer_ids", (0, 3, 8)),
    ("vllm-v1", LLAMA, 8, (2, 4, 5), "eagle_aux_hidden_state_layer_ids", (2, 4, 5)),
    ("trtllm", LLAMA, 8, (2, 4, 8), "eagle_config.eagle_aux_hidden_state_layer_ids", (1, 3, 7)),
])
def test_fix_ids_per_engine_rule(draft, engine, arch, n, trained, key, ids):
    fx = fix_for(engine, arch, n, states(*trained), draft)
    assert fx.possible, fx.explanation
    assert (fx.key, fx.ids) == (key, ids)
    assert fx.resolved == states(*trained)
    if any(i < 0 for i in ids):
        assert "Id -1 addresses the embedding output" in fx.explanation


@pytest.mark.parametrize("engine, arch, n", [("sglang", LLAMA, 12), ("sglang", DSV3, 12), ("sglang", GPTOSS, 12),
                                             ("vllm", LLAMA, 12), ("vllm-v1", DSV3, 12), ("trtllm", LLAMA, 12)])
def test_every_fix_resolves_to_the_trained_states(make_draft, engine, arch, n):
    """Property: for every ascending triple a config fix exists iff the engine can reach it, and
    applying the patch makes the engine feed exactly the trained states. The one exception is
    SGLang's DeepSeek rule: ids starting with 1 get +1 and ids starting with 0 are verbatim, so no
    ids make it feed a set whose first state is B1."""
    eng = get_convention(engine, "engine")
    cfg_draft = read_draft(str(make_draft(nested_ids=[7, 8, 9], top_level_ids=[7, 8, 9])))
    current = eng.resolve(cfg_draft.config, arch, n).states
    lo, hi = eng.rule_for(arch).reachable(n)
    for triple in itertools.combinations(range(n + 1), 3):
        fx = plan_fix(eng, arch, n, states(*triple), cfg_draft, 32)
        reachable = all(lo <= b <= hi for b in triple)
        deepseek_b1 = engine == "sglang" and arch == DSV3 and triple[0] == 1
        if fx.possible:
            fixed = merge_patch(cfg_draft.config, fx.patch)
            assert eng.resolve(fixed, arch, n).states == states(*triple), (triple, fx.patch)
        elif states(*triple) == current:
            assert "already feeds" in fx.explanation
        else:
            assert not reachable or deepseek_b1, (triple, fx.explanation)
        assert fx.possible == (reachable and not deepseek_b1 and states(*triple) != current), triple


def test_unreachable_boundary_has_no_config_fix(draft):
    fx = fix_for("sglang", LLAMA, 8, states(2, 4, 8), draft)
    assert not fx.possible and fx.patch == {}
    assert "captures only boundaries 0..7; training used B8" in fx.explanation
    fx = fix_for("vllm", DSV3, 61, states(0, 3, 31), draft)  # DeepSeek's residual is None at layer 0
    assert not fx.possible and "captures only boundaries 1..61; training used B0" in fx.explanation


def test_post_norm_order_and_duplicates_have_no_config_fix(draft):
    fx = fix_for("sglang", LLAMA, 8, (State(2), State(4), State(8, normed=True)), draft)
    assert not fx.possible and "never applies the final norm" in fx.explanation
    fx = fix_for("sglang", LLAMA, 8, states(7, 2, 4), draft)
    assert not fx.possible and "permute the column blocks of fc.weight" in fx.explanation
    fx = fix_for("sglang", LLAMA, 8, states(2, 2, 4), draft)
    assert not fx.possible and "collapses duplicate states" in fx.explanation


def test_a_config_order_engine_can_take_unsorted_ids(draft):
    data = {"schema": SCHEMA, "name": "fork", "kind": "engine", "version": "1", "source": "ours",
            "ids_from": ["nested"], "order": "config", "fallback_rule": "r",
            "rules": {"r": {"default_ids": "[2, N // 2, N - 3]", "explicit": [{"shift": 1}]}}}
    fx = fix_for(parse_convention(data, "fork.json"), LLAMA, 8, states(7, 2, 4), draft)
    assert fx.possible and fx.ids == (6, 1, 3)


def test_removing_ids_when_only_the_default_works(make_draft):
    data = {"schema": SCHEMA, "name": "fork", "kind": "engine", "version": "1", "source": "ours",
            "ids_from": ["nested"], "rules": {"r": {"default_ids": "[1, 2, 3]", "explicit": [  # DeepSeek-like
                {"when": "ids[0] == 1", "shift": 1}, {"shift": 0}]}}, "fallback_rule": "r"}
    eng = parse_convention(data, "fork.json")
    d = read_draft(str(make_draft(nested_ids=[5, 6, 7])))
    fx = plan_fix(eng, LLAMA, 8, states(1, 2, 3), d, 32)
    assert fx.possible and fx.ids is None and fx.key is None
    assert fx.patch == {"eagle_config": {"eagle_aux_hidden_state_layer_ids": None}}
    assert "Remove the ids" in fx.explanation
    assert eng.resolve(merge_patch(d.config, fx.patch), LLAMA, 8).states == states(1, 2, 3)


def test_engine_that_reads_no_ids(draft):
    fx = fix_for(get_convention("eagle", "trainer"), LLAMA, 8, states(1, 3, 6), draft)  # any convention works here
    assert not fx.possible and "reads no ids from the draft" in fx.explanation


def test_aux_count_and_hidden_size_are_patched_too(make_draft):
    d = read_draft(str(make_draft(nested_ids=[0, 2, 5], extra={"num_aux_hidden_states": 2})))
    fx = fix_for("sglang", LLAMA, 8, states(2, 4, 5), d)
    assert fx.patch == {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}, "num_aux_hidden_states": 3}
    d = read_draft(str(make_draft(hidden=48, nested_ids=[1, 3, 4], drop=("target_hidden_size",))))
    fx = fix_for("sglang", LLAMA, 8, states(2, 4, 5), d)
    assert fx.possible and fx.patch == {"target_hidden_size": 32,
                                        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}
    assert fx.explanation.endswith("Also set target_hidden_size = 32.")


def test_an_honoured_flag_with_another_default_is_patched(make_draft):
    data = {"schema": SCHEMA, "name": "fork", "kind": "engine", "version": "1", "source": "ours",
            "ids_from": ["nested"], "fallback_rule": "r",
            "rules": {"r": {"default_ids": "[2, N // 2, N - 3]", "explicit": [{"shift": 1}]}},
            "draft_flags": {"norm_before_fc": {"honoured": True, "default": True}}}
    d = read_draft(str(make_draft(nested_ids=[1, 3, 4])))
    specforge = get_convention("specforge", "trainer")
    fx = plan_fix(parse_convention(data, "fork.json"), LLAMA, 8, states(2, 4, 5), d, 32, specforge)
    assert fx.possible and fx.patch["norm_before_fc"] is False


def test_no_config_fix_for_what_config_cannot_change(make_draft):
    # an unimplemented draft flag
    d = read_draft(str(make_draft(top_level_ids=[2, 4, 5], speculators=True, extra={"norm_before_residual": True})))
    fx = fix_for("sglang", LLAMA, 8, states(2, 4, 5), d, trainer="speculators")
    assert not fx.possible and "does not implement the draft flag norm_before_residual" in fx.explanation
    # the wiring is right already (the error is elsewhere, e.g. the vocab map): nothing to write
    d = read_draft(str(make_draft(nested_ids=[1, 3, 4], with_d2t=False)))
    fx = fix_for("sglang", LLAMA, 8, states(2, 4, 5), d)
    assert not fx.possible and fx.patch == {} and "already feeds the trained states" in fx.explanation
    # the trained wiring does not fit fc: writing 2 ids for a 3-slot fc would break loading
    fx = fix_for("sglang", LLAMA, 8, states(2, 4), d)
    assert not fx.possible and "2 states but fc.weight takes 3" in fx.explanation
