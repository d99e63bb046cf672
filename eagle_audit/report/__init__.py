"""Reports a person would rather look at: one self-contained HTML page and a Markdown summary for a
pull-request comment, rendered from result JSON only (never tensors or models).

Modules: ``inputs`` (read, check and merge result documents), ``view`` (what is shown, in which order;
``acceptance`` for the accept-rate part), ``figures`` (SVG geometry computed from data), ``render``
(jinja2 templates in ``templates/``), ``write`` (the three files of a report).
"""

from .results import (ACCEPT_SCHEMA, LAYERS_SCHEMA, REPORT_SCHEMA, BadResult, ResultsDiffer, load_result, merge,
                     normalize)
from .render import render_html, render_markdown
from .write import report_name, write_reports

__all__ = ["ACCEPT_SCHEMA", "LAYERS_SCHEMA", "REPORT_SCHEMA", "BadResult", "ResultsDiffer", "load_result", "merge",
           "normalize", "render_html", "render_markdown", "report_name", "write_reports"]
