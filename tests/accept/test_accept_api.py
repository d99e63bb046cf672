"""eagle_audit.accept_rate (the Python API): typed inputs, the AcceptResult the CLI writes as JSON, and
docs/results.md documents every key of it."""

from __future__ import annotations

from tests.docs_keys import assert_documented

from eagle_audit import State, accept_rate
from eagle_audit.accept.run import AcceptResult


def test_accept_rate_api_and_documented_keys(tiny_target_dir, tiny_canary):
    # SGLang feeds the canary's B1, B3, B5; naming B4 as the third trained state makes slot 2 mis-wired, so
    # attribution is filled
    result = accept_rate(tiny_target_dir, tiny_canary, trained_boundaries=[1, 3, State(4)], max_prompts=2,
                         max_new_tokens=8, use_installed_engine=False)
    assert isinstance(result, AcceptResult)
    assert [s.label() for s in result.trained.states] == ["B1", "B3", "B4"]
    assert [a.slot for a in result.attribution] == [2]
    data = result.to_json()
    assert data["provenance"]["command"] is None
    assert_documented(data, ("target", "draft", "settings", "attribution", "provenance"))
    assert_documented(data["wirings"]["trained"])
