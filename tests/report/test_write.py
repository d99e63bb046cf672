"""write_reports: three files named from verdict, target and draft; the JSON renders again."""

from __future__ import annotations

import json

import pytest

from eagle_audit.errors import AuditError
from eagle_audit.report import load_result, merge, render_html, report_name, write_reports


def test_write_reports(demo_result, tmp_path):
    paths = write_reports(demo_result, tmp_path / "out")
    stem = "mismatch-smollm2-135m-instruct.q4_1-demo-draft-v2"
    assert [p.name for p in paths] == [f"{stem}.json", f"{stem}.html", f"{stem}.md"]
    assert json.loads(paths[0].read_text()) == demo_result
    assert load_result(paths[0]) == demo_result
    assert paths[1].read_text() == render_html(demo_result)
    assert paths[2].read_text().startswith("### ❌ eagle-audit: **mismatch**")


def test_names(demo_result, deep_results, accept_result):
    assert report_name(deep_results["match"]) == "match-llama-60l-eagle3-5slot-fixed"
    assert report_name(deep_results["mismatch"]) == "mismatch-llama-60l-eagle3-5slot"
    assert report_name(accept_result) == "accept-rate-mismatch-smollm2-135m-instruct.q4_1-demo-draft-v2"
    assert report_name(merge(demo_result, accept_result)) == report_name(demo_result)


def test_merged_json_is_written_merged(demo_result, accept_result, tmp_path):
    merged = merge(demo_result, accept_result)
    path = write_reports(merged, tmp_path)[0]
    assert load_result(path) == merged


def test_unwritable_dir(demo_result, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(AuditError, match="not a directory"):
        write_reports(demo_result, tmp_path / "file")
