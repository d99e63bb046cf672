"""The HTML report's content, from real results: verdict, every finding, the fix patch, slots, heatmap,
acceptance and provenance; self-contained (no URL of any kind); safe against markup in the data."""

from __future__ import annotations

import html as htmllib
import json
import re

import markupsafe
import pytest

from eagle_audit.report.render import script_hash
from eagle_audit.report import merge, render_html


def _patch_from(page: str) -> dict:
    m = re.search(r'<pre id="patch">(.*?)</pre>', page, re.S)
    assert m, "no patch block"
    return json.loads(htmllib.unescape(m.group(1)))


def _section(page: str, name: str) -> str:
    m = re.search(rf'<section id="{name}"[^>]*>(.*?)</section>', page, re.S)
    assert m, f"no section {name}"
    return m.group(1)


def test_demo_verdict_findings_and_fix(demo_result):
    page = render_html(demo_result)
    assert demo_result["verdict"] == "mismatch"
    assert '<header class="verdict mismatch">' in page and ">MISMATCH<" in page
    findings = _section(page, "findings")
    for f in demo_result["findings"]:
        assert f">{f['code']}<" in findings
        assert str(markupsafe.escape(f["what"])) in findings  # as jinja2 autoescapes it
    assert {"IDS_NOT_READ", "EMBEDDING_COMPOSITION", "LAYER_OFFSET"} <= {f["code"] for f in demo_result["findings"]}
    assert _patch_from(page) == demo_result["fix"]["patch"]
    assert 'data-copy="patch"' in page
    # findings come before the config change, which comes before the slot table
    assert page.index('id="findings"') < page.index('id="fix"') < page.index('id="slots"') < page.index('id="heatmap"')


def test_demo_slot_table(demo_result):
    table = _section(demo_result and render_html(demo_result), "slots")
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    assert len(rows) == len(demo_result["slots"])
    for row, s in zip(rows, demo_result["slots"]):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert cells[:3] == [str(s["index"]), s["trained"]["label"], s["served"]["label"]]
        assert cells[3] == f"{s['cosine']:.3f}"
        assert cells[4].startswith(s["nearest"]["label"])
        assert cells[5] == s["verdict"]


def test_demo_heatmap_marks_trained_and_served_cells(demo_result):
    svg = _section(render_html(demo_result), "heatmap")
    states, rows = demo_result["heatmap"]["states"], demo_result["heatmap"]["rows"]
    cells = re.search(r'<g class="cells">(.*?)</g>', svg, re.S).group(1)
    assert cells.count("<rect") == len(states) * len(rows)
    assert svg.count('class="mark trained"') == len(rows) + 1  # one a row, and the key
    differing = sum(s["served"] is not None and s["served"]["label"] != s["trained"]["label"]
                    for s in demo_result["slots"])
    assert svg.count('class="mark served"') == differing + 1
    for s in demo_result["slots"]:
        assert f"slot {s['index']}: trained on {s['trained']['label']}" in svg
        assert f"slot {s['index']}: served {s['served']['label']}" in svg
    for label in states:  # 32 columns: every one labelled
        assert f">{label}</text>" in svg


def test_deep_heatmap_is_labelled_sparsely(deep_result):
    assert deep_result["target"]["num_layers"] == 60 and len(deep_result["slots"]) == 5
    svg = _section(render_html(deep_result), "heatmap")
    labels = re.findall(r'rotate\(-90[^"]*"[^>]*>([^<]+)</text>', svg)
    assert labels == [f"B{k}" for k in range(0, 61, 5)] + ["B60+norm"]
    cells = re.search(r'<g class="cells">(.*?)</g>', svg, re.S).group(1)
    assert cells.count("<rect") == 62 * 5
    width = float(re.search(r'<svg class="figure heatmap"[^>]* width="([\d.]+)"', svg).group(1))
    assert width <= 1176


def test_provenance(demo_result):
    prov = _section(render_html(demo_result), "provenance")
    p = demo_result["provenance"]
    for value in (p["eagle_audit"], p["torch"], p["transformers"], p["engine_rules"]["version"],
                  p["engine_rules"]["title"], demo_result["target"]["config_sha256"],
                  demo_result["draft"]["config_sha256"], p["device"], p["dtype"]):
        assert htmllib.escape(str(value), quote=False) in prov, value
    assert htmllib.escape(p["command"], quote=False) in prov


def test_page_is_self_contained(demo_result, deep_results, make_accept_rate):
    for data in (demo_result, *deep_results.values(), merge(demo_result, make_accept_rate(demo_result))):
        page = render_html(data)
        # URLs may appear as text (a server's address), never as something to load or follow
        assert not re.search(r"(?i)\b(href|src|action|xmlns|srcset|poster)\s*=", page.replace('href="#fix"', ""))
        script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
        csp = f"content=\"default-src 'none'; style-src 'unsafe-inline'; script-src {script_hash(script)}\""
        assert csp in page and "'unsafe-inline'" not in csp.split("script-src")[1]  # the script by its hash
        attributes = page.replace('href="#fix"', "").replace(csp, "")
        assert not re.search(r"""=\s*["'][^"']*\b[a-z]+:""", attributes), "a URL in an attribute"
        assert not re.search(r"(?i)<(link|img|iframe|object|embed)\b|@import|\bsrc=", page)
        assert not re.search(r"url\((?!#)", page)  # only the gradient reference url(#cosine-scale)
        assert page.count("<script>") == 1 and page.count("<style>") == 1
        assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_markup_in_data_is_escaped(demo_result):
    doc = json.loads(json.dumps(demo_result))
    doc["findings"][0]["what"] = "<script>alert(1)</script> & <b>x</b>"
    doc["provenance"]["command"] = "eagle-audit layers --prompts '</pre><img src=x>'"
    page = render_html(doc)
    assert page.count("<script>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;x&lt;/b&gt;" in page
    assert "<img" not in page


def test_match_result_has_no_findings_and_no_fix(deep_results):
    page = render_html(deep_results["match"])
    assert deep_results["match"]["verdict"] == "match"
    assert '<header class="verdict match">' in page and "No findings" in page
    assert 'id="fix"' not in page and 'data-copy="patch"' not in page
    assert page.count('class="pill ok"') == 5


def test_static_result_has_no_heatmap(deep_results):
    doc = deep_results["static"]
    assert doc["heatmap"] is None
    page = render_html(doc)
    assert "No heatmap in this result (a static audit" in page and '<svg class="figure heatmap"' not in page
    assert _patch_from(page) == doc["fix"]["patch"]


def test_merged_report_shows_acceptance(demo_result, make_accept_rate):
    acc = make_accept_rate(demo_result)
    page = render_html(merge(demo_result, acc))
    section = _section(page, "accept")
    for name, value in acc["accept_length"].items():
        assert f">{name}</text>" in section and f">{value:.2f}</text>" in section
    assert ">server (sglang)</text>" in section and ">1.41</text>" in section
    assert ">live decoding (served)</text>" in section and "41.7 tok/s, 1.21× the target alone" in section
    assert "at most 6 with 5 draft steps" in section
    assert section.count("position 1:") == len(acc["per_position"])
    assert acc["attribution"]
    for a in acc["attribution"]:
        assert f">slot {a['slot']} ({a['served']} → {a['trained']})</text>" in section
    assert page.count('<svg class="figure') == 4
    assert _patch_from(page) == demo_result["fix"]["patch"]
    assert "accept-rate --json accept.json" in _section(page, "provenance")


@pytest.mark.parametrize("drop", ["accept_length", "per_position", "attribution", "server", "provenance", "target"])
def test_accept_rate_tolerates_missing_keys(demo_result, make_accept_rate, drop):
    acc = make_accept_rate(demo_result)
    del acc[drop]
    page = render_html(acc)  # accept-rate only
    assert 'id="accept"' in page and 'id="findings"' not in page
    merged = render_html(merge(demo_result, acc))
    assert 'id="accept"' in merged and 'id="findings"' in merged


def test_accept_rate_failures_are_shown(demo_result, make_accept_rate):
    acc = make_accept_rate(demo_result, accept_length={"trained": 3.1, "served": None},
                           failures={"served": "feeds 4 state(s); the draft's fc takes 3"})
    page = render_html(acc)
    assert "served wiring fails:</strong> feeds 4 state(s); the draft&#39;s fc takes 3" in page
    assert '<header class="verdict mismatch">' in page and ">ACCEPT RATE: MISMATCH<" in page


def test_accept_rate_without_numbers(demo_result):
    page = render_html({"schema": "eagle-audit/accept-rate/1", "accept_length": {"trained": "n/a"},
                        "per_position": {"trained": "n/a"}, "attribution": [{"slot": 0}], "server": {}})
    assert "holds no accept lengths" in page and "<svg" not in page
