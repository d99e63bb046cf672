"""Compare what a draft was trained on with what an engine feeds it: slots and findings.

Receives only frozen descriptions (draft spec, target info, two wirings, conventions) and optional
cosine statistics; it never touches tensors or models.
"""

from __future__ import annotations

from dataclasses import dataclass

from .conventions import DRAFT_FLAGS, Convention, Wiring, place_key
from .draft import DraftSpec
from .errors import BadCheckpoint
from .result import Finding, Slot
from .states import State
from .target import TargetInfo


@dataclass(frozen=True)
class SlotStats:
    """Cosine statistics for one slot, from capture (token-mean over the prompts)."""

    cosine: float | None
    nearest: State | None
    nearest_cosine: float | None


def _labels(states) -> str:
    return "[" + ", ".join(s.label() for s in states) + "]"


def slot_verdict(trained: State | None, served: State | None) -> str:
    if trained == served:
        return "ok"
    if served is None:
        return "missing"
    if trained is None:
        return "extra"
    if trained.normed != served.normed:
        return "norm"
    if (trained.boundary == 0) != (served.boundary == 0):
        return "embedding"
    return f"offset {served.boundary - trained.boundary:+d}"


def check_target_fit(draft: DraftSpec, target: TargetInfo) -> int:
    """The draft's aux count for this target; bad input if its fc cannot take this target's states."""
    aux = draft.aux_count(target.hidden_size)
    if aux is None or (draft.target_hidden_size and draft.target_hidden_size != target.hidden_size
                       and draft.fc_in % draft.target_hidden_size == 0):
        built_for = draft.target_hidden_size or "another"
        raise BadCheckpoint(
            f"{draft.path}: draft was built for a target of hidden size {built_for} (fc.weight takes {draft.fc_in} "
            f"inputs), but {target.name} has hidden size {target.hidden_size}")
    if target.vocab_size and draft.vocab_size and draft.vocab_size != target.vocab_size:
        raise BadCheckpoint(f"{draft.path}: draft vocab_size {draft.vocab_size} differs from the target's "
                            f"{target.vocab_size}: a draft for another target")
    return aux


def diagnose(draft: DraftSpec, target: TargetInfo, trained: Wiring, served: Wiring, engine: Convention,
             trainer: Convention | None, stats: dict[int, SlotStats] | None = None
             ) -> tuple[tuple[Slot, ...], tuple[Finding, ...]]:
    aux = check_target_fit(draft, target)
    n = target.num_layers
    eng = f"{engine.title} {engine.version}"
    findings: list[Finding] = []
    add = lambda *a: findings.append(Finding(*a))  # noqa: E731
    fix_ref = "see the fix below"

    # -- slots
    slots = []
    width = max(len(trained.states), len(served.states))
    for i in range(width):
        t = trained.states[i] if i < len(trained.states) else None
        s = served.states[i] if i < len(served.states) else None
        st = (stats or {}).get(i)
        slots.append(Slot(i, t, s, slot_verdict(t, s), st.cosine if st else None,
                          st.nearest if st else None, st.nearest_cosine if st else None))
    same_set = sorted(trained.states) == sorted(served.states)

    # -- where the ids come from
    if served.ignored_places and served.ids_source == "default":
        places = ", ".join(place_key(p) for p in served.ignored_places)
        differs = list(served.states) != list(trained.states)
        add("IDS_NOT_READ", "error" if differs else "warning", None,
            f"The draft declares ids in {places}, which {eng} does not read (it reads: "
            f"{', '.join(place_key(p) for p in engine.ids_from) or 'nothing'}); it falls back to its default "
            f"{served.case.split('default ', 1)[-1]} = {_labels(served.states)}.",
            "The engine never sees the ids the draft was trained with; every slot that differs from the default "
            "feeds the draft a state it never saw." if differs else
            "The default happens to equal the trained states, so nothing is lost now; any change of ids would be ignored.",
            fix_ref)

    for k in served.dropped:
        slot = served.capture_indices.index(k)
        lo_hi = engine.rule_for(target.architecture).reachable(n)
        add("UNREACHABLE_LAYER", "error", slot,
            f"Id {served.ids[slot] if served.ids else '?'} becomes capture index {k}, which {eng}'s capture "
            f"loop never reaches (it captures {lo_hi[0]}..{lo_hi[1]}); the state is silently dropped.",
            f"The engine returns {len(served.states)} states instead of {len(served.capture_indices)}: fc gets the wrong "
            "width (a shape error) or, where the count is padded elsewhere, the wrong states.", fix_ref)

    # -- counts
    if len(trained.states) != aux:
        add("AUX_COUNT_MISMATCH", "error", None,
            f"The trained wiring ({trained.convention}) has {len(trained.states)} states, but fc.weight takes "
            f"{aux} x {target.hidden_size}.",
            "The trainer assumption does not fit the checkpoint; the slot comparison below is unreliable.",
            "Name the trained states with --trained-boundaries, or pick the right --trainer.")
    engine_fc = engine.aux_count(draft.config)
    if engine_fc != aux:
        add("AUX_COUNT_MISMATCH", "error", None,
            f"{eng} sizes the draft's fc for {engine_fc} aux states (from {', '.join(map(str, engine.aux_count_from))}), "
            f"but fc.weight holds {aux}.",
            "The checkpoint fails to load, or loads into a wrongly shaped fc.",
            f"Set num_aux_hidden_states = {aux} in config.json.")
    if len(served.states) != aux and not served.dropped:
        add("AUX_COUNT_MISMATCH", "error", None,
            f"{eng} feeds {len(served.states)} states {_labels(served.states)}, but fc takes {aux}.",
            "The concatenated width does not match fc: a shape error at the first draft forward.", fix_ref)

    # -- per slot
    if same_set and list(trained.states) != list(served.states):
        add("ORDER_MISMATCH", "error", None,
            f"Trained on {_labels(trained.states)} in that order; {eng} concatenates {_labels(served.states)}.",
            "The right states arrive in the wrong fc column blocks: each block of fc multiplies a state it was not "
            "trained on.", fix_ref)
    else:
        shifted = (len(trained.states) > 1 and trained.states[0].boundary == 0
                   and list(trained.states[1:]) == list(served.states[: len(trained.states) - 1]))
        for sl in slots:
            if sl.verdict in ("ok", "missing", "extra"):
                continue
            cos = f" (cosine {sl.cosine:.3f})" if sl.cosine is not None else ""
            t, s = sl.trained, sl.served
            if sl.verdict == "norm":
                add("NORM_MISMATCH", "error", sl.index,
                    f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} ({s.describe(n)}){cos}.",
                    "A normed and an un-normed residual stream differ in scale by orders of magnitude; fc was fitted "
                    "to one of them.", fix_ref)
            elif sl.verdict == "embedding":
                extra = (" The served states are the trained ones shifted by one slot: training put the embedding in "
                         "slot 0." if shifted and sl.index == 0 else "")
                add("EMBEDDING_COMPOSITION", "error", sl.index,
                    f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} ({s.describe(n)}){cos}."
                    + extra,
                    "The token embedding and a layer output live in different spaces; the fc block for this slot "
                    "multiplies a state unlike any it saw in training.", fix_ref)
            else:
                d = s.boundary - t.boundary
                add("LAYER_OFFSET", "error", sl.index,
                    f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} "
                    f"({s.describe(n)}): {abs(d)} layer{'s' if abs(d) != 1 else ''} {'deeper' if d > 0 else 'shallower'}{cos}.",
                    "Adjacent layers are similar but not equal; the draft's predictions drift and acceptance drops "
                    "without any error.", fix_ref)

    # -- draft-side semantics
    for flag in DRAFT_FLAGS:
        want = trainer.flag(flag, draft.config) if trainer else bool(draft.flags.get(flag))
        got = engine.flag(flag, draft.config)
        if bool(want) != bool(got):
            rule = engine.draft_flags.get(flag)
            honoured = rule is not None and rule.honoured
            add("NORM_MISMATCH", "error", None,
                f"Draft flag {flag}: training used {bool(want)}, {eng} uses {bool(got)}"
                + ("" if honoured else " (it does not implement this flag)") + ".",
                "A norm applied (or skipped) inside the draft on one side only changes the scale of what fc or the "
                "decoder layer reads.",
                f"Set {flag} = {str(bool(want)).lower()} in config.json." if honoured else
                f"Serve with an engine that implements {flag}, or retrain with {flag} = {str(bool(got)).lower()}.")
    if engine.fc_skip_when_width_equals_hidden and draft.use_aux_hidden_state and aux * target.hidden_size == draft.hidden_size:
        add("FC_SKIPPED", "error", None,
            f"{aux} aux state(s) x {target.hidden_size} = {draft.hidden_size}, the draft hidden size: {eng} runs fc only "
            "when the incoming width differs from the draft hidden size, so fc is never applied.",
            "The trained fc weights are unused: the raw target state enters the decoder layer unprojected.",
            "Train with a different aux count, or give the draft a hidden size different from n_aux x target hidden.")
    if draft.target_hidden_size is None and draft.hidden_size != target.hidden_size:
        add("HIDDEN_SIZE_MISMATCH", "error", None,
            f"The draft config has no target_hidden_size and its hidden_size is {draft.hidden_size}, but the target's is "
            f"{target.hidden_size}: engines size fc as n_aux x hidden_size = {aux * draft.hidden_size} instead of "
            f"{draft.fc_in}.", "fc fails to load, or the engine sizes buffers for the wrong width (sglang PR #4716).",
            f"Set target_hidden_size = {target.hidden_size} in config.json.")

    # -- vocabulary map
    v = draft.vocab
    tv = target.vocab_size
    if v.draft_vocab_size and tv and v.draft_vocab_size < tv and not v.has_d2t:
        add("VOCAB_MAP_MISSING", "error", None,
            f"draft_vocab_size is {v.draft_vocab_size} < the target's {tv}, and the checkpoint has no d2t.",
            "Without d2t, draft id i is read as target id i: every draft token outside the first "
            f"{v.draft_vocab_size} target ids is wrong, and acceptance collapses (NeMo Automodel PR #2447).",
            "Export d2t (offsets: target = i + d2t[i]) and t2d from the training vocab mapping.")
    if v.has_d2t:
        problems = []
        if v.draft_vocab_size and v.d2t_len != v.draft_vocab_size:
            problems.append(f"d2t has {v.d2t_len} entries, draft_vocab_size is {v.draft_vocab_size}")
        if tv and (v.max_target_id >= tv or v.min_target_id < 0):
            problems.append(f"i + d2t[i] spans {v.min_target_id}..{v.max_target_id}, outside the target vocab 0..{tv - 1} "
                            "(absolute ids stored where offsets are expected?)")
        if v.has_t2d and tv and v.t2d_len != tv:
            problems.append(f"t2d has {v.t2d_len} entries, the target vocab {tv}")
        if v.has_t2d and v.d2t_len and v.t2d_count != v.d2t_len:
            problems.append(f"t2d marks {v.t2d_count} ids, d2t maps {v.d2t_len}")
        if v.d2t_in_t2d is False:
            problems.append("some i + d2t[i] are not marked in t2d")
        if problems:
            add("VOCAB_MAP_INVALID", "error", None, "The vocabulary map is inconsistent: " + "; ".join(problems) + ".",
                "Engines apply target = i + d2t[i]; a wrong map turns correct draft predictions into wrong target tokens.",
                "Regenerate d2t/t2d from the training vocab mapping (d2t[i] = used[i] - i).")
    return tuple(slots), tuple(findings)
