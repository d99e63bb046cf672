"""Render a report document to HTML or Markdown with the jinja2 templates in ``templates/``."""

from __future__ import annotations

import base64
import hashlib
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import jinja2
from markupsafe import Markup

from .paths import local_paths
from .view import build_view


@lru_cache(maxsize=None)
def _env(kind: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("eagle_audit.report", "templates"),
                             autoescape=kind == "html", trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["md"] = md_text
    env.filters["md_cell"] = md_cell
    env.filters["md_code"] = md_code
    env.filters["md_code_cell"] = lambda t: md_code(t).replace("|", "\\|")
    env.filters["md_fence"] = md_fence
    env.filters["px"] = lambda v: f"{v:.1f}".rstrip("0").rstrip(".")  # SVG coordinates, compact
    from ..terminal import strip_sources

    env.filters["nosrc"] = strip_sources  # engine file:line: the JSON and the HTML keep them, Markdown leaves them out
    return env


def render_html(data: Mapping[str, Any]) -> str:
    """One self-contained HTML page (inline CSS, SVG and script; no external URL) for a layers result,
    an accept-rate result, or both merged (see :mod:`eagle_audit.report.results`)."""
    script = Markup(_copy_js())
    return _env("html").get_template("report.html.j2").render(v=build_view(data), script=script,
                                                              script_hash=Markup(script_hash(str(script))))


@lru_cache(maxsize=None)
def _copy_js() -> str:
    return (resources.files("eagle_audit.report") / "templates" / "copy.js").read_text(encoding="utf-8")


def script_hash(script: str) -> str:
    """The CSP source that allows exactly this inline script: ``'sha256-<base64>'`` of its text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def render_markdown(data: Mapping[str, Any]) -> str:
    """GitHub-flavoured Markdown, compact enough for a pull-request comment. Paths are shown relative to the
    working directory, never the user's home, environment or caches (:func:`.paths.local_paths`)."""
    text = _env("md").get_template("report.md.j2").render(v=build_view(local_paths(data)))
    return re.sub(r"\n{3,}", "\n\n", text).lstrip("\n")


_INLINE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "*": "\\*", "`": "\\`",
                         "|": "\\|", "~": "\\~"})
_LINE_START = re.compile(r"^(\s*)([#>+=\[-]|\d+[.)])")


def _one_line(text: Any) -> str:
    return re.sub(r"[\r\n\t\v\f\x00-\x08\x0e-\x1f\x7f\u2028\u2029]+", " ", str(text))


def md_text(text: Any, line_start: bool = True) -> str:
    """A value as inline Markdown text, safe in any inline context (a paragraph, a heading, a list item,
    a table cell): one line; no raw HTML (``& < >`` as entities); no emphasis, code, link, image,
    strikethrough or table syntax (``* ` ~ |`` and backslashes escaped; ``_`` where it could open or close
    emphasis; ``]`` before ``(``, ``[`` or ``:``); and nothing at its start that would open a heading, list,
    quote, rule or link reference definition. Plain brackets (``[2, N // 2]``) stay as they are."""
    s = _one_line(text).strip().translate(_INLINE)
    s = re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", s)
    s = re.sub(r"\](?=[(\[:])", r"\\]", s)  # '[a](b)', '[a][b]', '![a](b)', '[a]: b' are never links
    m = _LINE_START.match(s) if line_start else None
    if m:  # '# x', '- x', '1. x' would start a block where the value begins a line
        mark = m.group(2)
        s = s[: m.start(2)] + (mark[:-1] + "\\" + mark[-1] if mark[-1] in ".)" else "\\" + mark) + s[m.end(2):]
    return s


def md_cell(text: Any) -> str:
    """A table cell: :func:`md_text` (which already escapes pipes); a cell never starts a line, so a
    leading ``-`` (a negative number) stays as it is."""
    return md_text(text, line_start=False)


def md_code(text: Any) -> str:
    """A value as an inline code span that the value cannot close: the fence is one backtick longer than
    the longest run of backticks inside (CommonMark), on one line. Nothing inside a code span is markup."""
    s = _one_line(text)
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_fence(text: Any, info: str = "") -> str:
    """A fenced code block that the value cannot close: the fence is longer than any backtick run in it."""
    s = str(text).replace("\r", "")
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * max(3, run + 1)
    return f"{fence}{info}\n{s}\n{fence}"
