"""Compare what a draft was trained on with what an engine feeds it: slots and findings.

Receives only frozen descriptions (draft spec, target info, the :class:`~eagle_audit.resolution.Resolution`)
and optional cosine statistics; it never touches tensors or models, and never asks a convention.

Each finding code is produced by one small check: a function ``(ctx: Context) -> Iterable[Finding]``
registered with :func:`eagle_audit.layers.checks.check` (the registry, :mod:`eagle_audit.layers.checks`).
:func:`diagnose` runs them in registration order. To add a finding, add a code to
:data:`eagle_audit.layers.result.CODES` and a registered check; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from ..conventions import place_key
from ..draft.read import DraftSpec
from ..errors import param
from ..draft.fit import check_target_fit
from ..resolution import BLOCKS, Resolution
from ..states import State, labels
from ..target import TargetInfo
from .checks import CHECKS, Check, Context, Measured, check
from .result import Finding, Fix, Slot

FIX_REF = "see the fix below"


@dataclass(frozen=True)
class SlotStats:
    """Cosine statistics for one slot, from capture (token-mean over the prompts)."""

    cosine: float | None
    nearest: State | None
    nearest_cosine: float | None


def slot_verdict(trained: State | None, served: State | None) -> str:
    if trained == served:
        return "ok"
    if served is None:
        return "missing"
    if trained is None:
        return "extra"
    if trained.normed != served.normed:
        return "norm"
    if trained.boundary == served.boundary:  # another view of a hyper-connection boundary (B3.s0 against B3)
        return "stream"
    if (trained.boundary == 0) != (served.boundary == 0):
        return "embedding"
    return f"offset {served.boundary - trained.boundary:+d}"


def make_slots(res: Resolution, stats: dict[int, SlotStats] | None) -> tuple[Slot, ...]:
    trained, served = res.trained.states, res.served.states
    branch = _not_residual(res)
    slots = []
    for i in range(max(len(trained), len(served))):
        t = trained[i] if i < len(trained) else None
        s = served[i] if i < len(served) else None
        st = (stats or {}).get(i)
        verdict = "not residual" if s is not None and s.boundary in branch else slot_verdict(t, s)
        slots.append(Slot(i, t, s, verdict, st.cosine if st else None,
                          st.nearest if st else None, st.nearest_cosine if st else None))
    return tuple(slots)


def _not_residual(res: Resolution) -> dict[int, str]:
    """Served capture indices that feed something other than the residual stream, unless training fed the
    very same thing there (a trainer convention declaring the same ``feeds``)."""
    trained = dict(res.trained.wiring.not_residual)
    return {k: what for k, what in res.served.wiring.not_residual if trained.get(k) != what}


#: Checks that read only the draft and the target: the only ones that still run when the engine cannot
#: capture for the target at all (ENGINE_UNSUPPORTED).
DRAFT_ONLY: list[Check] = []


def diagnose(draft: DraftSpec, target: TargetInfo, res: Resolution, stats: dict[int, SlotStats] | None = None,
             measured: Measured | None = None, agreement: tuple[float, ...] | None = None
             ) -> tuple[tuple[Slot, ...], tuple[Finding, ...]]:
    """Slots and findings. ``measured``: the wiring ``fingerprint`` measured on the weights; ``agreement``: per
    draft step, how often the draft run the engine's way predicts the same token as run the training way
    (measured by ``layers`` when the two sides' semantics differ)."""
    ctx = Context(draft, target, res, check_target_fit(draft, target), make_slots(res, stats), measured, agreement)
    checks = CHECKS if res.served.wiring.unsupported is None else [engine_unsupported, *DRAFT_ONLY]
    return ctx.slots, tuple(f for c in checks for f in c(ctx))


def with_config_fix(findings: tuple[Finding, ...], fix: Fix | None) -> tuple[Finding, ...]:
    """``findings`` with the proven config change as data (:attr:`Finding.config_fix`) on each that refers to it."""
    if fix is None or not fix.possible:
        return findings
    return tuple(replace(f, config_fix=fix) if f.fix == FIX_REF or "config change below" in f.fix else f
                 for f in findings)


# ---------------------------------------------------------------------------- what the engine can do at all

@check
def engine_unsupported(ctx: Context) -> Iterable[Finding]:
    why = ctx.served.wiring.unsupported
    if why is None:
        return
    conv = ctx.served.convention
    supported = conv.supported(ctx.target.architecture) if conv is not None else ""
    yield Finding(
        "ENGINE_UNSUPPORTED", "error", None,
        f"{ctx.eng} has no {conv.capture_name if conv is not None else 'EAGLE-3'} capture for "
        f"{ctx.target.architecture}: {why}.",
        "The engine cannot feed this draft at all: SGLang refuses to start (ValueError: the model does not implement "
        "set_eagle3_layers_to_capture, attention_backend_setup.py:55-61), or an engine that starts anyway hands the "
        "draft only the final hidden state, whose width may let fc be skipped silently."
        + (f" It captures for: {', '.join(sorted(conv.architectures))}." if conv is not None and conv.architectures
           else ""),
        f"Serve with an engine and architecture that capture: {supported}. See docs/engines.md.")


@check
def engine_crash(ctx: Context) -> Iterable[Finding]:
    w = ctx.served.wiring
    if w.failure is None:
        return
    f = w.failure
    conv = ctx.served.convention
    if conv is not None and f in (r.failure for r in conv.refuses):  # the draft itself, whatever its ids
        what = (f"{ctx.eng} raises {f.error}: {f.message} at config validation, before it loads the target or sets "
                f"any capture layer: it refuses this draft whatever its ids ({f.source}).")
    else:
        ids = f"ids {list(w.ids)}" if w.ids is not None else "its default ids"
        when = ("at start-up, while it sets the capture layers" if f.at == "start-up"
                else "at the first target forward that serves a request")
        what = (f"{ctx.eng} raises {f.error}: {f.message} {when}: with {ids} it is asked to capture indices "
                f"{list(w.capture_indices)} ({f.source}).")
    yield Finding(
        "ENGINE_CRASH", "error", None, what,
        "The server does not come up." if f.at == "start-up" else
        "Speculative decoding fails on every request (the target forward raises before the draft runs).",
        FIX_REF)


@check
def not_residual_stream(ctx: Context) -> Iterable[Finding]:
    branch = _not_residual(ctx.res)
    for sl in ctx.slots:
        if sl.served is None or sl.served.boundary not in branch:
            continue
        t = sl.trained.label() if sl.trained else "nothing"
        yield Finding(
            "NOT_RESIDUAL_STREAM", "error", sl.index,
            f"{ctx.eng} feeds slot {sl.index} from capture index {sl.served.boundary}, which on "
            f"{ctx.target.architecture} is {branch[sl.served.boundary]}; training used {t}.",
            "A branch output is not the residual stream: different scale and content, so the fc block for this slot "
            "multiplies a tensor unlike any it saw in training and acceptance collapses without any error.",
            "No ids fix this under this engine: only index 0 (the embedding) is the residual stream there. Serve "
            "with an engine that captures the residual stream for this architecture, or train on what it feeds.")


# ---------------------------------------------------------------------------- where the ids come from

@check
def ids_not_read(ctx: Context) -> Iterable[Finding]:
    served, trained = ctx.served, ctx.trained
    if not (served.wiring.ignored_places and served.wiring.ids_source == "default"):
        return
    places = ", ".join(place_key(p) for p in served.wiring.ignored_places)
    differs = list(served.states) != list(trained.states)
    yield Finding(
        "IDS_NOT_READ", "error" if differs else "warning", None,
        f"The draft declares ids in {places}, which {ctx.eng} does not read (it reads: "
        f"{', '.join(place_key(p) for p in served.id_places) or 'nothing'}); it falls back to its default "
        f"{served.wiring.case.split('default ', 1)[-1]} = {labels(served.states)}.",
        "The engine never sees the ids the draft was trained with; every slot that differs from the default "
        "feeds the draft a state it never saw." if differs else
        "The default happens to equal the trained states, so nothing is lost now; any change of ids would be ignored.",
        FIX_REF)


@check
def unreachable_layer(ctx: Context) -> Iterable[Finding]:
    served = ctx.served
    if served.wiring.failure is not None:
        return  # ENGINE_CRASH says what the engine does instead of dropping them
    for k in served.dropped:
        slot = served.wiring.capture_indices.index(k)
        lo, hi = served.reach
        yield Finding(
            "UNREACHABLE_LAYER", "error", slot,
            f"Id {served.wiring.ids[slot] if served.wiring.ids else '?'} becomes capture index {k}, which {ctx.eng}'s "
            f"capture loop never reaches (it captures {lo}..{hi}); the state is silently dropped.",
            f"The engine returns {len(served.states)} states instead of {len(served.wiring.capture_indices)}: fc gets "
            "the wrong width (a shape error) or, where the count is padded elsewhere, the wrong states.", FIX_REF)


# ---------------------------------------------------------------------------- counts

@check
def aux_count_mismatch(ctx: Context) -> Iterable[Finding]:
    trained, served, aux = ctx.trained, ctx.served, ctx.aux
    if len(trained.states) != aux:
        yield Finding(
            "AUX_COUNT_MISMATCH", "error", None,
            f"The trained wiring ({trained.wiring.convention}) has {len(trained.states)} states, but fc.weight takes "
            f"{aux} x {ctx.target.hidden_size}.",
            "The trainer assumption does not fit the checkpoint; the slot comparison below is unreliable.",
            f"Name the trained states with {param('trained_boundaries')}, or pick the right {param('trainer')}.")
    if served.aux_count is not None and served.aux_count != aux:
        yield Finding(
            "AUX_COUNT_MISMATCH", "error", None,
            f"{ctx.eng} sizes the draft's fc for {served.aux_count} aux states (from "
            f"{', '.join(map(str, served.aux_count_from))}), but fc.weight holds {aux}.",
            "The checkpoint fails to load, or loads into a wrongly shaped fc.",
            FIX_REF)  # where the count goes depends on the layout and the engine's loader: the fix finds it
    if len(served.states) != aux and not served.dropped and served.wiring.failure is None:
        yield Finding(
            "AUX_COUNT_MISMATCH", "error", None,
            f"{ctx.eng} feeds {len(served.states)} states {labels(served.states)}, but fc takes {aux}.",
            "The concatenated width does not match fc: a shape error at the first draft forward.", FIX_REF)


# ---------------------------------------------------------------------------- per slot

def _same_set_reordered(ctx: Context) -> bool:
    t, s = list(ctx.trained.states), list(ctx.served.states)
    return sorted(t) == sorted(s) and t != s


@check
def order_mismatch(ctx: Context) -> Iterable[Finding]:
    if _same_set_reordered(ctx):
        yield Finding(
            "ORDER_MISMATCH", "error", None,
            f"Trained on {labels(ctx.trained.states)} in that order; {ctx.eng} concatenates "
            f"{labels(ctx.served.states)}.",
            "The right states arrive in the wrong fc column blocks: each block of fc multiplies a state it was not "
            "trained on.", FIX_REF)


@check
def slot_mismatches(ctx: Context) -> Iterable[Finding]:
    """NORM_MISMATCH (state), EMBEDDING_COMPOSITION and LAYER_OFFSET, slot by slot; an order mismatch
    replaces them."""
    if _same_set_reordered(ctx):
        return
    trained, served, n = ctx.trained.states, ctx.served.states, ctx.n
    shifted = (len(trained) > 1 and trained[0].boundary == 0 and list(trained[1:]) == list(served[: len(trained) - 1]))
    for sl in ctx.slots:
        if sl.verdict in ("ok", "missing", "extra", "not residual"):  # the last: NOT_RESIDUAL_STREAM
            continue
        cos = f" (cosine {sl.cosine:.3f})" if sl.cosine is not None else ""
        t, s = sl.trained, sl.served
        if sl.verdict == "norm":
            yield Finding(
                "NORM_MISMATCH", "error", sl.index,
                f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} ({s.describe(n)}){cos}.",
                "A normed and an un-normed residual stream differ in scale by orders of magnitude; fc was fitted "
                "to one of them.", FIX_REF)
        elif sl.verdict == "embedding":
            extra = (" The served states are the trained ones shifted by one slot: training put the embedding in "
                     "slot 0." if shifted and sl.index == 0 else "")
            yield Finding(
                "EMBEDDING_COMPOSITION", "error", sl.index,
                f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} ({s.describe(n)}){cos}." + extra,
                "The token embedding and a layer output live in different spaces; the fc block for this slot "
                "multiplies a state unlike any it saw in training.", FIX_REF)
        elif sl.verdict == "stream":
            yield Finding(
                "STREAM_MISMATCH", "error", sl.index,
                f"Trained on {t.label()} ({t.describe(n, ctx.target.streams)}), served {s.label()} "
                f"({s.describe(n, ctx.target.streams)}): the same boundary, another view of its hyper-connection "
                f"streams{cos}.",
                "One stream, the streams' mean and the layer's mixed input are different vectors; fc was fitted to "
                "one of them (accept-rate measures what the other costs).", FIX_REF)
        else:
            d = s.boundary - t.boundary
            yield Finding(
                "LAYER_OFFSET", "error", sl.index,
                f"Trained on {t.label()} ({t.describe(n)}), served {s.label()} ({s.describe(n)}): {abs(d)} "
                f"layer{'s' if abs(d) != 1 else ''} {'deeper' if d > 0 else 'shallower'}{cos}.",
                "Adjacent layers are similar but not equal; the draft's predictions drift and acceptance drops "
                "without any error.", FIX_REF)


# ---------------------------------------------------------------------------- draft-side semantics

def _flag_text(draft: DraftSpec, flag: str) -> str:
    value = draft.flags.get(flag)
    return f"{flag} = {str(value).lower()}" if value is not None else f"{flag} absent"


@check
def draft_semantics_mismatch(ctx: Context) -> Iterable[Finding]:
    """NORM_MISMATCH for every block of the draft forward the two sides run differently with this
    draft's flags (each side's own semantics, declared in its convention)."""
    trained, served = ctx.trained, ctx.served
    for block in BLOCKS:
        want, got = getattr(trained.flags, block.attr), getattr(served.flags, block.attr)
        if want == got:
            continue
        honoured = block.flag in served.implements
        setting = served.setting_for(block, trained.flags, ctx.draft.config)
        if block.flag != "norm_output":  # one meaning on every side
            what = (f"Draft flag {block.flag}: training used {want}, {ctx.eng} uses {got}"
                    + ("" if honoured else " (it does not implement this flag)") + f". It differs in {block.where}: "
                    f"training {block.on if want else block.off}; {ctx.eng} {block.on if got else block.off}.")
        else:
            what = (f"Draft flag {block.flag} ({_flag_text(ctx.draft, block.flag)}) means different things on the two "
                    f"sides. It differs in {block.where}: training {block.on if want else block.off}; {ctx.eng} "
                    f"{block.on if got else block.off}.")
        if setting is not None:
            fix = f"Set {block.flag} = {str(setting).lower()} in config.json."
        elif honoured or block.flag == "norm_output":
            fix = (f"No value of {block.flag} makes {ctx.eng} run this block as training did: retrain with the "
                   "engine's semantics, or serve with an engine that runs it as the trainer does.")
        else:
            fix = (f"Serve with an engine that implements {block.flag}, or retrain with {block.flag} = "
                   f"{str(got).lower()}.")
        yield Finding(
            "NORM_MISMATCH", "error", None, what + ctx.semantic_cost(),
            "A norm applied (or skipped) inside the draft on one side only changes the scale of what fc, the "
            "decoder layer or lm_head reads; the draft's predictions drift from that point on.", fix)


@check
def fc_skipped(ctx: Context) -> Iterable[Finding]:
    d, aux, hidden = ctx.draft, ctx.aux, ctx.target.hidden_size
    skips = ctx.served.flags.fc_skip_at_hidden_width and not ctx.trained.flags.fc_skip_at_hidden_width
    if skips and d.use_aux_hidden_state and aux * hidden == d.hidden_size:
        yield Finding(
            "FC_SKIPPED", "error", None,
            f"{aux} aux state(s) x {hidden} = {d.hidden_size}, the draft hidden size: {ctx.eng} runs fc only "
            "when the incoming width differs from the draft hidden size, so fc is never applied." + ctx.semantic_cost(),
            "Training applied fc; serving feeds the raw target state into the decoder layer unprojected, so the "
            "trained fc weights are unused (`eagle-audit accept-rate` measures what it costs: its trained accept "
            "length runs fc, its served one does not).",
            "Train with a different aux count, or give the draft a hidden size different from n_aux x target hidden.")


@check
def hidden_size_mismatch(ctx: Context) -> Iterable[Finding]:
    d, hidden = ctx.draft, ctx.target.hidden_size
    if d.target_hidden_size is None and d.hidden_size != hidden:
        yield Finding(
            "HIDDEN_SIZE_MISMATCH", "error", None,
            f"The draft config has no target_hidden_size and its hidden_size is {d.hidden_size}, but the target's is "
            f"{hidden}: engines size fc as n_aux x hidden_size = {ctx.aux * d.hidden_size} instead of {d.fc_in}.",
            "fc fails to load, or the engine sizes buffers for the wrong width (sglang PR #4716).",
            f"Set target_hidden_size = {hidden} in config.json.")


# ---------------------------------------------------------------------------- vocabulary map

@check
def vocab_map_missing(ctx: Context) -> Iterable[Finding]:
    v, tv = ctx.draft.vocab, ctx.target.vocab_size
    if not ctx.draft.has_weights:  # d2t is a tensor: a config-only audit says so in its notes
        return
    if v.draft_vocab_size and tv and v.draft_vocab_size < tv and not v.has_d2t:
        yield Finding(
            "VOCAB_MAP_MISSING", "error", None,
            f"draft_vocab_size is {v.draft_vocab_size} < the target's {tv}, and the checkpoint has no d2t.",
            "Without d2t, draft id i is read as target id i: every draft token outside the first "
            f"{v.draft_vocab_size} target ids is wrong, and acceptance collapses (NeMo Automodel PR #2447).",
            "Export d2t (offsets: target = i + d2t[i]) and t2d from the training vocab mapping.")


@check
def vocab_map_invalid(ctx: Context) -> Iterable[Finding]:
    v, tv = ctx.draft.vocab, ctx.target.vocab_size
    if not v.has_d2t:
        return
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
        yield Finding(
            "VOCAB_MAP_INVALID", "error", None, "The vocabulary map is inconsistent: " + "; ".join(problems) + ".",
            "Engines apply target = i + d2t[i]; a wrong map turns correct draft predictions into wrong target tokens.",
            "Regenerate d2t/t2d from the training vocab mapping (d2t[i] = used[i] - i).")


DRAFT_ONLY.extend([hidden_size_mismatch, vocab_map_missing, vocab_map_invalid])


# ---------------------------------------------------------------------------- the weights (fingerprint)

@check
def representation_mismatch(ctx: Context) -> Iterable[Finding]:
    m = ctx.measured
    if m is None or m.candidates is not None:
        return
    yield Finding(
        "REPRESENTATION_MISMATCH", "error", None,
        f"No wiring makes this draft agree with {ctx.target.name}: {m.reason}. {m.evidence}",
        "The draft reads a residual stream unlike the one it was trained on: it was trained for another target (or "
        "has untrained weights), or this target's states differ from training (rotated or quantized weights, another "
        "tokenizer). No wiring can be read off the weights; the findings below assume the declared wiring.",
        "Audit the draft against the exact target checkpoint (weights, tokenizer, precision) it was trained with.")


@check
def trained_wiring_differs(ctx: Context) -> Iterable[Finding]:
    m = ctx.measured
    if m is None or m.candidates is None:
        return
    if (not m.differs) if m.differs is not None else m.agrees(m.declared.states):
        return
    measured = "[" + ", ".join(" or ".join(s.label() for s in c) if len(c) <= 3 else "undetermined"
                               for c in m.candidates) + "]"
    yield Finding(
        "TRAINED_WIRING_DIFFERS", "error", None,
        f"The weights were trained on {measured} (fingerprint), but {m.declared.convention} "
        f"({m.declared.ids_source}) declares {labels(m.declared.states)}." + (f" {m.confirmed}" if m.confirmed else ""),
        "Everything configured from the declared wiring (the engine's ids, an audit's trained side) feeds the draft "
        "states it was not trained on.",
        f"Declare the measured wiring ({m.hint}) and apply the config change below." if m.hint else FIX_REF)


DRAFT_ONLY.extend([representation_mismatch, trained_wiring_differs])  # they read the draft's weights alone


# ---------------------------------------------------------------------------- the draft class and the trainer

@check
def draft_class_unsupported(ctx: Context) -> Iterable[Finding]:
    conv = ctx.served.convention
    if conv is None or not (conv.base or conv).draft_classes or conv.draft_class is not None:
        return
    yield Finding(
        "DRAFT_CLASS_UNSUPPORTED", "error", None, f"{conv.draft_class_how}.",
        "The engine fails to load the draft at start-up: there is no draft model to run.",
        "Give the config an architecture (or speculators model_type) one of the engine's draft classes loads; "
        "see docs/conventions.md, draft classes.")


@check
def trainer_refuses_ids(ctx: Context) -> Iterable[Finding]:
    w = ctx.trained.wiring
    if w.failure is None or w.kind != "trainer":
        return
    f = w.failure
    # capture index 0 is the embedding output, whether the trainer's capture reaches it or drops it
    embedding = any(s.boundary == 0 and not s.normed for s in w.states) or 0 in w.dropped
    yield Finding(
        "TRAINER_REFUSES_IDS", "warning", None,
        f"{ctx.trained.title} refuses ids {list(w.ids) if w.ids is not None else '(default)'}: {f.error}: {f.message} "
        f"({f.source})." + (" The config claims a state this trainer never trains on: the embedding output." if embedding
                            else ""),
        "No draft of this trainer has these ids, so the trained wiring assumed from them is not how the draft was "
        "trained: the slot comparison rests on an assumption the trainer itself rules out.",
        f"Name the trainer that did train it ({param('trainer')}), or the trained states "
        f"({param('trained_boundaries')}), or measure them with `eagle-audit fingerprint`.")


# Last, so that the DFlash / DSpark findings come after all of the above (registration order is report order);
# diagnose_block imports .checks and .result, never this module, so this is no cycle.
from . import assumed as _assumed_checks  # noqa: E402,F401
from . import config_keys as _config_key_checks  # noqa: E402,F401
from . import diagnose_block as _block_checks  # noqa: E402,F401
