"""The streaming reader of SGLang replies (eagle_audit/engines/sglang/stream.py): the same floats as ``json.loads``
whatever the network splits, the structure checked, one line for every malformed reply."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from eagle_audit.engines.states import BadStates
from eagle_audit.engines.sglang.stream import StatesReader


def _reply(prompt_chunks, decode, width, seed=0, **meta):
    rng = np.random.default_rng(seed)
    rows = sum(prompt_chunks) + decode
    a = (rng.standard_normal((rows, width)) * 0.1).astype(np.float32)
    hs, o = [], 0
    for c in prompt_chunks:
        hs.append(a[o:o + c].tolist())
        o += c
    hs += [r.tolist() for r in a[o:]]
    body = {"text": 'says "hidden_states": [[1]] \\" [', "output_ids": list(range(decode + 1)),
            "meta_info": {"id": "x", "hidden_states": hs, "completion_tokens": decode + 1, **meta}}
    return json.dumps(body).encode(), a


@pytest.mark.parametrize("chunks", [[9], [4, 5], [1, 1, 7]])
def test_any_split_of_the_bytes_gives_the_same_floats(chunks):
    body, a = _reply(chunks, 3, 12)
    rnd = random.Random(1)
    for trial in range(50):
        cuts = sorted(rnd.sample(range(1, len(body)), rnd.randint(0, 40))) + [len(body)]
        r = StatesReader(12, 12)
        prev = 0
        for c in cuts:
            r.feed(body[prev:c])
            prev = c
        rest, rows, elements = r.finish()
        assert np.array_equal(rows, a)
        assert [e.kind for e in elements] == ["prefill"] * len(chunks) + ["decode"] * 3
        assert rest["meta_info"]["completion_tokens"] == 4 and rest["meta_info"]["hidden_states"] is None
        assert rest["text"] == json.loads(body)["text"]


@pytest.mark.parametrize("body, message", [
    (b'{"meta_info": {"hidden_states": [[[1,2],[3]]]}}', "row 1 holds 1 floats, expected 2"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,"a"]]]}}', "not a list of numbers"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,true]]]}}', "not a list of numbers"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,4,]]]}}', "holds 3 floats"),
    # numpy reads an element of only whitespace as -1.0: each is refused, not read as [.., -1.0]
    (b'{"meta_info": {"hidden_states": [[[1,2,3],[1, ,2]]]}}', "row 1: not a list of numbers"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[ ,2]]]}}', "row 1: not a list of numbers"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[1, ]]]}}', "row 1 holds 3 floats"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[ ]]]}}', "row 1 holds 0 floats"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,4]]', "ended inside meta_info.hidden_states"),
    (b'{"meta_info": {"hidden_states": [[[1,2],3]]}}', "outside a row of floats"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,NaN]]]}}', "non-finite"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,1e999]]]}}', "non-finite"),
    (b'{"meta_info": {"hidden_states": [[[[1,2]]]]}}', "nested deeper"),
    (b'{"meta_info": {"hidden_states": [[]]}}', "is empty"),
    (b'{"meta_info": {"hidden_states": [[[1,2],[3,4],[5,6]]]}}', "more than 2 rows"),
    (b'{"meta_info": {"hidden_states": [[[1,2]]]}', "not complete JSON"),
])
def test_malformed_replies_are_one_line(body, message):
    r = StatesReader(2, None)
    with pytest.raises(BadStates, match=message) as e:
        r.feed(body)
        r.finish()
    assert "\n" not in str(e.value)


def test_states_elsewhere_are_not_taken():
    body = b'{"hidden_states": [[[1.0]]], "meta_info": {"x": {"hidden_states": [[[2.0]]]}, "hidden_states": [[[3.0]]]}}'
    r = StatesReader(2, 1)
    r.feed(body)
    rest, rows, _ = r.finish()
    assert rows.tolist() == [[3.0]] and rest["hidden_states"] == [[[1.0]]]
    assert rest["meta_info"]["x"]["hidden_states"] == [[[2.0]]]


def test_minus_one_with_whitespace_is_a_float():
    """-1.0 (a common bf16 value) in a row written with spaces, as Python's json writes: read as itself."""
    body = b'{"meta_info": {"hidden_states": [[[-1.0, 2.5, -1], [ -1 , -1.0 ,\n0.5 ]]]}}'
    r = StatesReader(2, 3)
    r.feed(body)
    assert r.finish()[1].tolist() == [[-1.0, 2.5, -1.0], [-1.0, -1.0, 0.5]]
