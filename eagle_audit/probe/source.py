"""Find an engine's Python source without importing it: an installed package, a folder, or a wheel.

Only the files a probe reads are loaded (the model files, the version files, the draft-ids reader),
as text, into a :class:`SourceTree` keyed by package-relative POSIX paths (``sglang/srt/...``).
Nothing is imported or executed. Where an engine keeps its model files differs (SGLang
``srt/models/``; vLLM ``model_executor/models/`` and ``models/``): ``model_dirs`` says, package-relative.
"""

from __future__ import annotations

import ast
import importlib.metadata
import io
import importlib.util
import os
import re
import tokenize
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import AuditError, InputNotFound, param


class BadSource(AuditError):
    """An engine source (folder or wheel) exists but cannot be read."""


def parse_python(text: str, filename: str = "<source>") -> ast.Module:
    """``ast.parse``, with every way a hostile file can fail it raised as SyntaxError (which the probes
    record as "not parsed" and go on): NUL bytes, nesting deeper than the parser or the stack allow."""
    try:
        return ast.parse(text, filename=filename)
    except SyntaxError:
        raise
    except (ValueError, RecursionError, MemoryError) as e:
        raise SyntaxError(f"cannot be parsed ({type(e).__name__}: {str(e)[:80]})", (filename, 1, 0, "")) from None


def decode_python(data: bytes) -> str:
    """The text of a Python file as the interpreter would read it (a ``coding:`` cookie, else UTF-8); bytes
    that do not decode become U+FFFD instead of failing the whole probe (the probe reads structure)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:  # an unknown codec named in the cookie
        return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class SourceTree:
    """Text of the files a probe needs, by package-relative path."""

    package: str  # "sglang"
    origin: str  # the folder or wheel, as given or found
    kind: str  # "installed" | "folder" | "wheel"
    files: Mapping[str, str] = field(repr=False)
    dist_version: str | None = None  # from the wheel name or the installed distribution, when known
    model_dirs: tuple[str, ...] = ("srt/models",)  # package-relative folders holding model files

    def models_dir(self) -> str:
        return f"{self.package}/{self.model_dirs[0]}/"

    def model_files(self) -> list[str]:
        prefixes = tuple(f"{self.package}/{d}/" for d in self.model_dirs)
        return sorted(p for p in self.files if p.startswith(prefixes) and p.endswith(".py"))

    def find(self, filename: str) -> list[str]:
        """Paths whose last component is ``filename``."""
        return sorted(p for p in self.files if p.rsplit("/", 1)[-1] == filename)


@dataclass(frozen=True)
class _Layout:
    package: str
    model_dirs: tuple[str, ...]  # every .py below these is loaded
    extra_names: tuple[str, ...]  # file names loaded when under extra_root
    extra_root: str
    extra_paths: tuple[str, ...] = ()  # package-relative files loaded as well ("config.py")

    def wanted(self, rel: str) -> bool:
        p = self.package
        if not rel.endswith(".py"):
            return False
        if rel.startswith(tuple(f"{p}/{d}/" for d in self.model_dirs)):
            return True
        if rel in (f"{p}/version.py", f"{p}/_version.py") or rel in (f"{p}/{e}" for e in self.extra_paths):
            return True
        return rel.startswith(f"{p}/{self.extra_root}/") and rel.rsplit("/", 1)[-1] in self.extra_names

    def expected(self) -> str:
        return f"no {self.package} source (expected {self.package}/{self.model_dirs[0]}/*.py)"

    def tree(self, origin: str, kind: str, files: dict[str, str], dist: str | None) -> SourceTree:
        return SourceTree(self.package, origin, kind, files, dist, self.model_dirs)


def _from_folder(root: Path, layout: _Layout, origin: str, kind: str, dist_version: str | None = None) -> SourceTree:
    files: dict[str, str] = {}
    pkg = root / layout.package
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if layout.wanted(rel):
                try:
                    files[rel] = decode_python(full.read_bytes())
                except OSError as e:
                    raise BadSource(f"{full}: cannot read ({e.strerror or e})") from None
    tree = layout.tree(origin, kind, files, dist_version)
    if not tree.model_files():
        raise InputNotFound(f"{origin}: {layout.expected()}")
    return tree


def _from_wheel(path: Path, layout: _Layout) -> SourceTree:
    try:
        with zipfile.ZipFile(path) as zf:
            files = {n: decode_python(zf.read(n)) for n in zf.namelist() if layout.wanted(n)}
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as e:  # zip errors vary
        raise BadSource(f"{path}: not a readable wheel ({e})") from None
    m = re.match(rf"{re.escape(layout.package)}-([^-]+)-", path.name)
    tree = layout.tree(str(path), "wheel", files, m.group(1) if m else None)
    if not tree.model_files():
        raise InputNotFound(f"{path}: {layout.expected()}")
    return tree


def locate(package: str, source: str | os.PathLike | None = None, extra_names: tuple[str, ...] = (),
           model_dirs: tuple[str, ...] = ("srt/models",), extra_root: str = "srt",
           extra_paths: tuple[str, ...] = ()) -> SourceTree:
    """The source of ``package``: ``source`` (a folder or a .whl) or else the installed copy.

    A folder may be the directory holding ``<package>/`` (site-packages, a repo's ``python/``), a repo
    root with ``python/<package>/``, or the package directory itself. ``model_dirs``: package-relative
    folders whose ``.py`` files are all loaded (the first one must exist); ``extra_names``: file names
    under ``<package>/<extra_root>/`` to load as well (for example the draft-ids reader); ``extra_paths``:
    package-relative files to load as well (``config.py``).
    """
    layout = _Layout(package, tuple(model_dirs), tuple(extra_names), extra_root, tuple(extra_paths))
    first = model_dirs[0]
    if source is None:
        try:
            spec = importlib.util.find_spec(package)  # finds, never imports, a top-level package
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise InputNotFound(f"{package} is not installed in this Python environment",
                                hint=f"pass {param('source')}: a source folder or a .whl")
        pkg_dir = Path(list(spec.submodule_search_locations)[0])
        try:
            dist = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            dist = None
        return _from_folder(pkg_dir.parent, layout, str(pkg_dir), "installed", dist)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputNotFound(f"{path}: {layout.expected()}; the path does not exist")
    if path.is_file():
        if path.suffix != ".whl" and not zipfile.is_zipfile(path):
            raise BadSource(f"{path}: not a wheel or a source folder")
        return _from_wheel(path, layout)
    for root in (path, path / "python"):
        if (root / package / first).is_dir():
            return _from_folder(root, layout, str(path), "folder")
    if path.name == package and (path / first).is_dir():
        return _from_folder(path.parent, layout, str(path), "folder")
    raise InputNotFound(f"{path}: {layout.expected()}")
