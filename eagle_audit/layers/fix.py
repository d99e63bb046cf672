"""Invert an engine's capture rule: the ids, and where to write them, that make the engine feed
exactly the trained states; or say plainly that no config can."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..conventions import ID_PLACES, place_key
from ..draft.read import DraftSpec
from ..resolution import BLOCKS, Resolution
from ..errors import param
from .result import Fix


def merge_patch(config: Mapping[str, Any], patch: Mapping[str, Any]) -> dict:
    """RFC 7386 JSON merge patch (None deletes a key)."""
    out = copy.deepcopy(dict(config))
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_patch(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _ids_patch(place: str, ids: list[int]) -> dict:
    keys = ID_PLACES[place]
    patch: dict = {}
    node = patch
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = list(ids)
    return patch


def plan_fix(res: Resolution, draft: DraftSpec, target_hidden: int) -> Fix:
    """The smallest config change after which the served side feeds the trained states (checked by
    re-resolving the patched config under the same engine rules)."""
    engine, trained_side = res.served, res.trained
    trained = trained_side.states
    architecture, num_layers = res.architecture, res.num_layers
    eng_name = engine.wiring.convention
    name = engine.title
    aux = draft.aux_count(target_hidden)
    if engine.wiring.unsupported is not None:
        supported = engine.convention.supported() if engine.convention is not None else ""
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
        return Fix(eng_name, True, f"{name} already feeds the trained states {[s.label() for s in trained]}; set "
                   + ", ".join(f"{k} = {v}" for k, v in extra.items()) + "." + load_note,
                   merge_patch(load, extra), None, None, engine.states)
    if wiring_right and load and not extra:  # only loading to fix
        return Fix(eng_name, True, f"{name} would feed the trained states {[s.label() for s in trained]} but cannot "
                   f"load the draft as written: {load_why}.", dict(load), None, None, engine.states)
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
    for place, ids in candidates:
        patch = merge_patch(load, extra)
        if place is not None:
            patch = merge_patch(patch, _ids_patch(place, ids))
        else:  # remove every id place the engine reads, so that its default applies
            for p in engine.id_places:
                patch = merge_patch(patch, _ids_patch(p, [0]))
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
        if side.aux_count != len(trained) and "num_aux_hidden_states" in engine.aux_count_from:
            patch["num_aux_hidden_states"] = len(trained)
        note = ""
        if ids and any(i < 0 for i in ids):
            note = (" Id -1 addresses the embedding output (capture index 0): SGLang 0.5.23 captures it; older releases "
                    "raised TypeError there.")
        where = place_key(place) if place else "no ids (the engine default)"
        explanation = (f"Write {where} = {ids} ({wiring.case}); {name} then feeds "
                       f"{[s.label() for s in wiring.states]}." if place else
                       f"Remove the ids: {name}'s default feeds {[s.label() for s in wiring.states]}.") + note
        if extra:
            explanation += " Also set " + ", ".join(f"{k} = {v}" for k, v in extra.items()) + "."
        explanation += load_note
        return Fix(eng_name, True, explanation, patch, tuple(ids) if ids else None,
                   place_key(place) if place else None, wiring.states)
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
