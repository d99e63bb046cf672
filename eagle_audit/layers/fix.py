"""Invert an engine's capture rule: the ids, and where to write them, that make the engine feed
exactly the trained states; or say plainly that no config can.

Every candidate is proven before it is offered (:func:`eagle_audit.layers.reaudit.prove`): its fixed copy, audited
again with the same engine release and trainer, the original trained states pinned, is a match. A fix for one
release is offered only where that release accepts it; where none exists, the first later release given
(``releases``: (release, :class:`~eagle_audit.conventions.Convention`) pairs, from a registry of releases) with a
proven fix is named ("upgrade to X, then ..."), and the engine bugs behind the mismatch that a later release fixed
are said (:mod:`eagle_audit.layers.engine_bugs`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Iterator, Mapping

from ..conventions import ID_PLACES, Convention, place_key
from ..draft.read import DraftSpec
from ..errors import AuditError, param
from ..resolution import BLOCKS, Resolution, side_of
from ..states import labels
from ..target import TargetInfo
from .engine_bugs import bugs_behind, later
from .reaudit import prove, target_of
from .result import Fix, compose_patches, merge_patch

__all__ = ["known_releases", "merge_patch", "plan_fix"]

#: Where a count key the engine sizes fc by may be written, tried in this order (the first the engine then reads
#: wins): the top level, a speculators config's transformer_layer_config (what vLLM's speculators loader builds the
#: draft's config from), and SGLang's nested eagle_config.
AUX_COUNT_PLACES = ((), ("transformer_layer_config",), ("eagle_config",))


def _ids_patch(place: str, ids: list[int]) -> dict:
    keys = ID_PLACES[place]
    patch: dict = {}
    node = patch
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = list(ids)
    return patch


def plan_fix(res: Resolution, draft: DraftSpec, target_hidden: int, target: TargetInfo | None = None,
             releases: Iterable[tuple[str, Convention]] = ()) -> Fix:
    """The smallest config change after which the served release feeds the trained states, proven by a re-audit
    of the fixed copy (``target``: the target's description, for that re-audit; without it, one made of the
    resolution's architecture, layer count and ``target_hidden``). Where the served release has none,
    ``releases`` (release, convention) of the same engine are tried in the order given, later releases only:
    the first with a proven fix is named in the explanation and returned as ``upgrade``."""
    info = target or target_of(res, target_hidden)
    fix = _plan(res, draft, target_hidden, info)
    served = res.served
    bugs = bugs_behind(served, res.architecture, draft.kind) if served.convention is not None else ()
    fix = replace(fix, release=served.title, engine_bugs=bugs)
    if fix.possible:
        return fix if not bugs else replace(fix, explanation=fix.explanation + " " + " ".join(bugs))
    if fix.patch or "already feeds" in fix.explanation:  # the wiring is right: no release changes that
        return fix
    upgrade, tried = None, []
    current = served.convention.version if served.convention is not None else ""
    for release, conv in releases:
        if later(conv.version or release, current) is False:
            continue
        try:
            side = side_of(conv, draft.config, res.architecture, res.num_layers, where="the draft's config.json")
        except AuditError:
            continue
        tried.append(side.title)
        alt = _plan(Resolution(res.trained, side, res.architecture, res.num_layers), draft, target_hidden, info)
        if alt.possible:
            upgrade = replace(alt, release=side.title)
            break
    text = f"No config fix on {served.title}: {fix.explanation}"
    if upgrade is not None:
        text += f" Upgrade to {upgrade.release}, then: {upgrade.explanation}"
    elif tried:
        text += f" No later release known has one either ({', '.join(tried)})."
    if bugs:
        text += " " + " ".join(bugs)
    return replace(fix, explanation=text, upgrade=upgrade)


def known_releases(served) -> Iterator[tuple[str, Convention]]:
    """The releases of the served engine in the release data (:mod:`eagle_audit.conventions.releases`) after the
    served one, oldest first, each with its convention (built only when asked for: :func:`plan_fix` stops at the
    first with a proven fix)."""
    from ..conventions.registry import release_convention
    from ..conventions.releases import known

    conv = served.convention
    if conv is None:
        return
    base = conv.base or conv
    for version in known(base.name):
        if later(version, base.version):
            try:
                yield version, release_convention(base.name, version)
            except AuditError:
                continue


def _plan(res: Resolution, draft: DraftSpec, target_hidden: int, info: TargetInfo) -> Fix:
    """The fix on the served release alone (module docstring): the first candidate whose proof holds."""
    engine, trained_side = res.served, res.trained
    trained = trained_side.states
    architecture, num_layers = res.architecture, res.num_layers
    eng_name = engine.wiring.convention
    name = engine.title
    aux = draft.aux_count(target_hidden)
    if engine.wiring.unsupported is not None:
        supported = engine.convention.supported(architecture) if engine.convention is not None else ""
        what = engine.convention.capture_name if engine.convention is not None else "EAGLE-3"
        return Fix(eng_name, False, f"{name} has no {what} capture for {architecture}, so no config.json makes it feed "
                   f"this draft. {supported}.")
    if aux is not None and len(trained) != aux:
        return Fix(eng_name, False, f"The trained wiring has {len(trained)} states but fc.weight takes {aux}, so "
                   "the trained states are unknown and no ids can be computed. Name them with "
                   f"{param('trained_boundaries')} or pick the right {param('trainer')}.")
    if any(s.normed for s in trained):
        return Fix(eng_name, False, f"{name} never applies the final norm to a captured state, so no config makes it "
                   f"feed the post-norm state the draft was trained on. Retrain on B{num_layers} (pre-norm), or serve "
                   "with an engine patched to capture after the final norm.")
    if engine.order == "ascending" and list(trained) != sorted(trained):
        return Fix(eng_name, False, f"{name} concatenates states in ascending order, but training used "
                   f"{[s.label() for s in trained]}. No config changes that: permute the column blocks of fc.weight into "
                   "ascending order (and fc_norm.* with them), then write the ids for the sorted states.")
    if engine.order == "ascending" and len(set(trained)) != len(trained):
        return Fix(eng_name, False, f"{name} collapses duplicate states; training fed one state twice.")

    extra: dict = {}
    # draft flags the engine runs differently from training: the value that makes it run them as trained
    for block in BLOCKS:
        if getattr(trained_side.flags, block.attr) == getattr(engine.flags, block.attr) or block.flag in extra:
            continue
        setting = engine.setting_for(block, trained_side.flags, draft.config)
        if setting is not None:
            extra[block.flag] = setting
        elif block.flag not in engine.implements and block.flag != "norm_output":
            return Fix(eng_name, False, f"{name} does not implement the draft flag {block.flag}, which training used; "
                       f"no config makes it apply it. Serve with an engine that implements {block.flag}, or retrain "
                       "without it.")
        else:
            return Fix(eng_name, False, f"{name} runs {block.where} differently from training whatever {block.flag} "
                       f"says (training {block.on if getattr(trained_side.flags, block.attr) else block.off}; {name} "
                       f"{block.on if getattr(engine.flags, block.attr) else block.off}); no config changes that.")
    if draft.target_hidden_size is None and draft.hidden_size != target_hidden:
        extra["target_hidden_size"] = target_hidden
    # what the engine needs to load the draft at all, as the class it is audited with (architectures, ...)
    load, load_why = engine.convention.load_patch(draft.config) if engine.convention is not None else ({}, "")
    load_note = f" Also {load_why}." if load else ""
    rule = engine.rule
    wiring_right = (list(engine.states) == list(trained) and not engine.dropped and engine.aux_count == len(trained)
                    and engine.wiring.failure is None and not engine.wiring.not_residual)
    if wiring_right and extra and "target_hidden_size" not in extra:  # only draft flags to change: ids stay
        return _proven(res, draft, info, Fix(
            eng_name, True, f"{name} already feeds the trained states {[s.label() for s in trained]}; set "
            + ", ".join(f"{k} = {v}" for k, v in extra.items()) + "." + load_note,
            compose_patches(load, extra), None, None, engine.states))
    if wiring_right and load and not extra:  # only loading to fix
        return _proven(res, draft, info, Fix(
            eng_name, True, f"{name} would feed the trained states {[s.label() for s in trained]} but cannot "
            f"load the draft as written: {load_why}.", dict(load), None, None, engine.states))
    if wiring_right and not extra:
        return Fix(eng_name, False, f"{name} already feeds the trained states {[s.label() for s in trained]}; "
                   "the errors found are not in the layer wiring and no config.json change fixes them (see each "
                   "finding).")
    desired = [s.boundary for s in trained]
    candidates: list[tuple[str | None, list[int] | None]] = []
    reads = {r.place: r for r in engine.convention.reads()} if engine.convention is not None else {}
    applicable = [p for p in engine.id_places if p not in reads or not reads[p].skipped(draft.config)]
    if engine.convention is not None:  # a DFlash / DSpark draft keeps its ids in its own places
        applicable = [p for p in applicable if p in engine.convention.kind_places()] or applicable
    for place in applicable[:1]:
        read_shift = reads[place].shift if place in reads else 0
        for case in rule.explicit:
            candidates.append((place, [b - case.shift - read_shift for b in desired]))
    candidates.append((None, None))  # no ids at all: the engine's default
    refused: Fix | None = None  # the first candidate that feeds the trained states but whose proof failed
    for place, ids in candidates:
        patch = compose_patches(load, extra)
        if place is not None:
            patch = compose_patches(patch, _ids_patch(place, ids))
        else:  # remove every id place the engine reads, so that its default applies
            for p in engine.id_places:
                patch = compose_patches(patch, _ids_patch(p, [0]))
                patch = _null_leaf(patch, p)
        fixed = merge_patch(draft.config, patch)
        try:
            side = engine.reresolve(fixed, architecture, num_layers)
        except Exception:
            continue
        wiring = side.wiring
        if list(wiring.states) != list(trained) or wiring.dropped or wiring.failure is not None:
            continue
        trained_feeds = dict(trained_side.wiring.not_residual)
        if any(trained_feeds.get(k) != what for k, what in wiring.not_residual):
            continue  # the right indices, but not the residual stream there
        if side.aux_count != len(trained):
            count = _aux_count_patch(engine, patch, draft, len(trained), architecture, num_layers)
            if count is None:
                continue  # no key this engine reads sizes fc for the trained count
            patch = compose_patches(patch, count)
        note = ""
        if ids and any(i < 0 for i in ids):
            note = (f" Id -1 addresses the embedding output (capture index 0), which {name} captures (its rules, "
                    "re-audited).")
        where = place_key(place) if place else "no ids (the engine default)"
        explanation = (f"Write {where} = {ids} ({wiring.case}); {name} then feeds {labels(wiring.states)}."
                       if place else f"Remove the ids: {name}'s default feeds {labels(wiring.states)}.") + note
        if extra:
            explanation += " Also set " + ", ".join(f"{k} = {v}" for k, v in extra.items()) + "."
        if side.aux_count != len(trained):
            explanation += " Also set " + ", ".join(f"{'.'.join(k)} = {len(trained)}" for k in _leaves(count)) + "."
        explanation += load_note
        offer = _proven(res, draft, info, Fix(eng_name, True, explanation, patch, tuple(ids) if ids else None,
                                              place_key(place) if place else None, wiring.states))
        if offer.possible:
            return offer
        refused = refused or offer
    if refused is not None:
        return refused
    lo, hi = engine.reach
    out_of_range = [s.label() for s in trained if not lo <= s.boundary <= hi]
    branch = [s.label() for s in trained if rule.feed(s.boundary, num_layers) is not None]
    if branch:
        why = (f"{name} ({rule.name}) does not capture the residual stream at {', '.join(branch)} on {architecture}: "
               f"there it feeds {rule.feed(next(s.boundary for s in trained if s.label() == branch[0]), num_layers)}. "
               "No config changes what the engine captures: serve with an engine that captures the residual stream "
               "for this architecture, or train on what this one feeds.")
    elif out_of_range:
        why = (f"{name} ({rule.name}) captures only boundaries {lo}..{hi}; training used {', '.join(out_of_range)}. "
               "No config reaches them: retrain on reachable boundaries, or use an engine that captures them "
               "(for the final boundary: SGLang's gpt-oss and MiniMax-M3 rules, or vLLM).")
    elif not engine.id_places:
        why = f"{name} reads no ids from the draft; it always feeds its default."
    else:
        why = f"no ids under {name}'s rule {rule.name} produce {[s.label() for s in trained]}."
    return Fix(eng_name, False, why)


def _null_leaf(patch: dict, place: str) -> dict:
    keys = ID_PLACES[place]
    node = patch
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = None
    return patch


def _leaves(patch: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in patch.items():
        out.extend(_leaves(v, prefix + (k,)) if isinstance(v, Mapping) else [prefix + (k,)])
    return out


def _aux_count_patch(engine, patch: Mapping[str, Any], draft: DraftSpec, want: int, architecture: str,
                     num_layers: int) -> dict | None:
    """Where to write the aux count so that this engine sizes fc for ``want`` states: each count key it reads
    (``aux_count_from``), at each of :data:`AUX_COUNT_PLACES`, re-resolved through the engine's own view of the
    config (a speculators config through its loader, which drops top-level keys it does not copy); None where
    no place works."""
    keys = [k for k in (engine.aux_count_from or ()) if isinstance(k, str) and k not in ID_PLACES]
    for key in keys:
        for where in AUX_COUNT_PLACES:
            if where and not isinstance(draft.config.get(where[0]), Mapping):
                continue  # a place the config does not have is not made up
            count: dict = {key: want}
            for k in reversed(where):
                count = {k: count}
            fixed = merge_patch(draft.config, compose_patches(patch, count))
            try:
                side = engine.reresolve(fixed, architecture, num_layers)
            except AuditError:
                continue
            if side.aux_count == want:
                return count
    return None


def _proven(res: Resolution, draft: DraftSpec, info: TargetInfo, fix: Fix) -> Fix:
    """``fix`` once its fixed copy re-audits as a match (its patch then pins the trained states where needed);
    else no fix, with the one line why."""
    proof = prove(res, draft, fix.patch, info)
    if proof.match:
        pinned = "" if proof.patch == fix.patch else (
            " The trainer's convention reads what this changes, so the patch also pins the trained states "
            "(eagle_audit_fix.trained_states; later audits keep them).")
        return replace(fix, patch=dict(proof.patch), explanation=fix.explanation + pinned, proof=proof.why)
    what = f"{fix.key} = {list(fix.ids)}" if fix.key and fix.ids is not None else "the config change found"
    return Fix(fix.engine, False, f"none is offered: {what} would feed the trained states, but {proof.why}.",
               proof=proof.why)
