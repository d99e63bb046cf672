"""Reading, checking and merging result documents (eagle_audit.report.results)."""

from __future__ import annotations

import json

import pytest

from eagle_audit.errors import AuditError, InputNotFound
from eagle_audit.report import BadResult, ResultsDiffer, load_result, merge, normalize


def test_layers_result_normalizes(demo_result):
    doc = normalize(demo_result)
    assert doc == {"schema": "eagle-audit/report/1", "layers": demo_result, "accept_rate": None}


def test_merge_either_order(demo_result, accept_result):
    a, b = merge(demo_result, accept_result), merge(accept_result, demo_result)
    assert a == b and a["layers"] == demo_result and a["accept_rate"] == accept_result
    assert normalize(a) == a  # a merged document is itself renderable (and what write_reports writes)


def test_merge_refuses_other_target(demo_result, make_accept_rate):
    other = make_accept_rate(demo_result, target={**demo_result["target"], "config_sha256": "f" * 64, "name": "x.gguf"})
    with pytest.raises(ResultsDiffer, match=r"cannot merge: the layers result is for target .*SmolLM2.*x\.gguf"):
        merge(demo_result, other)


def test_merge_refuses_other_draft_by_path_when_no_sha(demo_result, make_accept_rate):
    other = make_accept_rate(demo_result, draft={"path": "/somewhere/else"})
    with pytest.raises(ResultsDiffer, match="draft"):
        merge(demo_result, other)


def test_merge_tolerates_accept_rate_without_identity(demo_result, make_accept_rate):
    bare = make_accept_rate(demo_result)
    del bare["target"], bare["draft"]
    assert merge(demo_result, bare)["accept_rate"] == bare


def test_merge_refuses_two_of_a_kind(demo_result):
    with pytest.raises(ResultsDiffer, match="two layers results"):
        merge(demo_result, demo_result)


def test_merged_document_with_other_subjects_is_refused(demo_result, make_accept_rate):
    other = make_accept_rate(demo_result, target={"name": "other", "config_sha256": "0" * 64})
    with pytest.raises(ResultsDiffer):
        normalize({"schema": "eagle-audit/report/1", "layers": demo_result, "accept_rate": other})


@pytest.mark.parametrize("doc, message", [
    ([1, 2], "expected a JSON object, got list"),
    ({"schema": "eagle-audit/layers/2"}, "unknown result schema ('eagle-audit/layers/2')"),
    ({"verdict": "match"}, "no 'schema' key"),
    ({"schema": "eagle-audit/report/1"}, "holds no result"),
])
def test_bad_documents(doc, message):
    with pytest.raises(BadResult) as e:
        normalize(doc, where="r.json")
    assert message in e.value.message and e.value.message.startswith("r.json: ")


@pytest.mark.parametrize("key", ["verdict", "target", "draft", "slots", "findings"])
def test_layers_result_missing_key(demo_result, key):
    doc = {k: v for k, v in demo_result.items() if k != key}
    with pytest.raises(BadResult, match=f"key '{key}' is missing"):
        normalize(doc)


def test_layers_result_wrong_type(demo_result):
    with pytest.raises(BadResult, match="'slots' should be a JSON array, got dict"):
        normalize({**demo_result, "slots": {}})


def test_load_result_errors(tmp_path):
    with pytest.raises(InputNotFound, match="no such result file"):
        load_result(tmp_path / "missing.json")
    with pytest.raises(BadResult, match="not a file"):
        load_result(tmp_path)
    (tmp_path / "broken.json").write_text("{\"schema\": ")
    with pytest.raises(BadResult, match=r"broken\.json: not valid JSON \(line 1"):
        load_result(tmp_path / "broken.json")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BadResult, match="not a text file"):
        load_result(tmp_path / "binary.json")
    (tmp_path / "odd.json").write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(BadResult, match="odd.json: unknown result schema"):
        load_result(tmp_path / "odd.json")


def test_errors_are_audit_errors():
    assert issubclass(BadResult, AuditError) and issubclass(ResultsDiffer, AuditError)
