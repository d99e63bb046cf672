"""The CI gates (eagle_audit/accept/gate.py): thresholds on the served accept length and per position, on the
simulated figures and on a server's, both ways; `accept-rate --fail-under` exits 1 with one line."""

import pytest

from eagle_audit.errors import BadOption
from eagle_audit.accept.gate import Gate, failures, parse_positions, reason

ACCEPT = {"settings": {"num_steps": 3}, "accept_length": {"trained": 2.4, "served": 1.9},
          "per_position": {"trained": [0.6, 0.4, 0.2], "served": [0.5, 0.25, 0.08]}, "server": None}


def test_overall_and_per_position_both_ways():
    assert failures(Gate(1.9, (0.5, 0.25, 0.08)), ACCEPT) == []
    assert failures(Gate(1.91), ACCEPT) == ["simulated served accept length 1.900 < fail_under 1.91"]
    assert failures(Gate(None, (0.4, 0.2, 0.1)), ACCEPT) == [
        "simulated served accept length: position 3 acceptance 0.080 < 0.1"]
    assert failures(Gate(), ACCEPT) == []  # no gate: nothing fails


def test_server_figures_are_gated_too():
    served = {**ACCEPT, "server": {"kind": "sglang", "accept_length": 1.2, "per_position": [0.1]}}
    lines = failures(Gate(1.5, (0.2, 0.1)), served)
    assert lines == ["sglang server accept length 1.200 < fail_under 1.5",
                     "sglang server accept length: position 1 acceptance 0.100 < 0.2",
                     "sglang server accept length: position 2 not measured (threshold 0.1)"]
    assert reason(lines).startswith("fail: sglang server") and "\n" not in reason(lines)


def test_bad_thresholds_are_bad_input():
    assert parse_positions("0.4, 0.2,0.1") == (0.4, 0.2, 0.1)
    for text in ("a,b", ",", ""):
        with pytest.raises(BadOption):
            parse_positions(text)
    for kw in ({"fail_under": -1}, {"fail_under": float("nan")}, {"fail_under_positions": (1.5,)}):
        with pytest.raises(BadOption):
            Gate(**kw)
    with pytest.raises(BadOption, match="4 thresholds, but the draft runs 3 steps"):
        Gate(None, (0.1,) * 4).fits(3)
    assert failures(Gate(2.0), None, "the target has no weights") == [
        "no accept length to gate: the target has no weights"]


@pytest.mark.usefixtures("one_thread")
def test_accept_rate_fail_under_exits_1_with_one_line_and_0_when_met(tiny_targets, make_draft, cli):
    t, d = tiny_targets["llama"], make_draft(nested_ids=[1, 3, 5])
    base = ["-t", t, "-d", d, "--builtin-rules", "--max-prompts", "2", "--max-tokens", "16", "--max-new-tokens", "6",
            "--trained-boundaries", "2,4,6", "--json", "-"]
    ok = cli(*base, "--fail-under", "1", "--fail-under-positions", "0,0", command="accept-rate")
    assert ok.exit_code == 0, ok.output
    bad = cli(*base, "--fail-under", "50", command="accept-rate")
    lines = [x for x in bad.stderr.splitlines() if x.startswith("fail:")]
    assert bad.exit_code == 1 and len(lines) == 1 and "< fail_under 50" in lines[0]
    pos = cli(*base, "--fail-under-positions", "1", command="accept-rate")
    assert pos.exit_code == 1 and "position 1 acceptance" in pos.stderr
    usage = cli(*base, "--fail-under-positions", "x", command="accept-rate")
    assert usage.exit_code == 2 and "--fail-under-positions" in usage.stderr
