"""The test workers' schedule (tests/conftest.py ``pytest_xdist_make_scheduler``, docs/testing.md "Workers"): a
file's tests run on one worker, and tests/realvllm/ is one unit. Run through a real ``pytest -n 2`` on two small
files of this suite: the grouping once silently did nothing (xdist 3.8.0's ``loadgroup`` under pytest 9.2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import _group

ROOT = Path(__file__).resolve().parents[1]
FILES = ("tests/test_expr.py", "tests/test_states.py")


def test_the_real_engine_tier_is_one_unit_and_every_other_file_its_own():
    assert _group("tests/realvllm/test_realvllm_accept.py::test_served_layout[spec]") == "realvllm"
    assert _group("tests/realvllm/test_realvllm_block.py") == "realvllm"
    assert _group("tests/test_expr.py::test_x") == "tests/test_expr.py"


@pytest.mark.full  # a second pytest with two workers: about 15 s
def test_each_file_runs_on_one_worker():
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *FILES],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "EAGLE_AUDIT_DURATIONS": "/dev/null"})
    assert r.returncode == 0, r.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, path in re.findall(r"\[(gw\d+)\] \[ *\d+%\] PASSED (tests/[^:]+)::", r.stdout):
        workers[path].add(worker)
    assert set(workers) == set(FILES), r.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
