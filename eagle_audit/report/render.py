"""Render a report document to HTML or Markdown with the jinja2 templates in ``templates/``."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Mapping

import jinja2

from .view import build_view


@lru_cache(maxsize=None)
def _env(kind: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("eagle_audit.report", "templates"),
                             autoescape=kind == "html", trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["md"] = md_text
    env.filters["md_cell"] = md_cell
    env.filters["px"] = lambda v: f"{v:.1f}".rstrip("0").rstrip(".")  # SVG coordinates, compact
    return env


def render_html(data: Mapping[str, Any]) -> str:
    """One self-contained HTML page (inline CSS, SVG and script; no external URL) for a layers result,
    an accept-rate result, or both merged (see :mod:`eagle_audit.report.inputs`)."""
    return _env("html").get_template("report.html.j2").render(v=build_view(data))


def render_markdown(data: Mapping[str, Any]) -> str:
    """GitHub-flavoured Markdown, compact enough for a pull-request comment."""
    text = _env("md").get_template("report.md.j2").render(v=build_view(data))
    return re.sub(r"\n{3,}", "\n\n", text).lstrip("\n")


def md_text(text: Any) -> str:
    """Prose for GitHub Markdown: no raw HTML gets through, and no ``*`` starts emphasis."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def md_cell(text: Any) -> str:
    """A table cell: prose, on one line, with pipes escaped."""
    return md_text(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")
