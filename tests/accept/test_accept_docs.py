"""docs/results.md documents every key of a real accept-rate result."""

from __future__ import annotations

from docs_keys import assert_documented

from eagle_audit.accept.run import AcceptOptions, run_accept


def test_accept_rate_result_keys_are_documented(tiny_target_dir, tiny_canary):
    # SGLang feeds the canary's B1, B3, B5; naming B4 as the third trained state makes slot 2 mis-wired, so
    # attribution is filled
    result = run_accept(AcceptOptions(target=str(tiny_target_dir), draft=str(tiny_canary), trained_boundaries="1,3,4",
                                      use_installed_engine=False, max_prompts=2, max_new_tokens=8))
    data = result.to_json()
    assert data["attribution"], data["wirings"]
    assert_documented(data, ("target", "draft", "settings", "attribution", "provenance"))
    assert_documented(data["wirings"]["trained"])
