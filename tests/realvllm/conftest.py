"""Fixtures of the real-engine tier (full tier: tests/conftest.py FULL_PATHS): the harness venv, the SmolLM2
target directory a server can load, and :func:`vllm_server`, which keeps at most one real server alive and
shares it between the tests that ask for the same launch line (tests are ordered so each line starts once).
Every server is stopped at the end of the session, or when another line is asked for."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Sequence

import pytest

from tests.realvllm import harness


@pytest.fixture(scope="session")
def vllm_cpu() -> Path:
    """The harness venv's python (built once into the test cache; see harness.vllm_python)."""
    from tests import artefacts

    artefacts.ensure("vllm-cpu-venv")
    return harness.vllm_python()


@pytest.fixture(scope="session")
def smol_dir(smollm2_path) -> Path:
    """The SmolLM2-135M target as a safetensors directory (the test cache's GGUF conversion): what a vLLM server
    loads, and the same path the tool's audits take, so both sides read one checkpoint."""
    from eagle_audit.target import materialise

    return materialise(smollm2_path)


@pytest.fixture(scope="session")
def vllm_server(vllm_cpu, tmp_path_factory) -> Callable[..., harness.Server]:
    """``vllm_server(line)`` -> a healthy :class:`harness.Server` for the ``vllm serve`` argv ``line``; raises
    :class:`harness.ServerFailed` (again, without restarting) when that line did not come up. One server alive
    at a time: asking for another line stops the current one."""
    logs = tmp_path_factory.mktemp("vllm-logs")
    state: dict = {"key": None, "stack": None, "server": None}
    failed: dict[tuple[str, ...], harness.ServerFailed] = {}

    def close() -> None:
        if state["stack"] is not None:
            state["stack"].close()
        state.update(key=None, stack=None, server=None)

    def get(line: Sequence[str]) -> harness.Server:
        key = tuple(map(str, line))
        if key in failed:
            raise failed[key]
        if state["key"] == key and state["server"].alive():
            return state["server"]
        close()
        stack = contextlib.ExitStack()
        try:
            server = stack.enter_context(harness.serve(key, logs))
        except harness.ServerFailed as e:
            stack.close()
            failed[key] = e
            raise
        state.update(key=key, stack=stack, server=server)
        return server

    yield get
    close()
