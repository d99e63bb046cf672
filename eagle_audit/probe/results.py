"""What a probe finds: frozen records, with the upstream file and line of every fact.

A probe reads an engine's source and produces one :class:`ArchResult` per registered architecture.
Rules are compared by :meth:`ProbedRule.key` (their meaning), never by the sites they were read from.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ArchResult.status values.
SUPPORTED = "supported"  # a capture rule was derived
UNSUPPORTED = "unsupported"  # neither defines nor inherits the EAGLE-3 setter
DELEGATING_UNRESOLVED = "delegating-unresolved"  # hands the ids to an attribute whose class is unknown
UNRECOGNISED = "unrecognised"  # a rule shape the parser does not know; never guessed
STATUSES = (SUPPORTED, UNSUPPORTED, DELEGATING_UNRESOLVED, UNRECOGNISED)


@dataclass(frozen=True)
class Site:
    """A place in the engine's source: path relative to the package root (``sglang/srt/models/x.py``)."""

    path: str
    line: int
    end_line: int | None = None

    @property
    def file(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def short(self) -> str:
        """``file.py:12`` or ``file.py:12-20``."""
        if self.end_line and self.end_line != self.line:
            return f"{self.file}:{self.line}-{self.end_line}"
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class ProbedCase:
    """One explicit-ids case: the first whose ``when`` holds applies ``shift`` to every id."""

    shift: int
    when: str | None
    site: Site

    def text(self) -> str:
        shift = "verbatim" if self.shift == 0 else f"{self.shift:+d}"
        return f"{shift} if {self.when}" if self.when else shift


@dataclass(frozen=True)
class Reach:
    """Which capture indices the target's forward can reach, and how that was decided."""

    min_capture: str
    max_capture: str
    site: Site
    how: str  # e.g. "loop test `i in self.layers_to_capture`; final boundary `self.end_layer in ...`"
    unguarded: Site | None = None  # an index >= N raises IndexError at start-up (unguarded setattr here)
    count_check: Site | None = None  # captures collected by a count-checking packer (raises on a missing one)
    branch: Site | None = None  # the capture appends the layer's branch output, not the residual stream
    none_add: Site | None = None  # the capture adds ``hidden_states + residual`` with residual None at index 0


@dataclass(frozen=True)
class ProbedRule:
    """A capture rule in the convention-file vocabulary (expressions over N and ids)."""

    default_ids: str
    default_shift: int
    explicit: tuple[ProbedCase, ...]
    reach: Reach
    n_from: str = ""  # the source expression read as N, e.g. "self.config.text_config.num_hidden_layers"
    default_explicit: bool = False  # the default ids are handed to the setter as ids (DFlash / DSpark)
    id_checks: tuple[dict, ...] = ()  # the setter's own checks over its ids: id_checks entries of the convention

    def key(self) -> tuple:
        """The rule's meaning: equal keys mean the same capture indices for every N and ids."""
        return (self.default_ids, self.default_shift, tuple((c.when, c.shift) for c in self.explicit),
                self.reach.min_capture, self.reach.max_capture, self.reach.unguarded is not None,
                self.reach.count_check is not None, self.reach.branch is not None, self.reach.none_add is not None,
                self.default_explicit, tuple(sorted((c["when"], c["error"]) for c in self.id_checks)))

    def default_text(self) -> str:
        return self.default_ids + (f" {self.default_shift:+d}" if self.default_shift else "")

    def explicit_text(self) -> str:
        return "; ".join(c.text() for c in self.explicit)

    def reach_text(self) -> str:
        text = f"{self.reach.min_capture}..{self.reach.max_capture}"
        text += " (>= N: IndexError)" if self.reach.unguarded else ""
        text += " (count-checked: a missing capture raises)" if self.reach.count_check else ""
        text += " (k = 0: TypeError, residual is None)" if self.reach.none_add else ""
        return text + (" (k >= 1: branch output, not the residual stream)" if self.reach.branch else "")


@dataclass(frozen=True)
class ArchResult:
    """One registered architecture (an ``EntryClass`` member) and what the probe made of it."""

    arch: str
    cls_site: Site
    status: str
    rule: ProbedRule | None = None
    setter: Site | None = None  # the setter whose body computes the ids
    via: tuple[Site, ...] = ()  # delegating setters passed through, outermost first
    reason: str = ""  # for every status but "supported": why, naming file:line

    def where(self) -> str:
        chain = [s.short() for s in self.via] + ([self.setter.short()] if self.setter else [])
        return " -> ".join(chain) if chain else self.cls_site.short()


@dataclass(frozen=True)
class ProbeResult:
    engine: str
    version: str
    origin: str  # the folder or wheel read
    ids_from: tuple[str, ...] | None  # None: the ids reader was not found in this source
    ids_site: Site | None
    archs: tuple[ArchResult, ...]
    skipped: tuple[str, ...] = ()  # files that could not be parsed: "path:line: message"
    count_error: tuple[str, str, Site] | None = None  # the packer's own (exception, message template, site)
    id_reads: tuple[dict, ...] | None = None  # how each place is read: ids_from entries (place, shift, empty...)
    name: str | None = None  # the convention's name when not the engine's (``sglang-dflash``)
    extra: dict | None = None  # further convention keys the probe derived (block drafts: draft_kinds, id_checks...)

    def by_status(self, status: str) -> tuple[ArchResult, ...]:
        return tuple(a for a in self.archs if a.status == status)

    def get(self, arch: str) -> ArchResult | None:
        return next((a for a in self.archs if a.arch == arch), None)
