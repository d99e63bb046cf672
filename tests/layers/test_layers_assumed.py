"""IDS_ASSUMED: a draft that declares no ids is audited on two defaults, and says so; ``trained_ids`` keep the
order given (modelopt's Megatron plugin builds its default with ``list(set(...))``: [1, 76, 39] on 80 layers)."""

from eagle_audit.states import State


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def test_undeclared_ids_warn_naming_both_defaults(config_only_target, make_draft, audit):
    # nvidia/Llama-3.3-70B-Instruct-Eagle3 (vLLM #50170): 80 layers, no ids, vLLM's default (2, 40, 77)
    r = audit(config_only_target("LlamaForCausalLM", 80), make_draft(), engine="vllm", static=True)
    assert r.verdict == "match"
    [f] = [f for f in r.findings if f.code == "IDS_ASSUMED"]
    assert f.severity == "warning"
    assert "both sides are assumed defaults" in f.what
    assert "SpecForge 0.2.0's default" in f.what and "vLLM (V2 model runner, default) 0.33.0's default" in f.what
    assert "[B2, B40, B77]" in f.what
    for how in ("`trained_ids`", "`trained_boundaries`", "`trainer='fingerprint'`"):
        assert how in f.fix


def test_declared_ids_do_not_warn(config_only_target, make_draft, audit):
    r = audit(config_only_target("LlamaForCausalLM", 80), make_draft(nested_ids=[1, 39, 76]), static=True)
    assert "IDS_ASSUMED" not in codes(r)


def test_pinned_trained_side_still_names_the_engine_default(config_only_target, make_draft, audit):
    r = audit(config_only_target("LlamaForCausalLM", 80), make_draft(), engine="vllm", static=True,
              trained_boundaries="2,40,77")
    [f] = [f for f in r.findings if f.code == "IDS_ASSUMED"]
    assert "the engine's side is its default" in f.what and "Trained: pinned" in f.what


def test_trained_ids_keep_the_order_given(config_only_target, make_draft, audit):
    target = config_only_target("LlamaForCausalLM", 80)
    r = audit(target, make_draft(), engine="vllm", static=True, trainer="modelopt", trained_ids=(1, 76, 39))
    assert r.trained.states == (State(2), State(77), State(40))  # OUT-k: +1, in the order given
    assert r.served.states == (State(2), State(40), State(77))
    assert "ORDER_MISMATCH" in codes(r, "error")
    assert any("`trained_ids` [1, 76, 39]: kept in the order given" in n for n in r.provenance["notes"])
    sorted_ids = audit(target, make_draft(), engine="vllm", static=True, trainer="modelopt", trained_ids=(1, 39, 76))
    assert sorted_ids.verdict == "match"
    assert not any("kept in the order given" in n for n in sorted_ids.provenance["notes"])
