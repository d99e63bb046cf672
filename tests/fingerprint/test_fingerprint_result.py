"""Result objects of the fingerprint: how a slot is named, what it admits, the JSON it writes, how a claimed
wiring is judged, and the terminal rendering (values are text, never markup)."""

from __future__ import annotations

from dataclasses import replace
from io import StringIO

from rich.console import Console

from eagle_audit.conventions import Wiring
from eagle_audit.fingerprint.render import render_fingerprint
from eagle_audit.fingerprint.result import Agreement, Claim, FingerprintResult, SlotInference
from eagle_audit.fingerprint.verdict import Inference
from eagle_audit.fingerprint.intervals import Interval
from eagle_audit.states import State


def slot(cands, undetermined=False, index=0):
    iv = Interval(0.01, -0.002, 0.02)
    return SlotInference(index, cands[0], cands[1] if len(cands) > 1 else None, iv, iv, tuple(cands), len(cands) > 1,
                         undetermined, scored_tokens=400)


def test_a_separated_slot_names_one_state():
    s = slot([State(15)])
    assert s.text() == "B15" and s.admits(State(15)) and not s.admits(State(16))
    assert s.guarded() == "B15" and s.needs().startswith("separated on 400")


def test_an_ambiguous_slot_names_its_states_and_admits_only_them():
    s = slot([State(15), State(16)])
    assert s.text() == "B15 or B16" and s.admits(State(16)) and not s.admits(State(14))
    assert s.to_json()["interval"] == [-0.002, 0.02] and s.to_json()["ambiguous"]
    assert s.guarded() == ["B15", "B16"]


def test_an_undetermined_slot_names_none_and_admits_any():
    s = slot([State(k) for k in (5, 7, 6, 4, 9)], undetermined=True)
    assert s.text().startswith("undetermined (5 states") and s.admits(State(2)) and s.to_json()["undetermined"]
    assert s.guarded() is None and s.to_json()["state"] is None


UNDET = (4, 5, 3, 6, 2)  # an undetermined slot's states (best first)


def inference(joint, searched=tuple(State(k) for k in range(31))):
    slots = (slot([State(k) for k in UNDET], True, 0), slot([State(k) for k in (19, 18, 20, 17, 15)], True, 1),
             slot([State(27), State(28)], False, 2))
    return Inference((State(4), State(19), State(27)), slots, "ambiguous", 0.4, -4.4, 0.1, -6.0, 400, 1.0,
                     Agreement(searched, (), ()), {}, "", joint)


def test_an_undetermined_slot_never_turns_a_rejected_wiring_into_agreement():
    """Issue 18: a claim whose whole-wiring score is well below the best (-5.49 against -4.48) was marked
    'agrees' because its slots were undetermined (they admit any state)."""
    rejected = (State(2), State(15), State(27))
    kept = (State(3), State(18), State(28))
    inf = inference({rejected: Interval(1.01, 0.7, 1.3), kept: Interval(0.05, -0.02, 0.12),
                     (State(2), State(15), State(16)): Interval(1.5, 1.1, 1.9)})
    agrees, note = inf.verdict(rejected)
    assert agrees is not True and not inf.consistent(rejected)
    assert agrees is None and "do not determine" in note  # ... nor does it make the wiring differ on its own
    assert inf.verdict(kept) == (True, "")
    assert inf.verdict((State(2), State(15), State(16)))[0] is False  # a determined slot excludes it, and the scores
    assert inf.verdict((State(9), State(9), State(9)))[0] is None  # not scored as a whole



def test_a_claimed_state_not_searched_is_not_told():
    """A server without B0 (the +1 rule): the declared wiring naming B0 in a determined slot was judged as
    excluded there and, one slot off the best, "differs" (TRAINED_WIRING_DIFFERS on a claim nobody measured)."""
    inf = inference({}, searched=tuple(State(k) for k in range(1, 30)))
    agrees, note = inf.verdict((State(4), State(19), State(0)))
    assert agrees is None and "not searched" in note and "slot 2 B0" in note
    assert inf.verdict((State(4), State(19), State(28)))[0] is True  # searched states keep their verdict

def test_a_wiring_within_the_tolerances_of_the_best_is_not_called_different():
    """Issue 18, speculators 0.9.0 draft trained on [B2, B15, B27] (H200, held-out step-0 0.463): B16 beat B15
    by +0.0076 [+0.0024, +0.0128] mean log-prob on 4,653 held-out tokens x 3 steps, top-1 within [-0.002,
    +0.007]; on significance alone the fingerprint named B16 and TRAINED_WIRING_DIFFERS told the user to make
    vLLM feed B16."""
    declared = (State(2), State(19), State(26))  # slot 2 excludes B26: only the whole-wiring test can save it
    iv = Interval(0.0076, 0.0024, 0.0128)
    assert inference({declared: iv}).verdict(declared)[0] is False  # no top-1 interval: log-prob decides, as before
    inf = replace(inference({declared: iv}), joint_top1={declared: Interval(0.0022, -0.0021, 0.0066)})
    agrees, note = inf.verdict(declared)
    assert agrees is None and "within the tolerances of equivalence" in note
    wide = replace(inference({declared: iv}), joint_top1={declared: Interval(0.004, -0.006, 0.014)})
    assert wide.verdict(declared)[0] is False  # top-1 reaches past a point: not shown equivalent, differs


def test_a_slot_state_is_separated_unless_equivalent_on_both_measures():
    from eagle_audit.fingerprint.search import TOP1_EQUIVALENT, equivalent, separated

    below = Interval(0.0076, 0.0024, 0.0128)  # B16 - B15, the speculators draft above
    assert not separated(below, Interval(0.0022, -0.0021, 0.0066))  # within both tolerances: equivalent
    assert separated(below, Interval(0.0099, 0.0044, 0.0155))  # top-1 reaches past a point
    assert separated(Interval(0.06, 0.03, 0.09), Interval(0.0, -0.002, 0.002))  # log-prob past 0.02: separated
    assert separated(below, None) and not separated(Interval(0.01, -0.002, 0.02), None)
    assert not equivalent(below, Interval(0.0, -TOP1_EQUIVALENT, 0.005))  # the bounds are strict
    s = SlotInference(1, State(16), State(15), below, None, (State(16), State(15)), True, scored_tokens=4653,
                      equivalent=(State(15),))
    assert s.text() == "B16 or B15" and s.admits(State(15)) and s.to_json()["equivalent"] == ["B15"]
    assert "equivalent to the draft" in s.needs() and "would not" in s.needs()


def result(slots, claims=()):
    w = Wiring("x", "trainer", "-", "r", None, "boundaries", "-", (), tuple(sl.best for sl in slots))
    return FingerprintResult("match", "ambiguous", {"name": "t[arget]", "architecture": "LlamaForCausalLM",
                                                     "num_layers": 30, "hidden_size": 576},
                             {"path": "/d/[draft]", "layout": "sglang", "fc_in": 1728, "fc_out": 576},
                             tuple(sl.best for sl in slots), tuple(sl.best for sl in slots), tuple(slots), 0.4, -4.4,
                             0.1, -6.0, 400, 1.0, Agreement((), (), ()), tuple(claims), w, None, (), None, {}, {})


def test_the_terminal_prints_every_value_as_text():
    """Issue 18: ``[undetermined ...]`` was eaten as rich markup, the trained-wiring line printed empty."""
    slots = (slot([State(k) for k in UNDET], True, 0), slot([State(27), State(28)], False, 1))
    res = result(slots, (Claim("declared", (State(2), State(27)), None, "a [note]"),))
    buf = StringIO()
    render_fingerprint(res, Console(file=buf, width=300, color_system=None), verbose=True)
    out = buf.getvalue()
    line = next(ln for ln in out.splitlines() if ln.startswith("trained wiring (from the weights)"))
    assert "[undetermined (5 states not separated, best B4), B27 or B28]" in line, out
    assert "t[arget]" in out and "/d/[draft]" in out and "a [note]" in out and "not told" in out
    buf = StringIO()  # the summary (the default): the same values, as text
    render_fingerprint(res, Console(file=buf, width=80, color_system=None))
    out = buf.getvalue()
    assert "slot 0  undetermined (best B4): 5 states not separated" in out and "slot 1  B27 or B28: 2 states" in out, out
    assert "t[arget]" in out and "[draft]" in out and "a [note]" in out and "not told" in out
    assert max(map(len, out.splitlines())) <= 80


def test_json_states_are_guarded_per_slot():
    slots = (slot([State(k) for k in UNDET], True, 0), slot([State(15), State(16)], False, 1),
             slot([State(27)], False, 2))
    data = result(slots).to_json()
    assert data["schema"] == "eagle-audit/fingerprint/2"
    assert data["inferred"]["states"] == [None, ["B15", "B16"], "B27"]
    assert data["inferred"]["best"] == ["B4", "B15", "B27"]  # the unguarded guess keeps its own key
    assert all(s["needs"] for s in data["inferred"]["slots"])


def test_a_second_round_is_asked_only_for_slots_more_text_would_settle():
    from dataclasses import replace

    from eagle_audit.fingerprint.second import unsettled

    near = replace(slot([State(k) for k in UNDET], True, 0), name_tokens=700)  # 400 scored + 400 more would do
    far = replace(slot([State(k) for k in (19, 18, 20, 17, 15)], True, 1), name_tokens=5000)
    unused = replace(slot([State(15), State(16)], False, 2), separate_tokens=500, unused=True)
    shuffled = replace(slot([State(9), State(8)], False, 3), separate_tokens=500, uninformed=True)
    close = replace(slot([State(27), State(28)], False, 4), separate_tokens=600)
    done = slot([State(5)], False, 5)
    inf = Inference((State(4), State(19), State(15), State(9), State(27), State(5)),
                    (near, far, unused, shuffled, close, done), "ambiguous", 0.4, -4.4, 0.1, -6.0, 400, 1.0,
                    Agreement((), (), ()), {}, "", {})
    assert unsettled(inf, 400) == [0, 4]  # the draft does not use slots 2 and 3 on such text: more of it won't help
    assert unsettled(inf, 100) == []
    assert unsettled(replace(inf, confidence="none"), 10_000) == []
    # the two lines exclude each other (the demo's slot 2): more text narrows the function's interval, which
    # excludes the weights' state already, so no second round is spent on it
    split = replace(near, lines="disagree", function="B16", weights="B23 or B28")
    assert unsettled(replace(inf, slots=(split,) + inf.slots[1:]), 400) == [4]


def test_a_slot_both_lines_separate_says_so_and_is_not_re_judged():
    from dataclasses import replace

    from eagle_audit.fingerprint.confirm import agreed

    s = replace(slot([State(15)]), lines="both", weights="B15", weights_state=State(15), separate_tokens=120)
    assert agreed(s) and not agreed(replace(s, weights_state=State(16))) and not agreed(replace(s, lines="function"))
    assert not agreed(replace(s, candidates=(State(15), State(16)), ambiguous=True))
    assert s.needs() == ("separated on 400 scored tokens (about 120 tokens would do), and fc's weights separate it "
                         "too (two lines agree: the confirmation does not re-judge it)")


def test_how_sure_names_the_training_time_test_steps_it_scored():
    from dataclasses import replace

    s = replace(slot([State(15)]), steps=3, separate_tokens=120)
    assert s.needs() == ("separated on 400 scored tokens x 3 training-time-test steps (about 120 tokens would do); "
                         "not confirmed on prompts that did not choose it (the confirmation, `confirm_prompts`)")
    s = replace(s, confirmed=True, confirm_tokens=390)
    assert s.needs() == ("separated on 400 scored tokens x 3 training-time-test steps (about 120 tokens would do), "
                         "and again on 390 tokens of other prompts (the confirmation)")
    assert s.to_json()["steps"] == 3


def test_later_steps_default_by_device_and_say_so():
    from eagle_audit.fingerprint.defaults import ttt_steps_for

    assert ttt_steps_for("cuda:0", None)[0] == 3 and ttt_steps_for("cpu", None)[0] == 1
    assert "the CPU" in ttt_steps_for("cpu", None)[1] and ttt_steps_for("cpu", 3) == (3, "")


def test_under_representation_mismatch_the_weights_alone_are_said_and_no_more():
    """No wiring makes the draft's function agree (confidence none, inferred None): the slots fc's weights name
    alone are the JSON's states and the terminal's trained wiring, the others undetermined; the function's own
    (untrusted) naming is not shown as a wiring. With no weights-named slot, nothing is (the old line)."""
    import io
    from dataclasses import replace

    from rich.console import Console

    from eagle_audit.fingerprint.render import render_fingerprint

    slots = (replace(slot([State(2)], False, 0), lines="weights", weights="B2", weights_state=State(2)),
             slot([State(27), State(28)], False, 1))
    res = replace(result(slots), confidence="none", inferred=None, verdict="mismatch")
    assert [s.index for s in res.weights_alone] == [0]
    assert res.to_json()["inferred"]["states"] == ["B2", None]
    out = io.StringIO()
    render_fingerprint(res, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert "read off fc's weights alone" in text and "slot 0  B2" in text and "slot 1  undetermined" in text, text
    assert "B27 or B28" not in text
    plain = replace(res, slots=(slot([State(2)], False, 0), slots[1]))
    assert plain.to_json()["inferred"]["states"] is None and plain.weights_alone == ()
    out = io.StringIO()
    render_fingerprint(plain, Console(file=out, width=80, color_system=None))
    assert "no wiring can be read off the weights" in out.getvalue()
