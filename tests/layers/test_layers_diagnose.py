"""Trained vs served wiring -> slots and findings, on frozen descriptions only (no model needed)."""

import json

import pytest
import torch

from eagle_audit.conventions import Wiring, get_convention
from eagle_audit.draft.read import read_draft
from eagle_audit.layers.diagnose import CHECKS, SlotStats, diagnose, slot_verdict
from eagle_audit.layers.result import CODES, Finding
from eagle_audit.resolution import Resolution, given_side, side_of
from eagle_audit.states import State
from eagle_audit.target import TargetInfo

LLAMA = "LlamaForCausalLM"


def info(n=8, hidden=32, vocab=512, arch=LLAMA):
    return TargetInfo(name="tiny-target", source="tiny-target", architecture=arch, model_type="llama", num_layers=n,
                      hidden_size=hidden, vocab_size=vocab, config_sha256="0" * 64)


def given(*boundaries, normed_last=False):
    states = tuple(State(b) for b in boundaries)
    if normed_last:
        states = states[:-1] + (State(boundaries[-1], normed=True),)
    return Wiring("user", "trainer", "-", "given", None, "boundaries", "--trained-boundaries", tuple(boundaries),
                  states)


def run(draft_path, target=None, engine="sglang", trainer="specforge", trained=None, stats=None):
    draft = read_draft(str(draft_path))
    target = target or info()
    eng = get_convention(engine, "engine")
    tr = get_convention(trainer, "trainer") if trainer else None
    if trained is None:
        trained_side = side_of(tr, draft.config, target.architecture, target.num_layers)
    else:
        trained_side = given_side(trained, draft, tr)
    served = side_of(eng, draft.config, target.architecture, target.num_layers)
    res = Resolution(trained_side, served, target.architecture, target.num_layers)
    slots, findings = diagnose(draft, target, res, stats)
    return slots, findings


def by_code(findings):
    out = {}
    for f in findings:
        out.setdefault(f.code, []).append(f)
    return out


@pytest.mark.parametrize("trained, served, verdict", [
    (State(3), State(3), "ok"),
    (State(3), State(2), "offset -1"),
    (State(3), State(15), "offset +12"),
    (State(0), State(2), "embedding"),
    (State(2), State(0), "embedding"),
    (State(8, normed=True), State(8), "norm"),
    (State(3), None, "missing"),
    (None, State(3), "extra"),
])
def test_slot_verdict(trained, served, verdict):
    assert slot_verdict(trained, served) == verdict


def test_one_check_per_finding_family():
    names = [c.__name__ for c in CHECKS]
    assert names[:7] == ["engine_unsupported", "engine_crash", "not_residual_stream", "ids_not_read",
                         "unreachable_layer", "aux_count_mismatch", "order_mismatch"]
    assert names[-1] == "block_ids_disagree"  # diagnose_block registers last: its findings are reported last
    assert len(names) == len(set(names))


def test_findings_only_use_documented_codes():
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding("OFF_BY_ONE", "error", 0, "", "", "")
    assert len(CODES) == 24  # + STREAM_MISMATCH (hyper-connection targets), TRAINED_WIRING_DIFFERS, REPRESENTATION_MISMATCH (fingerprint), DRAFT_CLASS_UNSUPPORTED,
    # TRAINER_REFUSES_IDS, ENGINE_STATE_MISMATCH, ENGINE_STATE_SHIFTED (--server), BLOCK_IDS_DISAGREE, IDS_ASSUMED, DRAFT_CONFIG_KEY


# ---------------------------------------------------------------------------- wiring findings


def test_matching_wiring_has_no_findings(make_draft):
    slots, findings = run(make_draft(nested_ids=[1, 3, 4]))
    assert findings == ()
    assert [(s.trained, s.served, s.verdict) for s in slots] == [
        (State(2), State(2), "ok"), (State(4), State(4), "ok"), (State(5), State(5), "ok")]


def test_ids_not_read_is_an_error_only_when_the_default_differs(make_draft):
    _, findings = run(make_draft(top_level_ids=[1, 3, 6]), trainer="speculators")
    f = by_code(findings)["IDS_NOT_READ"][0]
    assert f.severity == "error" and f.slot is None
    assert "eagle_aux_hidden_state_layer_ids" in f.what and "[B2, B4, B5]" in f.what
    _, findings = run(make_draft(top_level_ids=[2, 4, 5]), trainer="speculators")
    assert [(f.code, f.severity) for f in findings] == [("IDS_NOT_READ", "warning")]


def test_layer_offsets_name_the_layers_and_the_cosine(make_draft):
    stats = {0: SlotStats(0.91234, State(2), 1.0), 1: SlotStats(0.5, None, None), 2: SlotStats(0.25, None, None)}
    slots, findings = run(make_draft(nested_ids=[1, 3, 4]), engine="vllm-v1", stats=stats)
    offsets = by_code(findings)["LAYER_OFFSET"]
    assert [f.slot for f in offsets] == [0, 1, 2]
    assert offsets[0].what == ("Trained on B2 (output of layer 1), served B1 (output of layer 0): 1 layer shallower "
                               "(cosine 0.912).")
    assert slots[0].cosine == 0.91234 and slots[0].nearest == State(2)


def test_embedding_in_slot_zero_shifts_the_rest(make_draft):
    _, findings = run(make_draft(), trained=given(0, 2, 4))  # sglang default feeds [2, 4, 5]
    emb = by_code(findings)["EMBEDDING_COMPOSITION"]
    assert [f.slot for f in emb] == [0]
    assert "training put the embedding in slot 0" in emb[0].what
    assert [f.slot for f in by_code(findings)["LAYER_OFFSET"]] == [1, 2]


def test_order_mismatch_replaces_per_slot_findings(make_draft):
    _, findings = run(make_draft(nested_ids=[6, 1, 3]), trainer="specforge-hf")
    assert [f.code for f in findings] == ["ORDER_MISMATCH"]
    assert "[B7, B2, B4]" in findings[0].what and "[B2, B4, B7]" in findings[0].what


def test_unreachable_capture_index(make_draft):
    # SpecForge 0.2.0 captures through the same SGLang loop: id N-1 never reaches a trained state either
    _, findings = run(make_draft(nested_ids=[1, 3, 7]))
    assert [(f.code, f.slot) for f in findings] == [("UNREACHABLE_LAYER", 2), ("AUX_COUNT_MISMATCH", None)]
    assert "The trained wiring (specforge) has 2 states" in findings[1].what
    slots, findings = run(make_draft(nested_ids=[1, 3, 7]), trainer="specforge-hf")
    assert [(f.code, f.slot) for f in findings] == [("UNREACHABLE_LAYER", 2)]
    assert "Id 7 becomes capture index 8" in findings[0].what and "0..7" in findings[0].what
    assert slots[2].verdict == "missing"


def test_post_norm_training_state(make_draft):
    _, findings = run(make_draft(nested_ids=[1, 3, 6]), trained=given(2, 4, 8, normed_last=True))
    assert [(f.code, f.slot) for f in findings] == [("NORM_MISMATCH", 2)]
    assert "B8+norm (final state after the final norm)" in findings[0].what


def test_aux_count_findings(make_draft):
    _, findings = run(make_draft(nested_ids=[1, 3, 4]), trained=given(2, 4))
    (f,) = by_code(findings)["AUX_COUNT_MISMATCH"]
    assert "The trained wiring (user) has 2 states, but fc.weight takes 3 x 32" in f.what
    _, findings = run(make_draft(nested_ids=[1, 3, 4], extra={"num_aux_hidden_states": 2}))
    (f,) = by_code(findings)["AUX_COUNT_MISMATCH"]
    assert "sizes the draft's fc for 2 aux states" in f.what
    assert f.fix == "see the fix below"  # where the count goes depends on the loader: the fix finds it
    _, findings = run(make_draft(nested_ids=[1, 3, 4, 5]), trained=given(2, 4, 5))
    msgs = [f.what for f in by_code(findings)["AUX_COUNT_MISMATCH"]]
    assert any("sizes the draft's fc for 4 aux states" in m for m in msgs)
    assert any("feeds 4 states [B2, B4, B5, B6], but fc takes 3" in m for m in msgs)


# ---------------------------------------------------------------------------- draft-side findings


def test_unimplemented_flag_is_a_norm_mismatch(make_draft):
    path = make_draft(top_level_ids=[2, 4, 5], speculators=True, extra={"norm_before_residual": True})
    _, findings = run(path, trainer="speculators")
    (f,) = by_code(findings)["NORM_MISMATCH"]
    assert ("norm_before_residual: training used True, SGLang 0.5.23 uses False (it does not implement this flag)"
            in f.what)
    assert f.fix.startswith("Serve with an engine that implements norm_before_residual")
    _, findings = run(path, trainer="speculators", engine="vllm")  # vLLM implements it
    assert "NORM_MISMATCH" not in by_code(findings)


def test_honoured_flag_with_a_different_default(make_draft):
    # the HF-era SpecForge convention and SGLang both implement norm_before_fc; TensorRT-LLM implements no draft flag
    path = make_draft(nested_ids=[1, 3, 4], extra={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4],
                                                                      "norm_before_fc": True}})
    _, findings = run(path, trainer="specforge-hf")
    assert "NORM_MISMATCH" not in by_code(findings)
    _, findings = run(path, engine="trtllm", trainer="specforge-hf")
    (f,) = by_code(findings)["NORM_MISMATCH"]
    assert "norm_before_fc: training used True" in f.what


def test_fc_skipped_only_where_the_engine_skips_it(make_draft):
    path = make_draft(n_aux=1, nested_ids=[3])
    _, findings = run(path)
    (refused,) = by_code(findings).pop("TRAINER_REFUSES_IDS")  # SpecForge 0.2.0 takes exactly three ids
    assert "exactly three non-negative integers, got [3]" in refused.what
    (f,) = [f for f in findings if f.code != "TRAINER_REFUSES_IDS"]
    assert f.code == "FC_SKIPPED" and "1 aux state(s) x 32 = 32" in f.what
    _, findings = run(path, engine="vllm", trained=given(3))
    assert "FC_SKIPPED" not in by_code(findings)
    off = json.loads((path / "config.json").read_text())
    off["eagle_config"]["use_aux_hidden_state"] = False
    (path / "config.json").write_text(json.dumps(off))
    _, findings = run(path)
    assert "FC_SKIPPED" not in by_code(findings)


def test_hidden_size_mismatch(make_draft):
    path = make_draft(hidden=48, nested_ids=[1, 3, 4], drop=("target_hidden_size",))
    _, findings = run(path)
    (f,) = findings
    assert f.code == "HIDDEN_SIZE_MISMATCH"
    assert "size fc as n_aux x hidden_size = 144 instead of 96" in f.what
    assert f.fix == "Set target_hidden_size = 32 in config.json."


def test_vocab_map_missing(make_draft):
    _, findings = run(make_draft(nested_ids=[1, 3, 4], with_d2t=False))
    (f,) = findings
    assert f.code == "VOCAB_MAP_MISSING" and "draft_vocab_size is 128 < the target's 512" in f.what
    _, findings = run(make_draft(nested_ids=[1, 3, 4], draft_vocab=None))
    assert findings == ()


@pytest.mark.parametrize("edit, problem", [
    (lambda sd: sd.update(d2t=torch.arange(128) + 300), "i + d2t[i] spans 300..554, outside the target vocab 0..511"),
    (lambda sd: sd.update(d2t=sd["d2t"][:100]), "d2t has 100 entries, draft_vocab_size is 128"),
    (lambda sd: sd.update(t2d=sd["t2d"][:500]), "t2d has 500 entries, the target vocab 512"),
    (lambda sd: sd["t2d"].__setitem__(400, True), "t2d marks 129 ids, d2t maps 128"),
    (lambda sd: sd.update(d2t=sd["d2t"] + 1), "some i + d2t[i] are not marked in t2d"),
])
def test_vocab_map_invalid(make_draft, edit, problem):
    _, findings = run(make_draft(nested_ids=[1, 3, 4], edit=edit))
    (f,) = findings
    assert f.code == "VOCAB_MAP_INVALID"
    assert problem in f.what
