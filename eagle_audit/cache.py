"""The cache under ``$EAGLE_AUDIT_CACHE``: entries built once, safe under concurrent runs and kills.

An entry (for example the safetensors conversion of a GGUF file) is a directory that only ever appears
whole: it is built in a temporary directory beside it (``.<name>.<random>.tmp``) and renamed into place.
Building holds an exclusive ``fcntl`` lock on ``.<name>.lock``, so two cold runs do not build the same
entry twice: the second waits, then finds the entry built. While holding the lock, the temporary
directories a killed run left for this entry are removed (no one else can be writing them), as is an
incomplete entry from an older eagle-audit that built in place.

Assumption: the cache is on a local file system where ``flock`` and ``rename`` work (not NFS without
lock support). Without ``fcntl`` (Windows) entries are still built atomically, without the lock.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold the exclusive lock of one cache entry (blocking) for the block."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    lock = entry.parent / f".{entry.name}.lock"
    with open(lock, "a+") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def stale_temporaries(entry: Path) -> list[Path]:
    """Temporary directories of ``entry`` (this layout and the older ``<name>.tmp``)."""
    return sorted(entry.parent.glob(f".{entry.name}.*.tmp")) + [p for p in [entry.with_name(entry.name + ".tmp")]
                                                              if p.exists()]


def build_entry(entry: Path, complete: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """``entry``, built by ``build(tmp_dir)`` unless ``complete(entry)`` already holds; see the module doc."""
    if complete(entry):
        return entry
    with entry_lock(entry):
        if complete(entry):  # another run built it while this one waited
            return entry
        for tmp in stale_temporaries(entry):  # left by a killed run: nobody else holds the lock
            shutil.rmtree(tmp, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}.", suffix=".tmp"))
        try:
            build(tmp)
            if entry.exists():  # an incomplete entry (an older eagle-audit built in place)
                shutil.rmtree(entry)
            os.replace(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return entry
