"""The proof of a fix: the fixed copy of the draft audited again, as ``layers`` would audit it, before the fix is
offered.

:func:`prove` writes the fixed copy (:func:`eagle_audit.layers.fixed_copy.populate`: the patched ``config.json``,
the weights linked) into a temporary directory, reads it as a draft, resolves both sides again with the same engine
convention (the same release) and the same trainer convention, and runs every check of :func:`diagnose` on it. The
trained side may not move: where the trainer's convention reads what the fix edits (TorchSpec's Kimi-K2.5 draft:
the ids SGLang reads are the ids the trainer's convention reads), the fix also pins the original trained states
in the config (:data:`eagle_audit.resolution.FIX_KEY`), which every later audit honours, and the proof re-reads
them from there. The fix is proven when the re-audit finds no error."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ..draft.read import DraftSpec, read_draft
from ..errors import AuditError
from ..resolution import BLOCKS, FIX_KEY, Resolution, SideWiring, pinned_side, side_of
from ..states import labels
from ..target import TargetInfo
from .result import Finding, compose_patches, merge_patch


@dataclass(frozen=True)
class Proof:
    """What the re-audit of a fixed copy found. ``patch``: the patch proven (the one given, or with the trained
    states pinned, :data:`~eagle_audit.resolution.FIX_KEY`); ``why``: one line, how it matched or what is left."""

    match: bool
    why: str
    patch: Mapping[str, Any]
    served: SideWiring | None = None
    findings: tuple[Finding, ...] = ()


def target_of(res: Resolution, target_hidden: int) -> TargetInfo:
    """What the re-audit knows of a target when the caller has no :class:`TargetInfo` (no vocabulary: the
    vocabulary checks compare nothing)."""
    return TargetInfo("target", "", res.architecture, "", res.num_layers, target_hidden, 0, "")


def fixed_draft(draft: DraftSpec, config: Mapping[str, Any], work: Path, target_hidden: int) -> DraftSpec:
    """The draft with ``config`` as its config.json, read as ``layers`` reads a draft directory (from a copy in
    ``work``, its weights linked; a config-only draft's fc sized from the fixed config, as
    :func:`eagle_audit.inputs.prepare` sizes the original's); a draft with no directory on disk gets ``config``
    swapped in."""
    from .fixed_copy import populate

    src = Path(draft.path)
    if not (src / "config.json").is_file():
        return replace(draft, config=dict(config), target_hidden_size=config.get("target_hidden_size"),
                       num_aux_hidden_states=config.get("num_aux_hidden_states"))
    populate(src, work, config)
    spec = read_draft(str(work), config_only=not draft.has_weights)
    if not spec.has_weights:
        spec = spec.for_target(target_hidden)
    return replace(spec, path=draft.path)


def prove(res: Resolution, draft: DraftSpec, patch: Mapping[str, Any], target: TargetInfo) -> Proof:
    """Re-audit the draft with ``patch`` applied (module docstring)."""
    served_conv, trainer = res.served.convention, res.trained.convention
    if served_conv is None:
        return Proof(False, "the engine's rules are not known, so the fixed copy cannot be re-audited", patch)
    moved = res.trained
    for attempt in (patch, None):
        if attempt is None:  # the trained side moved: pin the original states and audit again
            record = {"trained_states": [s.label() for s in res.trained.states],
                      "trainer": trainer.name if trainer is not None else None, "engine": res.served.title}
            if _flags(moved) != _flags(res.trained):
                record["trained_flags"] = _flags(res.trained)
            attempt = compose_patches(patch, {FIX_KEY: record})
        with tempfile.TemporaryDirectory(prefix="eagle-audit-fix-") as work:
            try:
                spec = fixed_draft(draft, merge_patch(draft.config, attempt), Path(work), target.hidden_size)
                served = side_of(served_conv, spec.config, res.architecture, res.num_layers,
                                 where="the fixed config.json")
                trained = _trained(res, spec, target)
            except AuditError as e:
                return Proof(False, f"the fixed copy cannot be audited: {e.message}", attempt)
        if trained.states != res.trained.states or _flags(trained) != _flags(res.trained):
            if FIX_KEY in attempt:
                return Proof(False, f"the trained side moves from {labels(res.trained.states)} to "
                             f"{labels(trained.states)} when the fixed copy is audited again", attempt, served)
            moved = trained
            continue
        from .diagnose import diagnose

        fixed = Resolution(trained, served, res.architecture, res.num_layers)
        try:
            _, findings = diagnose(spec, target, fixed)
        except AuditError as e:
            return Proof(False, f"the fixed copy cannot be audited: {e.message}", attempt, served)
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            return Proof(False, f"the fixed copy audited under {served.title} is still a mismatch: "
                         + "; ".join(f"{f.code}: {f.what}" for f in errors[:2]), attempt, served, findings)
        pinned = f", trained states pinned in {FIX_KEY}" if FIX_KEY in attempt else ""
        return Proof(True, f"re-audited: the fixed copy is a match under {served.title} (trained "
                     f"{labels(trained.states)}{pinned})", attempt, served, findings)
    raise AssertionError("unreachable")


def _flags(side: SideWiring) -> dict[str, bool]:
    """The draft semantics a side runs, block by block (what a fix may not move on the trained side)."""
    return {b.attr: bool(getattr(side.flags, b.attr)) for b in BLOCKS}


def _trained(res: Resolution, spec: DraftSpec, target: TargetInfo) -> SideWiring:
    """The trained side of the fixed copy, resolved as :func:`eagle_audit.resolution.resolve_trained` would:
    states given directly (or recorded by a canary, or measured) stay as they are; a trainer's convention reads
    the fixed config, after the states a fix pinned there."""
    conv = res.trained.convention
    if conv is None:
        return res.trained
    pinned = pinned_side(spec, target, conv, [])
    if pinned is not None:
        return pinned[0]
    w = res.trained.wiring
    override = tuple(w.ids) if w.ids_source == "override" and w.ids is not None else None
    return side_of(conv, spec.config, res.architecture, res.num_layers, override, where="the fixed config.json")
