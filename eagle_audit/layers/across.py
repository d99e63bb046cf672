"""One draft's verdict under other engines and other releases than the one audited slot by slot: every engine at its
newest built-in release where no engine was named (no verdict holds for one engine alone), and every known release
of a range (``sglang@0.5.6..0.5.23``: which releases serve the draft right). Each is the static audit of the same
draft and trained wiring under that release's rules, with the measured cosines where the audit's scan has them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..conventions import Convention, get_convention, release_convention
from ..errors import AuditError
from ..resolution import MEASURED, Resolution, resolve_audit
from .diagnose import SlotStats, diagnose
from .result import Heatmap


@dataclass(frozen=True)
class EngineVerdict:
    """The verdict on one engine release: ``label`` 'vLLM 0.33.0 (V2 model runner, default; assumed)',
    ``errors`` the error findings' codes (none: a match), ``refused`` why this release has no verdict at all
    (no rules for the draft's kind there, say), else empty."""

    engine: str
    version: str
    how: str
    label: str
    verdict: str  # "match", "mismatch" or "no rules"
    errors: tuple[str, ...] = ()
    warnings: int = 0
    refused: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "version": self.version, "how": self.how, "label": self.label,
                "verdict": self.verdict, "errors": list(self.errors), "warnings": self.warnings,
                "refused": self.refused or None}


def _stats(res: Resolution, heat: Heatmap | None, n: int) -> dict[int, SlotStats] | None:
    """The slots' cosines under another served wiring, read off the audit's scan (None: not scanned)."""
    if heat is None:
        return None
    index = {s: c for c, s in enumerate(heat.states)}
    if any(t not in index for t in res.trained.states):
        return None
    lo, hi = res.served.reach or (0, n)
    servable = [c for c, s in enumerate(heat.states) if not s.normed and lo <= s.boundary <= hi]
    out = {}
    for r, _ in enumerate(res.trained.states):
        row = heat.rows[r]
        s = res.served.states[r] if r < len(res.served.states) else None
        best = max(servable, key=lambda c: row[c]) if servable else None
        out[r] = SlotStats(row[index[s]] if s in index else None, heat.states[best] if best is not None else None,
                           row[best] if best is not None else None)
    return out


def verdict_on(conv: Convention, draft, info, base: Resolution, trainer: str | None, trained_boundaries,
               trained_ids, heat: Heatmap | None = None) -> EngineVerdict:
    """The audit's draft and trained wiring under ``conv``'s release: its verdict and error codes."""
    from ..draft.block import convention_for

    label = conv.label()
    try:
        served = convention_for(conv, draft.kind)
        if trainer == MEASURED:  # the trained wiring the weights showed, pinned
            trainer, trained_boundaries, trained_ids = None, base.trained.states, None
        res, _ = resolve_audit(draft, info, served, [], trainer, trained_boundaries, trained_ids)
        _, findings = diagnose(draft, info, res, _stats(res, heat, info.num_layers))
    except AuditError as e:
        return EngineVerdict(conv.name, conv.version, conv.release_how, label, "no rules", refused=e.message)
    errors = tuple(dict.fromkeys(f.code for f in findings if f.severity == "error"))
    return EngineVerdict(conv.name, conv.version, conv.release_how, label, "mismatch" if errors else "match", errors,
                         sum(f.severity != "error" for f in findings))


def other_engines(audited: Convention) -> tuple[Convention, ...]:
    """Every engine but ``audited``'s, at its newest built-in release, each engine's default rules (vLLM: the V2
    runner), chosen as ``audited`` was ("assumed")."""
    from dataclasses import replace

    from ..engines.options import WIRES  # each engine's name is its default convention's (not its registry: torch)

    out = []
    for name in WIRES:
        if audited.name == name or audited.name.startswith(name + "-"):
            continue
        try:
            out.append(replace(get_convention(name, "engine"), release_how=audited.release_how))
        except AuditError:
            continue
    return tuple(out)


def range_releases(audited: Convention, span: Sequence[str]) -> tuple[Convention, ...]:
    """``audited``'s engine at each release of ``span`` but ``audited``'s own, oldest first."""
    return tuple(release_convention(audited.name, v, audited.release_how) for v in span if v != audited.version)
