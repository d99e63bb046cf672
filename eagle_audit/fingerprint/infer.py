"""The search on a loaded target: the wiring the draft agrees with best on a corpus, judged per slot
(:func:`infer_wiring`), from every convention's wiring (:func:`starting_points`), with the later training-time-test
steps where the draft predicts at them (:func:`later_steps`).

Assumptions, named:

* The draft's step-0 prediction is the signal: the fc/decoder-layer reading of the target states. A
  draft trained on state s agrees with its target best when fed s; neighbouring boundaries of a deep
  target can be too alike to separate on a few hundred tokens, and are then reported together.
* The draft-side flags (``norm_before_fc``, ``fc_norm``, ...) are taken as the declared trainer runs them
  (the config as written when no trainer is known); the search does not vary them.
* A slot whose best state does not beat the same state shuffled over the positions of each sequence is
  *undetermined* too (``uninformed``): the draft then uses that slot's statistics, not what it carries about the
  token, and the best state says nothing about training. Seen on a speculators 0.9.0 draft (held-out step-0
  accuracy 0.35): slot 0, trained on B2, came out ``B30+norm or B1`` with B2 excluded (a false
  ``TRAINED_WIRING_DIFFERS``).
* A slot with more than ``MAX_NAMED`` states not separated from its best is *undetermined*: the draft barely
  relies on it on these prompts, and on a short canary's held-out text such a list was seen to miss the true
  state; it admits any state (no ``TRAINED_WIRING_DIFFERS`` because of it) and names none.
* A draft whose vocabulary holds the target's next token at fewer than ``MIN_COVERAGE`` of the
  positions (another tokenizer or target: no search is run), or for which no wiring scored (the starting
  wirings, the best one and every one-slot change of it) agrees with the target's next token on ``MIN_TOP1``
  of the tokens and ``MIN_GAIN`` above the same draft fed no target information, is not trusted to name any
  wiring (``REPRESENTATION_MISMATCH``).

The judgement here is on the search's own text; :mod:`eagle_audit.fingerprint.confirm` judges the pick again on
text that did not choose it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ..conventions import Convention, Wiring, builtin_conventions
from ..draft.fit import check_target_fit
from ..draft.read import DraftSpec
from ..errors import AuditError
from ..states import State
from .corpus import unsearched_neighbours
from .defaults import ttt_steps_for
from .result import MAX_NAMED, Agreement, SlotInference
from .score import Corpus, Scorer, scorer_for, scoring
from .search import LOGPROB_EQUIVALENT, TOP1_EQUIVALENT, joint_interval, judge, search, slot_table, top1_interval
from .verdict import Inference

MIN_COVERAGE = 0.5  # the draft vocabulary must hold the target's next token at this share of positions ...
MIN_TOP1 = 0.2  # ... some scored wiring's top-1 agreement must reach this ...
MIN_GAIN = 0.1  # ... and beat the draft fed no target information by this much


def infer_wiring(target, spec: DraftSpec, corpus: Corpus, starts: Sequence[tuple[str, tuple[State, ...]]], flags,
                 status: Callable[[str], None] | None = None, give_up: bool = True,
                 ttt_steps: int | None = None) -> Inference:
    """Search the wiring the draft (loaded with ``flags``) agrees with best on ``corpus``
    (:func:`prepare_corpus`), starting from ``starts`` ((name, states) pairs). ``give_up``: stop searching
    after a sweep whose best wiring still agrees on fewer than ``MIN_TOP1 / 2`` of the tokens (no answer
    will be given; benchmarks turn it off to time a full search). ``ttt_steps``: training-time-test steps the
    judgement may score per position (:func:`later_steps` says which count; None: the device's default,
    :func:`~eagle_audit.fingerprint.defaults.ttt_steps_for`); the search scores step 0."""
    import time

    from ..runtime.load import load_draft

    say = status or (lambda m: None)
    if not spec.uses_aux:
        raise AuditError(f"{spec.path}: the draft takes no aux states (eagle_config.use_aux_hidden_state: false, no "
                         "fc): there is no wiring in its weights to fingerprint; every engine feeds it the post-norm "
                         "final state (the layers audit checks that)")
    info = target.info
    aux = check_target_fit(spec, info)
    cands = corpus.candidates
    index = {s: j for j, s in enumerate(cands)}
    draft = load_draft(spec, target, flags)  # a block draft: its own forward, the same scoring (score.BlockScorer)
    t2 = time.perf_counter()
    scorer = scorer_for(draft, corpus)  # the search scores step 0; later_steps decides what the judgement reads
    if scorer.coverage < MIN_COVERAGE:
        first = next((st for _, st in starts if len(st) == aux), ())
        return Inference(tuple(first), (), "none", None, None, None, None, scorer.scored, scorer.coverage,
                         Agreement(cands, (), ()), {"wirings_scored": 0},
                         f"the draft vocabulary holds the target's next token at only {scorer.coverage:.1%} of the "
                         f"positions (at least {MIN_COVERAGE:.0%} needed): a draft for another target or tokenizer")
    start_idx = []
    for name, states in starts:
        if len(states) == aux and all(s in index for s in states):
            start_idx.append((name, tuple(index[s] for s in states)))
    if not start_idx:  # nothing fits the checkpoint: evenly spread boundaries
        N = info.num_layers
        start_idx.append(("spread", tuple(index[State(round((k + 1) * N / (aux + 1)))] for k in range(aux))))
    from .weights import combine, read_weights, readable, wiring_of

    weights = None  # no fc, or blocks too narrow for the reading (weights.WIDTH_PER_K): the function alone
    if readable(draft, aux):
        say(f"reading fc's weights: {aux} slot(s) against {len(cands)} states")
        weights = read_weights(draft, corpus, aux)
    say(f"searching {aux} slot(s) x {len(cands)} states from {len(start_idx)} starting wiring(s)")
    trace = search(scorer, start_idx, len(cands), give_up_below_top1=MIN_TOP1 / 2 if give_up else 0.0, progress=say)
    t3 = time.perf_counter()
    base = scorer.baseline()
    top = scorer.score(trace.best)
    steps, _ = ttt_steps_for(str(scorer.dev), ttt_steps)
    evidence, trace, steps_info = later_steps(draft, corpus, scorer, trace, steps, top, base)
    t4 = time.perf_counter()
    judged = judge(evidence, trace, max_named=MAX_NAMED)
    joint = {tuple(cands[j] for j in w): joint_interval(evidence, trace.best, w) for _, w, _ in trace.starts}
    joint[tuple(cands[j] for j in trace.best)] = joint_interval(evidence, trace.best, trace.best)
    joint_top1 = {tuple(cands[j] for j in w): top1_interval(evidence, trace.best, w)
                  for w in [trace.best, *(w for _, w, _ in trace.starts)]}
    t5 = time.perf_counter()
    def beside(j) -> tuple[State, ...]:  # a named slot's unsearched neighbours (an undetermined one admits any)
        if len(j.candidates) > MAX_NAMED or j.uninformed:
            return ()
        return unsearched_neighbours([cands[c] for c in j.candidates], cands, info.num_layers,
                                     last=j.index == len(judged) - 1)

    slots = tuple(SlotInference(j.index, cands[j.best], cands[j.runner_up] if j.runner_up is not None else None,
                                j.logprob_margin, j.top1_margin, tuple(cands[c] for c in j.candidates),
                                j.ambiguous or j.uninformed or bool(ns), len(j.candidates) > MAX_NAMED or j.uninformed,
                                j.separate_tokens, j.name_tokens, j.unused, scorer.scored, j.uninformed, j.use_margin,
                                evidence.steps, unsearched=ns, equivalent=tuple(cands[c] for c in j.equivalent))
                  for j in judged for ns in (beside(j),))
    whole = weights_joint(evidence, trace.best, wiring_of(weights, [cands[j] for j in trace.best]) if weights else (),
                          index)
    slots = combine(slots, weights, bool(whole and whole["admits"]))  # the second line of evidence (fingerprint.weights)
    # "no wiring makes the draft agree" is judged on the wiring that agrees best of all those scored (the starting
    # wirings, the log-prob pick and every one-slot change of it), not on the log-prob pick alone: a barely trained
    # draft's log-prob pick can fall under MIN_TOP1 while its true wiring, also scored, clears both thresholds
    agree = max([top.top1, *(scorer.score(w).top1 for _, w, _ in trace.starts), *(t for row in trace.top1_rows
                                                                                 for t in row)])
    reason = ""
    if agree < MIN_TOP1:
        reason = f"no wiring scored reaches top-1 agreement {MIN_TOP1} (best {agree:.3f})"
    elif agree - base.top1 < MIN_GAIN:
        reason = (f"no wiring scored is {MIN_GAIN} above the draft fed no target information in top-1 agreement "
                  f"(best {agree:.3f}, fed nothing {base.top1:.3f})")
    confidence = "none" if reason else ("ambiguous" if any(s.ambiguous for s in slots) else "high")
    search_info = {"starts": [{"name": n, "states": [cands[j].label() for j in w], "logprob": v}
                              for n, w, v in trace.starts],
                   "weights": weights.to_json() if weights is not None else None, "weights_wiring": whole,
                   "sweeps": trace.sweeps,
                   "wirings_scored": trace.evaluations, "linear_fc": scorer.linear,
                   "units": int(scorer.units.max()) + 1 if scorer.units.numel() else 0,
                   "ttt_steps": steps_info,
                   "interval": ("99% paired cluster-robust t interval, one unit per prompt (its continuation "
                                "included); a state is separated when its log-prob interval clears 0, unless both "
                                f"differences lie within +-{LOGPROB_EQUIVALENT} log-prob and +-{TOP1_EQUIVALENT} "
                                "top-1 (equivalent)"),
                   "seconds": {"search": round(t3 - t2, 2), "later_steps": round(t4 - t3, 2),
                               "judge": round(t5 - t4, 2)}}
    return Inference(tuple(cands[j] for j in trace.best), slots, confidence, top.top1,
                     top.mean_logprob, base.top1, base.mean_logprob, scorer.scored, scorer.coverage,
                     Agreement(cands, trace.rows, trace.top1_rows), search_info, reason, joint, joint_top1)


def weights_joint(scorer: Scorer, best, wiring, index) -> dict | None:
    """The function's judgement of the weights' whole wiring ``wiring`` (:func:`~.weights.wiring_of`; states or
    their labels) against its own ``best`` (candidate indices), on ``scorer``'s text: the paired 99% interval of
    best - weights' wiring, mean log-prob per token, and whether it reaches 0 (``admits``: the function does not
    separate the two). None: no wiring, or the same wiring."""
    if not wiring:
        return None
    by_label = {s.label(): s for s in index}
    w = tuple(by_label.get(s, s) if isinstance(s, str) else s for s in wiring)
    if any(s not in index for s in w) or tuple(index[s] for s in w) == tuple(best):
        return None
    iv = joint_interval(scorer, tuple(best), tuple(index[s] for s in w))
    return {"states": [s.label() for s in w], "interval": [iv.mean, iv.low, iv.high], "admits": iv.low <= 0}


def later_steps(draft, corpus: Corpus, scorer: Scorer, trace, asked: int, top, base):
    """The evidence the judgement reads: step 0 alone, or steps 0..k-1 of the training-time test where the draft
    predicts at every one of them (the best wiring's top-1 at step j at least ``MIN_TOP1`` and ``MIN_GAIN`` above
    the same draft fed no target information, at step j). A draft trained at step 0 only (the test canaries:
    top-1 0.03 at step 1) gives its later steps nothing to say about the wiring: counting them named a wrong state
    (docs/fingerprint.md, "What each piece of evidence adds"). The search itself stays on step 0 (its cost per
    wiring is one forward); only the per-slot table, the shuffle test and the whole-wiring tests are scored again
    on the steps used.
    Returns (the scorer to judge with, the trace with its per-slot table from it, what was used and why)."""
    info = {"asked": asked, "used": 1}
    if not scoring(draft).later_steps:  # a block draft (BlockScorer): its first drafted token only
        return scorer, trace, {**info, "asked": 1}
    if asked <= 1 or top.top1 < MIN_TOP1:
        return scorer, trace, info
    multi = Scorer(draft, corpus, steps=asked, shared=scorer)
    tb, bb = multi.score(trace.best), multi.baseline()
    info["per_step"] = [{"top1": round(tb.top1_at(k), 4), "baseline_top1": round(bb.top1_at(k), 4)}
                        for k in range(asked)]
    used = 1
    while used < asked and tb.top1_at(used) >= MIN_TOP1 and tb.top1_at(used) - bb.top1_at(used) >= MIN_GAIN:
        used += 1
    info["used"] = used
    if used == 1:
        return scorer, trace, info
    evidence = multi if used == asked else Scorer(draft, corpus, steps=used, shared=scorer)
    rows, top1 = slot_table(evidence, trace.best, len(corpus.candidates))
    return evidence, replace(trace, rows=rows, top1_rows=top1), info


def starting_points(spec: DraftSpec, info, declared: Wiring | None, engine: Convention | None
                    ) -> list[tuple[str, tuple[State, ...]]]:
    """Every convention's wiring for this draft and target, the declared one and the engine's (deduplicated)."""
    out: list[tuple[str, tuple[State, ...]]] = []
    if declared is not None:
        out.append(("declared", declared.states))
    convs = list(builtin_conventions("trainer").values()) + list(builtin_conventions("engine").values())
    if engine is not None:
        convs.insert(0, engine)
    for conv in convs:
        try:
            w = conv.resolve(spec.config, info.architecture, info.num_layers)
        except AuditError:
            continue
        out.append((f"{conv.kind} {conv.name}", w.states))
    seen, uniq = set(), []
    for name, states in out:
        if states not in seen:
            seen.add(states)
            uniq.append((name, states))
    return uniq
