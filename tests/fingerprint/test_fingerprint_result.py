"""Result objects of the fingerprint: how a slot is named, what it admits, the JSON it writes."""

from __future__ import annotations

from eagle_audit.fingerprint.result import SlotInference
from eagle_audit.fingerprint.search import Interval
from eagle_audit.states import State


def slot(cands, undetermined=False):
    iv = Interval(0.01, -0.002, 0.02)
    return SlotInference(0, cands[0], cands[1] if len(cands) > 1 else None, iv, iv, tuple(cands), len(cands) > 1,
                         undetermined)


def test_a_separated_slot_names_one_state():
    s = slot([State(15)])
    assert s.text() == "B15" and s.admits(State(15)) and not s.admits(State(16))


def test_an_ambiguous_slot_names_its_states_and_admits_only_them():
    s = slot([State(15), State(16)])
    assert s.text() == "B15 or B16" and s.admits(State(16)) and not s.admits(State(14))
    assert s.to_json()["interval"] == [-0.002, 0.02] and s.to_json()["ambiguous"]


def test_an_undetermined_slot_names_none_and_admits_any():
    s = slot([State(k) for k in (5, 7, 6, 4, 9)], undetermined=True)
    assert s.text().startswith("undetermined (5 states") and s.admits(State(2)) and s.to_json()["undetermined"]
