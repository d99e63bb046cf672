"""Write a report's three files: the JSON it was made from, HTML and Markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from .. import outputs
from ..errors import AuditError
from .results import normalize
from .render import render_html, render_markdown
from .view import short_name


def report_name(data: Mapping[str, Any]) -> str:
    """The stem the files of a report share: ``<verdict>-<target>-<draft>`` (``accept-rate-<verdict>-<target>-<draft>``
    without a layers audit), lower case, e.g. ``mismatch-smollm2-135m-instruct.q4_1-demo-draft-v2``.

    Deterministic on purpose: auditing the same pair again replaces its report, while the report
    written after a fix (``match-...``) sits beside the one that found the problem (``mismatch-...``).
    """
    doc = normalize(data)
    subject = next(doc[k] for k in ("layers", "accept_rate", "fingerprint") if doc.get(k) is not None)
    target, draft = subject.get("target") or {}, subject.get("draft") or {}
    if doc.get("check") is not None:
        head = ["check", doc["check"]["verdict"].get("status")]
    elif doc["layers"] is not None:
        head = [doc["layers"]["verdict"]]
    elif doc.get("fingerprint") is not None:
        head = ["fingerprint", doc["fingerprint"]["verdict"]]
    else:
        verdict = doc["accept_rate"].get("verdict")
        head = ["accept-rate"] + ([verdict] if verdict in ("match", "mismatch") else [])
    parts = [*head, short_name(target.get("name") if isinstance(target, Mapping) else None),
             short_name((draft.get("path") or draft.get("name")) if isinstance(draft, Mapping) else None)]
    return "-".join(_slug(p) for p in parts if p and p != "?")


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9._]+", "-", str(text).lower()).strip("-.")
    return s[:60].rstrip("-.") or "x"


def write_reports(result_json: Mapping[str, Any], out_dir: str | Path, inputs: Any = ()) -> list[Path]:
    """Write ``<name>.json``, ``<name>.html`` and ``<name>.md`` into ``out_dir`` (created if needed) and
    return their paths in that order; ``<name>`` is :func:`report_name`. The JSON is the input as given
    (a single result stays a single result, so it can be rendered again or merged later); when that file
    is itself one of ``inputs`` (the result being rendered again) it is left as it is. Each file is
    written atomically; a path that is an input (or inside one) is refused before anything is written."""
    out = Path(out_dir)
    inputs = outputs.named_inputs(inputs)
    name = report_name(result_json)
    html, md = render_html(result_json), render_markdown(result_json)  # render first: no partial set on error
    paths = [out / f"{name}.json", out / f"{name}.html", out / f"{name}.md"]
    texts = [json.dumps(result_json, indent=2, default=str) + "\n", html, md]
    keep = {outputs.real(i) for _, i in inputs}
    outputs.check_output(out, inputs, "report directory", kind="dir")
    for p in paths:
        if outputs.real(p) not in keep:  # the result being rendered again is kept as it is, never checked as an output
            outputs.check_output(p, inputs, "report file")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for p, text in zip(paths, texts):
            if outputs.real(p) in keep:  # the result JSON being rendered again: it is the input, kept as is
                continue
            outputs.write_text(p, text)
    except OSError as e:
        raise AuditError(f"{out}: cannot write the report ({e.strerror or e})") from None
    return paths
