"""Prometheus text exposition (0.0.4), parsed without prometheus_client (the tests check this parser
against it): what vLLM's ``GET /metrics`` answers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .http import BadServerReply, short

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)(?:\s+\S+)?\s*$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def parse_exposition(text: str) -> list[Sample]:
    """Prometheus text exposition (0.0.4) -> samples; comments (``# HELP``, ``# TYPE``) skipped, ``_created``
    series kept under their own name. A line that is not a sample raises BadServerReply."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise BadServerReply(f"/metrics line {n} is not a Prometheus sample: {short(line, 80)}")
        labels = tuple((k, v) for k, v in _LABEL.findall(m.group(2) or ""))
        try:
            value = float(m.group(3))
        except ValueError:
            raise BadServerReply(f"/metrics line {n}: value {short(m.group(3), 40)!r} is not a number") from None
        out.append(Sample(m.group(1), labels, value))
    return out
