"""accept-rate runs the trained wiring with the trainer's draft semantics and the served one with the engine's."""

from __future__ import annotations

import pytest

from eagle_audit.accept.canary import CanaryOptions, train_canary
from eagle_audit.accept.run import AcceptOptions, run_accept

from tests.accept.accept_tiny import tiny_prompts

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.full]  # trains a canary


@pytest.fixture(scope="session")
def one_slot_canary(tiny_target, tmp_path_factory):
    """A canary with one aux state (B3) whose fc width equals the draft hidden size, fc initialised at random so
    that it matters; trained as trainers run it (fc applied)."""
    out = tmp_path_factory.mktemp("tiny") / "canary-one-slot"
    train_canary(tiny_target, tiny_prompts(12), CanaryOptions(boundaries=(3,), epochs=20, max_new_tokens=32,
                                                               draft_vocab=200, lr=3e-3, init="random"), out)
    return out


def test_one_slot_draft_trained_with_fc_served_without(tiny_target_dir, one_slot_canary):
    r = run_accept(AcceptOptions(target=str(tiny_target_dir), draft=str(one_slot_canary), max_new_tokens=32,
                                 prompt_ids=tuple(tuple(p) for p in tiny_prompts(12)[:6])))
    assert [s.label() for s in r.trained.states] == [s.label() for s in r.served.states] == ["B3"]
    assert not r.flags["trained"].fc_skip_at_hidden_width and r.flags["served"].fc_skip_at_hidden_width
    assert r.al("trained") > r.al("served") + 0.2, (r.al("trained"), r.al("served"))
    assert r.verdict == "mismatch"
    j = r.to_json()
    assert j["draft_flags"]["trained"]["fc_skip_at_hidden_width"] is False
    assert any("fc always on target states" in n and "fc only when widths differ" in n for n in j["provenance"]["notes"])
