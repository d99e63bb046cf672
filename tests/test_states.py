"""The canonical coordinate: boundaries 0..N and the post-norm state."""

import pytest

from eagle_audit.errors import AuditError, param
from eagle_audit.states import State, all_states, final_normed, labels, parse_states


def test_state_rejects_negative_boundary_and_other_types():
    """The package's own errors, one line naming the field (issue 35: ``State('3')`` raised a TypeError from a
    comparison, ``State(-1)`` a bare ValueError); still a ValueError / TypeError for code catching those."""
    from eagle_audit.errors import BadArgument, OutOfRange

    with pytest.raises(OutOfRange, match=r"^`boundary`: must be an integer >= 0 \(B0 is the embedding output\), got -1$"):
        State(-1)
    for bad in ("3", 3.0, None, True):
        with pytest.raises(BadArgument, match="^`boundary`: expected an int"):
            State(bad)
    with pytest.raises(BadArgument, match="^`normed`: expected True or False"):
        State(3, normed="yes")
    assert issubclass(OutOfRange, ValueError) and issubclass(BadArgument, TypeError)
    assert issubclass(OutOfRange, AuditError) and issubclass(BadArgument, AuditError)


def test_states_are_frozen_hashable_and_ordered():
    s = State(3)
    with pytest.raises(AttributeError):
        s.boundary = 4  # type: ignore[misc]
    assert {State(3), State(3)} == {State(3)}
    assert sorted([State(5), State(0), State(5, normed=True), State(2)]) == [
        State(0), State(2), State(5), State(5, normed=True)]


def test_labels_and_descriptions_name_the_residual_stream():
    n = 30
    assert State(0).label() == "B0"
    assert State(16).label() == "B16"
    assert final_normed(n).label() == "B30+norm"
    assert State(0).describe(n) == "embedding output"
    assert State(3).describe(n) == "output of layer 2"
    assert State(n).describe(n) == "output of the last layer (29), before the final norm"
    assert final_normed(n).describe(n) == "final state after the final norm"
    assert State(7).to_json() == {"boundary": 7, "normed": False, "label": "B7"}
    assert labels((State(0), State(3), final_normed(n))) == "[B0, B3, B30+norm]"
    assert labels(iter([State(2)])) == "[B2]" and labels(()) == "[]"


def test_all_states_are_every_boundary_plus_the_post_norm_state():
    states = all_states(4)
    assert states == (State(0), State(1), State(2), State(3), State(4), State(4, normed=True))
    assert len(all_states(61)) == 63


@pytest.mark.parametrize("text, n, expected", [
    ("0,3,31", 61, (State(0), State(3), State(31))),
    (" 2 , 15 ,27 ", 30, (State(2), State(15), State(27))),
    ("2,4,N", 6, (State(2), State(4), State(6))),
    ("2,15,final", 30, (State(2), State(15), State(30, normed=True))),
    ("N+norm", 8, (State(8, normed=True),)),
    ("8+norm", 8, (State(8, normed=True),)),
    ("26,1,14", 30, (State(26), State(1), State(14))),  # order is kept: it is what training concatenated
    ("3,,5,", None, (State(3), State(5))),
])
def test_parse_states(text, n, expected):
    assert parse_states(text, n) == expected


@pytest.mark.parametrize("text, n, message", [
    ("1,x,3", 30, "'x' is not a boundary"),
    ("1,31", 30, "boundary 31 is outside 0..30"),
    ("-1", 30, "boundary -1 is outside 0..30"),
    ("5+norm", 30, "only the last boundary \\(30\\) has a post-norm state"),
    ("N", None, "'N' needs the target's layer count"),
    ("final", None, "'N' needs the target's layer count"),
    (" , ", 30, "no boundaries given"),
])
def test_parse_states_rejects_bad_text_with_the_option_name(text, n, message):
    with pytest.raises(AuditError, match=message) as info:
        parse_states(text, n)
    assert info.value.message.startswith("`trained_boundaries`: ")  # a parameter reference (errors.param)


def test_parse_states_names_the_given_option():
    with pytest.raises(AuditError, match="^`other`: "):
        parse_states("z", 4, what=param("other"))
