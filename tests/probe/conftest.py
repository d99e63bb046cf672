"""Fixtures for the probe tests: the real SGLang 0.5.23 wheel, fetched once into a cache outside the repo.

The cache root is ``$EAGLE_AUDIT_TEST_CACHE`` (default ``~/.cache/eagle-audit-test``); the wheel lives
in its ``sglang/`` folder and is reused when present. Without network access the wheel tests skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle_audit.probe import ProbeResult, probe_engine

SGLANG_VERSION = "0.5.23"
# the exact file the reference (shared/reference/sglang.md) was read from, whatever the host
PIP_PLATFORM = ["--platform", "manylinux_2_34_x86_64", "--python-version", "3.11", "--only-binary=:all:"]


def cache_dir() -> Path:
    root = os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test"
    return Path(root).expanduser() / "sglang"


@pytest.fixture(scope="session")
def sglang_wheel() -> Path:
    folder = cache_dir()
    pattern = f"sglang-{SGLANG_VERSION}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={SGLANG_VERSION}", "-d", str(folder),
               "--progress-bar", "off", *PIP_PLATFORM]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.skip(f"cannot download sglang=={SGLANG_VERSION}: {e}")
        found = sorted(folder.glob(pattern))
        if proc.returncode != 0 or not found:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"cannot download sglang=={SGLANG_VERSION}: {last[0]}")
    return found[0]


@pytest.fixture(scope="session")
def wheel_probe(sglang_wheel: Path) -> ProbeResult:
    return probe_engine("sglang", sglang_wheel)
