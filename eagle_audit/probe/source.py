"""Find an engine's Python source without importing it: an installed package, a folder, or a wheel.

Only the files a probe reads are loaded (the model files, the version files, the draft-ids reader),
as text, into a :class:`SourceTree` keyed by package-relative POSIX paths (``sglang/srt/...``).
Nothing is imported or executed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import AuditError, InputNotFound


class BadSource(AuditError):
    """An engine source (folder or wheel) exists but cannot be read."""


@dataclass(frozen=True)
class SourceTree:
    """Text of the files a probe needs, by package-relative path."""

    package: str  # "sglang"
    origin: str  # the folder or wheel, as given or found
    kind: str  # "installed" | "folder" | "wheel"
    files: Mapping[str, str] = field(repr=False)
    dist_version: str | None = None  # from the wheel name or the installed distribution, when known

    def models_dir(self) -> str:
        return f"{self.package}/srt/models/"

    def model_files(self) -> list[str]:
        prefix = self.models_dir()
        return sorted(p for p in self.files if p.startswith(prefix) and p.endswith(".py"))

    def find(self, filename: str) -> list[str]:
        """Paths whose last component is ``filename``."""
        return sorted(p for p in self.files if p.rsplit("/", 1)[-1] == filename)


def _wanted(rel: str, package: str, extra_names: tuple[str, ...]) -> bool:
    if not rel.endswith(".py"):
        return False
    if rel.startswith(f"{package}/srt/models/"):
        return True
    if rel in (f"{package}/version.py", f"{package}/_version.py"):
        return True
    return rel.startswith(f"{package}/srt/") and rel.rsplit("/", 1)[-1] in extra_names


def _expected(package: str) -> str:
    return f"no {package} source (expected {package}/srt/models/*.py)"


def _from_folder(root: Path, package: str, origin: str, kind: str, extra_names: tuple[str, ...],
                 dist_version: str | None = None) -> SourceTree:
    files: dict[str, str] = {}
    pkg = root / package
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if _wanted(rel, package, extra_names):
                try:
                    files[rel] = full.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as e:
                    raise BadSource(f"{full}: cannot read ({e})") from None
    tree = SourceTree(package, origin, kind, files, dist_version)
    if not tree.model_files():
        raise InputNotFound(f"{origin}: {_expected(package)}")
    return tree


def _from_wheel(path: Path, package: str, extra_names: tuple[str, ...]) -> SourceTree:
    try:
        with zipfile.ZipFile(path) as zf:
            files = {n: zf.read(n).decode("utf-8") for n in zf.namelist() if _wanted(n, package, extra_names)}
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError, EOFError) as e:
        raise BadSource(f"{path}: not a readable wheel ({e})") from None
    m = re.match(rf"{re.escape(package)}-([^-]+)-", path.name)
    tree = SourceTree(package, str(path), "wheel", files, m.group(1) if m else None)
    if not tree.model_files():
        raise InputNotFound(f"{path}: {_expected(package)}")
    return tree


def locate(package: str, source: str | os.PathLike | None = None,
           extra_names: tuple[str, ...] = ()) -> SourceTree:
    """The source of ``package``: ``source`` (a folder or a .whl) or else the installed copy.

    A folder may be the directory holding ``<package>/`` (site-packages, a repo's ``python/``), a repo
    root with ``python/<package>/``, or the package directory itself. ``extra_names``: file names
    under ``<package>/srt/`` to load as well (for example the draft-ids reader).
    """
    if source is None:
        try:
            spec = importlib.util.find_spec(package)  # finds, never imports, a top-level package
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise InputNotFound(f"{package} is not installed in this Python environment",
                                hint="pass --source PATH: a source folder or a .whl")
        pkg_dir = Path(list(spec.submodule_search_locations)[0])
        try:
            dist = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            dist = None
        return _from_folder(pkg_dir.parent, package, str(pkg_dir), "installed", extra_names, dist)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputNotFound(f"{path}: {_expected(package)}; the path does not exist")
    if path.is_file():
        if path.suffix != ".whl" and not zipfile.is_zipfile(path):
            raise BadSource(f"{path}: not a wheel or a source folder")
        return _from_wheel(path, package, extra_names)
    for root in (path, path / "python"):
        if (root / package / "srt" / "models").is_dir():
            return _from_folder(root, package, str(path), "folder", extra_names)
    if path.name == package and (path / "srt" / "models").is_dir():
        return _from_folder(path.parent, package, str(path), "folder", extra_names)
    raise InputNotFound(f"{path}: {_expected(package)}")
