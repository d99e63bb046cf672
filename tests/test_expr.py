"""The closed expression language of convention files."""

import pytest

from eagle_audit import expr


@pytest.mark.parametrize("text, names, value", [
    ("[2, N // 2, N - 3]", {"N": 32}, [2, 16, 29]),
    ("[1, N // 2 - 1, N - 4]", {"N": 61}, [1, 29, 57]),
    ("sorted({1, max(0, N // 2 - 1), max(0, N - 4)})", {"N": 4}, [0, 1]),
    ("max(ids) == N", {"N": 36, "ids": [24, 30, 36]}, True),
    ("max(ids) == N", {"N": 36, "ids": [1, 17, 33]}, False),
    ("ids[0] == 1", {"ids": [1, 29, 57]}, True),
    ("ids[0] == 1", {"ids": [0, 3, 31]}, False),
    ("ids[5]", {"ids": [1]}, None),  # out of range reads as None, not an exception
    ("0 <= N - 1 < 10", {"N": 8}, True),
    ("0 <= N - 1 < 10", {"N": 11}, False),
    ("len(ids) == 3 and not 0 in ids", {"ids": [1, 2, 3]}, True),
    ("-N * 2", {"N": 3}, -6),
    ("1 in ids or N == 0", {"ids": [2], "N": 0}, True),
    ("list(set(ids))", {"ids": [2, 2]}, [2]),
])
def test_evaluate(text, names, value):
    assert expr.evaluate(text, **names) == value


@pytest.mark.parametrize("text, message", [
    ("__import__('os')", "unsupported call"),
    ("__import__", "unknown name '__import__'"),
    ("N.__class__", "unsupported syntax Attribute"),
    ("(lambda: 1)()", "unsupported call"),
    ("lambda: 1", "unsupported syntax Lambda"),
    ("[x for x in ids]", "unsupported syntax ListComp"),
    ("open('f')", "unsupported call"),
    ("M + 1", "unknown name 'M'"),
    ("N ** 2", "unsupported syntax Pow"),
    ("max(ids)(1)", "unsupported call"),
    ("[2, N // 2", "cannot parse expression"),
])
def test_rejects_anything_outside_the_language(text, message):
    with pytest.raises(expr.ExprError, match=message):
        expr.parse(text)


def test_a_name_that_is_not_available_here():
    # default_ids are evaluated without ids: a rule that needs them is an error, not a silent None
    with pytest.raises(expr.ExprError, match="ids is not available here"):
        expr.evaluate("ids[0]", N=4)
    with pytest.raises(expr.ExprError, match="N is not available here"):
        expr.evaluate("N - 1", N=None)
