"""served/compare.py: a served slot against every local boundary, and the findings it gives, reported as the slot
the caller names (``layers --server``: the draft's slot, which need not be the server's)."""

from __future__ import annotations

import numpy as np
import pytest

from eagle_audit.served.compare import compare_slots, served_findings, thresholds_for
from eagle_audit.states import State

FP32 = thresholds_for("float32", "float32")


def _boundaries(tokens: int = 12, hidden: int = 16) -> dict[State, np.ndarray]:
    rng = np.random.default_rng(0)
    return {State(k): rng.standard_normal((tokens, hidden)).astype(np.float32) for k in range(5)}


def test_a_shifted_and_a_corrupted_slot_are_reported_as_the_slots_named():
    local = _boundaries()
    # the server's slots: slot 0 carries B2 where its rules say B1, slot 1 B3 as it should, slot 2 noise for B4
    noise = np.random.default_rng(1).standard_normal(local[State(4)].shape).astype(np.float32)
    served = [np.stack([local[State(2)], local[State(3)], noise], axis=1)]
    matches = compare_slots(served, local, (State(1), State(3), State(4)), *FP32)
    assert [(m.slot, m.verdict) for m in matches] == [(0, "shifted"), (1, "ok"), (2, "mismatch")]
    assert matches[0].matched == State(2)

    own = served_findings(matches, "SGLang", "sglang server http://x")
    assert [(f.code, f.slot) for f in own] == [("ENGINE_STATE_SHIFTED", 0), ("ENGINE_STATE_MISMATCH", 2)]
    assert own[0].what.startswith("slot 0: SGLang serves B2 where its rules say B1")

    # the draft feeds server slot 2 into its slot 0 and server slot 0 into its slot 2: the message says so too
    named = served_findings([matches[2], matches[0]], "SGLang", "sglang server http://x", slots=[0, 2])
    assert [(f.code, f.slot) for f in named] == [("ENGINE_STATE_MISMATCH", 0), ("ENGINE_STATE_SHIFTED", 2)]
    assert named[0].what.startswith("slot 0: the state SGLang serves equals no boundary (expected B4")
    assert named[1].what.startswith("slot 2: SGLang serves B2") and "treat slot 2 as B2" in named[1].fix
    assert all(f"slot {m.slot}:" not in f.what for f, m in zip(named, [matches[2], matches[0]]))


def test_slots_must_name_one_slot_per_match():
    local = _boundaries()
    matches = compare_slots([np.stack([local[State(2)]], axis=1)], local, (State(1),), *FP32)
    with pytest.raises(ValueError):
        served_findings(matches, "SGLang", "x", slots=[0, 1])
