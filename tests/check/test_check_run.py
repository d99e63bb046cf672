"""`check`'s verdict says what the fingerprint said (issue 27, item 4): a finding counts as shown by the fingerprint
only where the weights determine it. Tried on the demo: the fingerprint left slot 0 undetermined, yet the verdict
listed EMBEDDING_COMPOSITION slot 0 as "shown by static, captured, fingerprint" and "how sure: fingerprint"."""

from __future__ import annotations

from types import SimpleNamespace

from eagle_audit.check.run import fingerprint_shows
from eagle_audit.fingerprint.intervals import Interval
from eagle_audit.fingerprint.result import SlotInference
from eagle_audit.layers.result import Finding
from eagle_audit.states import State


def _slot(i, cands, undetermined=False):
    iv = Interval(0.1, 0.05, 0.15)
    return SlotInference(i, cands[0], None, iv, iv, tuple(cands), len(cands) > 1, undetermined, scored_tokens=659)


# the demo: [undetermined (best B0), B3 or B4, B16], SGLang feeding [B2, B15, B27]
DEMO = SimpleNamespace(inferred=(State(0), State(3), State(16)),
                       slots=(_slot(0, [State(k) for k in (0, 30, 1, 2, 5)], undetermined=True),
                              _slot(1, [State(3), State(4)]), _slot(2, [State(16)])),
                       served=SimpleNamespace(states=(State(2), State(15), State(27))))


def _finding(code, slot):
    return Finding(code, "error", slot, "", "", "")


def test_an_undetermined_slot_shows_nothing():
    assert not fingerprint_shows(DEMO, _finding("EMBEDDING_COMPOSITION", 0))


def test_a_named_slot_shows_its_finding_where_it_excludes_what_the_engine_feeds():
    assert fingerprint_shows(DEMO, _finding("LAYER_OFFSET", 1))  # B3 or B4, served B15
    assert fingerprint_shows(DEMO, _finding("LAYER_OFFSET", 2))  # B16, served B27
    admits = SimpleNamespace(**{**vars(DEMO), "served": SimpleNamespace(states=(State(2), State(4), State(27)))})
    assert not fingerprint_shows(admits, _finding("LAYER_OFFSET", 1))  # B3 or B4 admits the served B4


def test_the_config_findings_are_not_the_weights_and_its_own_always_are():
    assert not fingerprint_shows(DEMO, _finding("IDS_NOT_READ", None))
    assert fingerprint_shows(DEMO, _finding("TRAINED_WIRING_DIFFERS", None))
    none = SimpleNamespace(inferred=None, slots=(), served=None)
    assert fingerprint_shows(none, _finding("REPRESENTATION_MISMATCH", None))
    assert not fingerprint_shows(none, _finding("LAYER_OFFSET", 1))
