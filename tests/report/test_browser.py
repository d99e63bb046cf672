"""The HTML report in a real browser: it loads with no console error and asks for nothing but itself;
the copy buttons work; screenshots of the demo, a 60-layer/5-slot audit and a merged report are taken
(set EAGLE_AUDIT_REPORT_SHOTS=DIR to keep them)."""

from __future__ import annotations

import pytest

from eagle_audit.report import merge, render_html


def _page(tmp_path, name: str, html: str):
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    return path


COPY = {
    "buttons": "document.querySelectorAll('button[data-copy]').length",
    "click": "(async () => { const b = document.querySelector('button[data-copy=\"patch\"]'); b.click();"
             " await new Promise(r => setTimeout(r, 300)); return b.textContent; })()",
    "overflow": "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    "width": "window.innerWidth",
    "figure_scroll": "Math.max(0, ...Array.from(document.querySelectorAll('.scroll'))"
                     ".map(d => d.scrollWidth - d.clientWidth))",
    "svg": "document.querySelectorAll('svg.figure').length",
}


@pytest.mark.parametrize("case", ["demo", "deep", "merged"])
def test_page_is_clean_offline_and_screenshotted(case, request, chromium, make_accept_rate, tmp_path):
    demo = request.getfixturevalue("demo_result")
    data = {"demo": lambda: demo, "deep": lambda: request.getfixturevalue("deep_result"),
            "merged": lambda: merge(demo, make_accept_rate(demo))}[case]()
    path = _page(tmp_path, f"report-{case}", render_html(data))
    run = chromium.load(path.as_uri(), COPY)
    assert run.errors == [], run.errors
    assert run.network == [], f"the page asked for {run.network}"
    assert run.requests == [path.as_uri()]  # the page itself, nothing else
    assert run.values["buttons"] >= 2  # the patch and the command
    assert run.values["click"] in ("Copied", "Press Ctrl+C")
    assert run.values["width"] == 1400
    assert run.values["overflow"] <= 0, "the page scrolls sideways at 1400px"
    assert run.values["figure_scroll"] <= 0, "a figure is wider than the page at 1400px"
    assert run.values["svg"] == {"demo": 1, "deep": 1, "merged": 4}[case]
    chromium.screenshot(path, tmp_path / f"report-{case}.png")


def test_harness_sees_errors_and_requests(chromium, tmp_path):
    """The checks above are not vacuous: a page with an exception, a console error and a fetch is caught."""
    bad = _page(tmp_path, "bad", "<!DOCTYPE html><html><body><img src='http://127.0.0.1:9/x.png'>"
                                 "<script>console.error('boom'); null.x;</script></body></html>")
    run = chromium.load(bad.as_uri())
    assert any("boom" in e for e in run.errors)
    assert any(e.startswith("exception") for e in run.errors)
    assert "http://127.0.0.1:9/x.png" in run.network
