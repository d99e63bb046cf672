"""The second line of evidence: fc's weights read against the states (eagle_audit/fingerprint/weights.py), and the
one verdict from the two lines (``combine``). The states are SmolLM2's on the fingerprint's corpus; the fc blocks
are trained canaries' (tests/fingerprint/fp_canaries.py), an untouched nn.Linear, and the hard cases built from
them: a draft fine-tuned from another (both trainings in the block), an fc started from another draft's, a slot
left untouched."""

from __future__ import annotations

import types

import pytest
import torch
from safetensors.torch import load_file

from eagle_audit.fingerprint.result import SlotInference
from eagle_audit.fingerprint.weights import WIDTH_PER_K, K, combine, read_weights, readable
from eagle_audit.states import State

from tests.fingerprint.fp_canaries import CANARIES


def _fc(weight: torch.Tensor):
    """What the reading reads of a draft: its fc (and no input norm, as the canaries train it)."""
    lin = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(weight)
    return types.SimpleNamespace(fc=lin)


def _canary_fc(path) -> torch.Tensor:
    files = sorted(path.glob("*.safetensors"))
    for f in files:
        w = load_file(str(f))
        for k, v in w.items():
            if k.endswith("fc.weight"):
                return v.float()
    raise AssertionError(f"no fc.weight in {path}")


def _init(shape, seed: int = 0) -> torch.Tensor:
    """An untouched fc block, as nn.Linear draws it."""
    torch.manual_seed(seed)
    return torch.nn.Linear(shape[1], shape[0], bias=False).weight.detach().clone()


def test_an_untouched_fc_gives_no_reading_in_any_slot(fp_corpus):
    reading = read_weights(_fc(_init((576, 3 * 576))), fp_corpus, 3)
    assert [s.informed for s in reading.slots] == [False, False, False]
    assert all(s.text().startswith("no reading") for s in reading.slots)
    assert all(abs(a - 32 / 576) < 0.03 for s in reading.slots for a in s.alignment)  # K / H_t, as derived


def test_narrow_blocks_are_not_read():
    """Below WIDTH_PER_K * K per slot a random subspace covers too much of the space to separate neighbours: no
    reading (the tiny 32-wide targets of the tests); a draft without an fc has none either."""
    assert readable(_fc(_init((576, 3 * 576))), 3)
    assert readable(_fc(_init((64, 3 * WIDTH_PER_K * K))), 3)
    assert not readable(_fc(_init((64, 3 * (WIDTH_PER_K * K - 1)))), 3)
    assert not readable(_fc(_init((32, 3 * 32))), 3)
    assert not readable(types.SimpleNamespace(fc=None), 3)


def _slot(index, candidates, undetermined=False, uninformed=False):
    c = tuple(State(b) for b in candidates)
    return SlotInference(index, c[0], c[1] if len(c) > 1 else None, None, None, c, len(c) > 1,
                         undetermined=undetermined, uninformed=uninformed)


@pytest.mark.parametrize("name", ["2-15-27", "5-12-29", "emb-3-16"])
def test_a_trained_canary_s_blocks_name_its_states(name, fp_canaries, fp_corpus):
    truth = tuple(State(b) for b in CANARIES[name][0])
    reading = read_weights(_fc(_canary_fc(fp_canaries[name])), fp_corpus, len(truth))
    for sl, t in zip(reading.slots, truth):
        assert sl.informed and sl.best == t and t in sl.candidates, (name, sl.index, sl.text())


def test_a_slot_left_untouched_has_no_reading_and_the_others_still_read(fp_canaries, fp_corpus):
    w = _canary_fc(fp_canaries["5-12-29"]).clone()
    w[:, 576:1152] = _init((576, 576), seed=4)
    reading = read_weights(_fc(w), fp_corpus, 3)
    assert not reading.slots[1].informed
    assert reading.slots[0].best == State(5) and reading.slots[2].best == State(29)
    function = (_slot(0, [5]), _slot(1, [11, 12, 13, 14, 10], undetermined=True), _slot(2, [29]))
    out = combine(function, reading)
    assert out[1].undetermined and out[1].lines == "function" and out[1].weights.startswith("no reading")
    assert [o.lines for o in (out[0], out[2])] == ["both", "both"]


@pytest.mark.parametrize("old_share", [1.0, 0.3], ids=["fine-tuned-from-another", "fc-started-from-another"])
def test_old_training_in_the_weights_never_names_a_slot_against_the_function(old_share, fp_canaries, fp_corpus):
    """Drafts whose fc holds another training (2-15-27's) beside the last (5-12-29's): the weights may read either;
    the function, which runs the draft as last trained, reads 5-12-29. The verdict names 5-12-29's states or
    nothing, never 2-15-27's."""
    old, new = _canary_fc(fp_canaries["2-15-27"]), _canary_fc(fp_canaries["5-12-29"])
    reading = read_weights(_fc(old_share * old + new), fp_corpus, 3)
    function = tuple(_slot(i, [b]) for i, b in enumerate(CANARIES["5-12-29"][0]))
    for sl, truth in zip(combine(function, reading), (5, 12, 29)):
        assert sl.undetermined or sl.candidates == (State(truth),), sl.text()
        if sl.undetermined:  # the disagreement is one line with both readings
            assert sl.lines == "disagree" and "function B" in sl.text() and "weights" in sl.text()


def test_the_two_lines_combined():
    from eagle_audit.fingerprint.weights import WeightReading, WeightSlot, Statistic

    def w(index, cands, informed=True):
        c = tuple(State(b) for b in cands)
        return WeightSlot(index, (), c[0], None, None, c, 0.06, informed)

    reading = WeightReading((w(0, [3]), w(1, [23, 28]), w(2, [8]), w(3, [20]), w(4, [7], informed=False), w(5, [27])),
                            Statistic(), (), 0.0)
    function = (_slot(0, [3, 4, 2]),  # ambiguous; the weights separate B3 inside it: B3, by both lines
                _slot(1, [16]),  # the demo's slot 2: each excludes the other's reading
                _slot(2, [9, 8, 10, 11, 7], undetermined=True),  # the weights separate B8, within the interval
                _slot(3, [9, 8, 10, 11, 7], undetermined=True),  # the weights separate B20, outside it: not named
                _slot(4, [7, 8]),  # no reading from the weights: the function's
                # the draft does not use the slot's information (best B11 shuffled as well): the function excludes
                # nothing, the weights name B27 (tests/trainers speculators-default's slot 2, docs/fingerprint.md)
                _slot(5, [11, 12], undetermined=True, uninformed=True))
    out = combine(function, reading)
    assert out[0].candidates == (State(3),) and out[0].lines == "both" and not out[0].ambiguous
    assert out[1].undetermined and out[1].lines == "disagree"
    assert out[1].text() == "undetermined (function B16; weights B23 or B28)"
    assert out[2].candidates == (State(8),) and out[2].lines == "weights" and not out[2].undetermined
    assert out[2].needs().startswith("fc's weights separate B8")
    assert out[3].undetermined and out[3].lines == "disagree" and "weights B20" in out[3].text()
    assert out[4].candidates == (State(7), State(8)) and out[4].lines == "function"
    assert out[5].candidates == (State(27),) and out[5].lines == "weights" and not out[5].undetermined


def test_a_disagreement_yields_where_the_function_does_not_separate_the_weights_whole_wiring():
    """combine(joint_admits=True): the function's per-slot intervals are each taken with the other slots at its own
    best; where its best is not separated from the weights' whole wiring, a state the weights separate is named
    (speculators-4-11-24, docs/fingerprint.md); a slot the weights do not separate stays undetermined."""
    from eagle_audit.fingerprint.weights import WeightReading, WeightSlot, Statistic, wiring_of

    def w(index, cands):
        c = tuple(State(b) for b in cands)
        return WeightSlot(index, (), c[0], None, None, c, 0.06, True)

    reading = WeightReading((w(0, [4]), w(1, [11]), w(2, [24, 23])), Statistic(), (), 0.0)
    function = (_slot(0, [21, 20, 22, 19, 23], undetermined=True), _slot(1, [11]), _slot(2, [13, 12, 14, 15], undetermined=True))
    assert wiring_of(reading, (State(21), State(11), State(13))) == (State(4), State(11), State(13))
    apart = combine(function, reading)
    assert [s.lines for s in apart] == ["disagree", "both", "disagree"]
    out = combine(function, reading, joint_admits=True)
    assert out[0].candidates == (State(4),) and out[0].lines == "weights" and not out[0].undetermined
    assert "not separated from the weights' whole wiring" in out[0].needs()
    assert out[2].undetermined and out[2].lines == "disagree"
