"""Where eagle-audit writes, and how: outputs never overwrite inputs or unrelated data (docs/safety.md).

Rules, checked by :func:`check_output` before a run starts (so nothing is computed for a write that
would be refused):

1. An output is refused when it is an input, or lies inside an input directory. Both sides are
   compared after resolving symlinks, so a link to an input is the input.
2. An output must be writable: an existing file output must be a writable regular file, a directory
   output must not be a file, and the nearest existing parent must be a directory a file can really be
   created in (a temporary file is made and removed there: ``access()`` says yes to root even in ``/proc``).
   Missing folders of an output path are made when it is written.
3. A new directory (``layers --write-fixed-config``) is written only where it is absent, empty, or one that
   eagle-audit wrote itself: it holds the :data:`OUTPUT_MARKER` file, which lists every file written there, and
   nothing else. Such a directory is replaced whole by a re-run (built beside it, then swapped in); a directory
   with any other file in it is never touched.
4. A canary directory (``train-canary``) is written only where it is empty, absent, or holds a canary
   that eagle-audit wrote itself (the :data:`CANARY_MARKER` file). ``force`` allows another non-empty
   directory, but never an input, and never a directory holding a model or draft checkpoint that
   eagle-audit did not write.

5. An existing file output (``--json FILE``, ``report --md FILE`` / ``--html FILE``, ``probe --out``, the files of a
   ``--report`` directory) is replaced only when eagle-audit wrote it (:func:`written_by_eagle_audit`: its JSON
   schema, its report signature) or it is empty; any other file is never overwritten.

Writes are atomic (:func:`write_text`, :func:`write_bytes`, :func:`new_directory`): a temporary file in
the destination's own directory, then a rename, so a reader never sees a half-written file and a killed
run leaves the old file (or nothing) behind.

Messages name the output by the ``label`` the caller gives (the CLI passes its flag, the Python API
the parameter name).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from .errors import OutputRefused

#: the file that marks a directory as a canary written by eagle-audit (``train-canary``)
CANARY_MARKER = ".eagle-audit-canary"

#: the file that marks a directory written by eagle-audit (``--write-fixed-config``): JSON, ``files`` lists what
#: eagle-audit wrote there (:func:`mark_output`, :func:`written_here`)
OUTPUT_MARKER = ".eagle-audit-output"

#: weight files that make a directory a model or draft checkpoint
_WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.gguf", "*.pt", "*.pth")


def real(path: str | os.PathLike) -> Path:
    """The absolute path with every symlink resolved (a missing tail is kept as given)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


Inputs = "Mapping[str, str | os.PathLike | None] | Iterable[str | os.PathLike | None]"


def named_inputs(inputs) -> list[tuple[str, str | os.PathLike]]:
    """``inputs`` (role -> path, or a list of paths or of (role, path) pairs) as (role, path) pairs, the
    empty ones and "-" (stdin) left out."""
    if isinstance(inputs, Mapping):
        pairs = list(inputs.items())
    else:
        pairs = [i if isinstance(i, tuple) else ("", i) for i in inputs]
    return [(role, i) for role, i in pairs if i is not None and str(i) != "-"]


def check_output(path: str | os.PathLike, inputs: Inputs, label: str = "output", kind: str = "file") -> Path:
    """The resolved output path, or :class:`OutputRefused` when writing it would touch an input or cannot
    work. ``kind``: ``"file"``, ``"dir"``, or ``"new_dir"`` (a directory that must be absent or empty);
    ``inputs``: every path the run reads, as a list or as role -> path (the role names it in messages;
    None entries are skipped)."""
    if kind not in ("file", "dir", "new_dir"):
        raise ValueError(f"kind must be 'file', 'dir' or 'new_dir', got {kind!r}")
    p = real(path)
    for role, i in named_inputs(inputs):
        ri = real(i)
        what = f"the input {role}" if role else "an input of the run"
        if p == ri:
            raise OutputRefused(f"{label} {path}: is {what}; inputs are never modified", hint="choose another path")
        if ri.is_dir() and _inside(p, ri):
            raise OutputRefused(f"{label} {path}: lies inside {what} ({i}); inputs are never modified",
                                hint="choose a path outside every input")
    _check_writable(p, path, label, "dir" if kind == "new_dir" else kind)
    if kind == "file" and p.is_file() and p.stat().st_size > 0 and not written_by_eagle_audit(p):
        raise OutputRefused(f"{label} {path}: the file exists and eagle-audit did not write it (a file it writes is a "
                            "result, convention or launch JSON with an eagle-audit/ schema, or a report it signed); it "
                            "is never overwritten", hint="choose another path, or remove the file first")
    if kind == "new_dir" and p.is_dir() and any(p.iterdir()) and not written_here(p):
        raise OutputRefused(f"{label} {path}: the directory exists and holds files eagle-audit did not write (a directory "
                            f"it wrote holds a {OUTPUT_MARKER} file listing every file in it); it is never overwritten",
                            hint="choose a new or empty directory")
    return p


#: what marks a file eagle-audit wrote, by where it is looked for: the start of a JSON output (its ``schema``; every
#: result, convention and launch JSON begins with it), an HTML report's generator tag, a Markdown report's last line
_OURS_AT_START = (re.compile(rb'\A\s*\{\s*"schema"\s*:\s*"eagle-audit/'),
                  re.compile(rb'<meta name="generator" content="eagle-audit[ "]'))
_OURS_AT_END = re.compile(rb"<sub>eagle-audit [^<\n]*</sub>\s*\Z")


def written_by_eagle_audit(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` is one eagle-audit writes (rule 5 of the module docstring): a JSON output
    whose ``schema`` (its first key) starts ``eagle-audit/``, an HTML report with eagle-audit's generator tag, or
    a Markdown report ending with eagle-audit's signature. Read from the file's first and last 4 KiB."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096))
            tail = f.read(4096)
    except OSError:
        return False
    return any(r.search(head) for r in _OURS_AT_START) or bool(_OURS_AT_END.search(tail))


def written_here(directory: Path) -> bool:
    """Whether ``directory`` is one eagle-audit wrote and nobody added to: its :data:`OUTPUT_MARKER` lists every
    other entry in it (a re-run may replace it whole)."""
    try:
        record = json.loads((directory / OUTPUT_MARKER).read_text(encoding="utf-8"))
        files = set(record["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(f.name in files for f in directory.iterdir() if f.name != OUTPUT_MARKER)


def mark_output(directory: str | os.PathLike, record: dict) -> None:
    """Mark ``directory`` (being built) as written by eagle-audit: :data:`OUTPUT_MARKER` with ``record`` and the
    names of the files now in it (what :func:`written_here` checks)."""
    d = Path(directory)
    files = sorted(f.name for f in d.iterdir() if f.name != OUTPUT_MARKER)
    write_text(d / OUTPUT_MARKER, json.dumps({**record, "files": files}, indent=2, sort_keys=True) + "\n")


def _check_writable(p: Path, given, label: str, kind: str) -> None:
    if os.path.lexists(p) and not p.exists():
        raise OutputRefused(f"{label} {given}: a broken symbolic link or a symbolic-link loop")
    if p.exists():
        if kind == "file" and p.is_dir():
            raise OutputRefused(f"{label} {given}: is a directory; give a file name")
        if kind == "dir" and not p.is_dir():
            raise OutputRefused(f"{label} {given}: is a file, not a directory")
        if kind == "file" and not os.access(p, os.W_OK):
            raise OutputRefused(f"{label} {given}: the file is not writable")
    parent = p if kind == "dir" and p.exists() else p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputRefused(f"{label} {given}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputRefused(f"{label} {given}: the directory {parent} is not writable")
    try:  # access() says yes to root everywhere (/proc, a read-only mount): try for real, before any work
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".eagle-audit-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputRefused(f"{label} {given}: nothing can be written in {parent} ({e.strerror or e})") from None


def is_checkpoint(directory: Path) -> bool:
    """A model or draft checkpoint: a config.json beside weight files, or a GGUF file."""
    if next(directory.glob("*.gguf"), None) is not None:
        return True
    return (directory / "config.json").is_file() and any(next(directory.glob(g), None) for g in _WEIGHT_GLOBS)


def check_canary_out(path: str | os.PathLike, inputs: Inputs, label: str = "out",
                     force: bool = False, force_label: str = "force") -> Path:
    """The resolved canary directory, refused unless it is absent, empty, or a canary eagle-audit wrote
    (``force``: any other non-empty directory that is not a checkpoint); never an input."""
    p = check_output(path, inputs, label, kind="dir")
    if not p.is_dir() or not any(p.iterdir()):
        return p
    if (p / CANARY_MARKER).is_file():
        return p
    if is_checkpoint(p):
        raise OutputRefused(f"{label} {path}: holds a model or draft checkpoint that eagle-audit did not write; "
                            "it is never overwritten", hint="choose an empty or new directory")
    if not force:
        raise OutputRefused(f"{label} {path}: the directory is not empty and holds no canary written by eagle-audit "
                            f"(no {CANARY_MARKER} file)",
                            hint=f"choose an empty or new directory, or pass {force_label} to write into it anyway")
    return p


def mark_canary(directory: str | os.PathLike, record: dict) -> None:
    """Mark ``directory`` as a canary written by eagle-audit (what :func:`check_canary_out` looks for)."""
    write_text(Path(directory) / CANARY_MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- atomic writes

def _umask_mode(existing: Path) -> int:
    try:
        return existing.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then a rename over it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)  # a missing folder of an output path is made (check_output tried it)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _umask_mode(p))
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


@contextmanager
def new_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name beside ``path`` and rename it into place when the block
    ends without error (``path`` must be absent, empty, or one eagle-audit wrote: :func:`written_here`, which is
    then moved aside, replaced, and removed); on error the temporary directory is removed."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_current_umask())
        old = None
        if p.is_dir() and any(p.iterdir()):
            if not written_here(p):
                raise OutputRefused(f"{path}: the directory is not empty and was not written by eagle-audit")
            old = Path(tempfile.mkdtemp(dir=p.parent, prefix=f".{p.name}.", suffix=".old"))
            os.replace(p, old / "dir")
        os.replace(tmp, p)  # POSIX: replaces an empty directory, fails on a non-empty one
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
