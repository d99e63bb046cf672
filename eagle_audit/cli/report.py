"""`eagle-audit report`: render result JSON as a self-contained HTML page and a Markdown summary."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import AuditError
from .console import err
from .edge import error_edge
from .pending import wrote
from .safety import check_outputs
from .write import write_output


def report(
    results: Annotated[list[str], typer.Argument(
        help="One or two result JSON files: a layers result, an accept-rate result, or one of each for the same "
        "target and draft (merged into one report).", metavar="RESULT.json", show_default=False)],
    html: Annotated[Optional[str], typer.Option(
        "--html", help="Write the HTML report (one self-contained file) to FILE.")] = None,
    md: Annotated[Optional[str], typer.Option(
        "--md", help="Write the Markdown report to FILE, or '-' for stdout (e.g. for a pull-request comment).")] = None,
    out_dir: Annotated[Optional[str], typer.Option(
        "--out", help="Write NAME.json, NAME.html and NAME.md into DIR, NAME from verdict, target and draft. "
        "The default when neither --html nor --md is given: reports/.")] = None,
) -> None:
    """Render one or two result JSON files as an HTML page and a Markdown summary.

    Examples:

      eagle-audit layers --json result.json; eagle-audit report result.json --html audit.html --md audit.md

      eagle-audit report result.json                         # reports/<verdict>-<target>-<draft>.{json,html,md}

      eagle-audit report layers.json accept.json --html both.html

      eagle-audit report result.json --md - | gh pr comment 123 --body-file -

    Exit codes: 0 written, 2 bad input (missing file, not JSON, unknown schema, results of other targets or drafts).
    """
    with error_edge():
        from ..report import load_result, merge, render_html, render_markdown, write_reports

        if len(results) > 2:
            raise AuditError(f"report: {len(results)} results given; pass one, or a layers and an accept-rate result")
        if html is None and md is None and out_dir is None:
            out_dir = "reports"
        check_outputs([("result", p) for p in results], files={"--html": html, "--md": md}, dirs={"--out": out_dir})
        docs = [_as_written(load_result(p)) for p in results]
        data = merge(*docs)
        rendered = []
        if html is not None:
            rendered.append((html, render_html(data)))
        if md is not None:
            rendered.append((md, render_markdown(data)))
        for dest, text in rendered:  # everything rendered before anything is written
            write_output(text, dest, "the report", announce=True)
        if out_dir is not None:
            for path in write_reports(docs[0] if len(docs) == 1 else data, out_dir, inputs=[("result", p) for p in results]):  # one file: kept as it was
                err.print(f"wrote {path}", highlight=False, soft_wrap=True)
            wrote(out_dir)


#: the command that writes each result schema (whose flags a result's parameter references name)
PRODUCERS = {"eagle-audit/layers/1": "layers", "eagle-audit/accept-rate/1": "accept-rate",
             "eagle-audit/fingerprint/2": "fingerprint", "eagle-audit/fingerprint/1": "fingerprint",
             "eagle-audit/check/1": "check", "eagle-audit/report/1": "layers"}


def _as_written(doc: dict) -> dict:
    """A result as the CLI writes it: a result the Python API saved names its parameters (```trainer='fingerprint'```);
    the report shows them as the flags of the command that writes that result (``--trainer fingerprint``), as
    that command's terminal output and JSON do (:func:`eagle_audit.cli.flags.flagged`)."""
    from types import SimpleNamespace

    from .click_api import get_current_context
    from .flags import flagged

    ctx = get_current_context(silent=True)
    group = ctx.find_root().command if ctx is not None else None
    command = getattr(group, "commands", {}).get(PRODUCERS.get(str(doc.get("schema")), ""))
    return flagged(doc, SimpleNamespace(command=command)) if command is not None else doc
