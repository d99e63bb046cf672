"""Engine bugs behind a mismatch that a later release fixed: facts read in the engines' published wheels, kept as
data (``eagle_audit/data/engine_fixes.jsonl``, one fix a line: the conventions it concerns, the pull request, the
first release that has it and the last that does not, the architectures and draft kinds it touches, what changed,
and the file:line read in each wheel). To add one, add a line; nothing else changes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ..resolution import SideWiring


@dataclass(frozen=True)
class EngineFix:
    conventions: tuple[str, ...]  # the conventions (by name) whose releases before ``fixed_in`` have the bug
    engine: str
    pr: str
    fixed_in: str
    last_without: str
    architectures: tuple[str, ...]  # empty: every architecture
    kinds: tuple[str, ...]
    what: str
    evidence: str

    def sentence(self, release: str) -> str:
        return (f"{release} predates {self.pr}, first in {self.engine} {self.fixed_in} ({self.engine} "
                f"{self.last_without} is the last without it): {self.what}.")


@lru_cache(maxsize=1)
def engine_fixes() -> tuple[EngineFix, ...]:
    text = resources.files("eagle_audit").joinpath("data/engine_fixes.jsonl").read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(EngineFix(tuple(d["conventions"]), d["engine"], d["pr"], d["fixed_in"], d["last_without"],
                                 tuple(d.get("architectures", ())), tuple(d.get("kinds", ("eagle3",))), d["what"],
                                 d["evidence"]))
    return tuple(out)


def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def later(release: str, than: str) -> bool | None:
    """Whether release ``release`` comes after ``than`` (None: one of them is not a release number)."""
    a, b = _version(release), _version(than)
    return None if a is None or b is None else a > b


def bugs_behind(served: SideWiring, architecture: str, kind: str) -> tuple[str, ...]:
    """The fixed engine bugs the served release still has, for this architecture and draft kind, in words."""
    conv = served.convention
    if conv is None:
        return ()
    base = conv.base or conv
    out = []
    for fx in engine_fixes():
        if base.name not in fx.conventions or kind not in fx.kinds:
            continue
        if fx.architectures and architecture not in fx.architectures:
            continue
        if later(fx.fixed_in, base.version):
            out.append(fx.sentence(served.title))
    return tuple(out)
