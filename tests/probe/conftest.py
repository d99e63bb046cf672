"""Fixtures for the probe tests: the probe run over the real SGLang 0.5.23 wheel (tests/wheels.py fetches
it once into a cache outside the repo; without network access the wheel tests skip)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_audit.probe import ProbeResult, probe_engine


@pytest.fixture(scope="session")
def wheel_probe(sglang_wheel: Path) -> ProbeResult:
    return probe_engine("sglang", sglang_wheel)
