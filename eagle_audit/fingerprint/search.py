"""Search the wiring that the draft agrees with its target best under, and judge how sure that is.

Search (:func:`search`): score every starting wiring (each convention's, the declared one, the
engine's); from the best, improve one slot at a time over every state (Gauss-Seidel: the slot takes the
best state with the others held), then try every permutation of the resulting set; repeat until no single
change improves the objective, the mean log-probability of the target's next token. The last sweep, in
which nothing changed, is the per-slot table: slot i against every state, the other slots at the answer.

Judgement (:func:`judge`): per slot, the paired difference between the best state and the runner-up,
token by token, with a 99% cluster-robust interval whose units are the prompts (log-probability and top-1;
:func:`~eagle_audit.fingerprint.intervals.paired_interval`). A state is separated from the best when its
log-probability interval against the best clears 0, unless it is next to the best on the residual stream (one boundary apart, or BN and BN+norm: ``states.adjacent``) and
the two are *equivalent*: both differences lie, at the same level, within a tolerance that is immaterial to
drafting (``LOGPROB_EQUIVALENT`` 0.02 mean log-prob per token, ``TOP1_EQUIVALENT`` one point of top-1
agreement); then it is named with the best. Every state not separated is named with the best ("B15 or B16");
such a slot is ambiguous. Why the equivalence: adjacent residual-stream states are nearly
interchangeable to a draft, and on a speculators 0.9.0 draft trained on B15 (H200, held-out step-0 0.463) B16
scored a higher mean log-prob on 4,653 held-out tokens x 3 steps (+0.0076 [+0.0024, +0.0128]: an honest
interval, the difference is real, so more text would not remove it) with top-1 within [-0.002, +0.007] of
it; significance alone named B16 and raised a false LAYER_OFFSET and TRAINED_WIRING_DIFFERS. The same
statistics on a canary evaluated on its own training text (tests/fingerprint: emb-3-16, slot 1, B4 against the
true B3: +0.0065 [+0.0026, +0.0103], top-1 [-0.005, +0.010]) fell the right way: at this size no statistic tells
the two apart, so both are named. Assumption (stated): a neighbour within both tolerances is never called wrong;
the price is that an off-by-one costing the draft less than that is not reported. Only neighbours: states
farther away differ by more than one layer's update, and the evidence of this failure is about neighbours.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from ..states import adjacent
from .intervals import Interval, paired_interval, tokens_to_separate
from .score import Score, Scorer

Wiring = tuple[int, ...]  # indices into the candidate states, in slot order


@dataclass(frozen=True)
class SearchTrace:
    best: Wiring
    starts: tuple[tuple[str, Wiring, float], ...]  # (name, wiring, objective)
    rows: tuple[tuple[float, ...], ...]  # [slot][candidate]: mean log-prob, the other slots at ``best``
    top1_rows: tuple[tuple[float, ...], ...]  # [slot][candidate]: top-1 agreement
    sweeps: int
    evaluations: int


def _objective(s: Score) -> float:
    return s.mean_logprob


def search(scorer: Scorer, starts: Sequence[tuple[str, Wiring]], num_candidates: int, max_sweeps: int = 6,
           max_permutations: int = 720, give_up_below_top1: float = 0.0,
           progress: Callable[[str], None] | None = None) -> SearchTrace:
    """``give_up_below_top1``: stop after a sweep whose best wiring still agrees on fewer tokens than this
    (no wiring will be trusted; the last sweep's table is still complete)."""
    say = progress or (lambda m: None)
    scored = [(name, tuple(w), _objective(scorer.score(w))) for name, w in starts]
    best = max(scored, key=lambda t: t[2])[1]
    cur = _objective(scorer.score(best))
    n = len(best)
    sweeps = 0
    while True:
        sweeps += 1
        changed = False
        for i in range(n):
            for j in range(num_candidates):
                w = best[:i] + (j,) + best[i + 1:]
                v = _objective(scorer.score(w))
                if v > cur + 1e-9:
                    best, cur, changed = w, v, True
        perms = itertools.islice(itertools.permutations(best), max_permutations) if n > 1 else ()
        for p in perms:
            v = _objective(scorer.score(p))
            if v > cur + 1e-9:
                best, cur, changed = tuple(p), v, True
        say(f"sweep {sweeps}: {scorer.evaluations} wirings scored, objective {cur:.4f}")
        if not changed or sweeps >= max_sweeps or scorer.score(best).top1 < give_up_below_top1:
            break
    rows, top1 = slot_table(scorer, best, num_candidates)
    return SearchTrace(best, tuple(scored), rows, top1, sweeps, scorer.evaluations)


def slot_table(scorer: Scorer, best: Wiring, num_candidates: int,
               states: Mapping[int, Collection[int]] | None = None
               ) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]:
    """[slot][candidate] mean log-prob and top-1 agreement, each slot given every state, the others at ``best``.
    ``states``: per slot, only these states (the others' entries are -inf, which :func:`judge` skips); a slot not
    in it gets an empty row."""
    rows, top1 = [], []
    for i in range(len(best)):
        if states is not None and i not in states:
            rows.append(())
            top1.append(())
            continue
        want = set(states[i]) | {best[i]} if states is not None else None
        sc = [scorer.score(best[:i] + (j,) + best[i + 1:]) if want is None or j in want else None
              for j in range(num_candidates)]
        rows.append(tuple(_objective(s) if s is not None else -math.inf for s in sc))
        top1.append(tuple(s.top1 if s is not None else -math.inf for s in sc))
    return tuple(rows), tuple(top1)


@dataclass(frozen=True)
class SlotJudgement:
    index: int
    best: int
    runner_up: int | None
    logprob_margin: Interval | None  # best - runner-up, mean log-prob per token
    top1_margin: Interval | None  # best - runner-up, top-1 agreement
    candidates: tuple[int, ...]  # the best and every state not separated from it, best first
    ambiguous: bool
    separate_tokens: int | None = None  # scored tokens at which the runner-up would be separated (None: not in reach)
    name_tokens: int | None = None  # ... at which at most ``max_named`` states would remain (None: not in reach)
    unused: bool = False  # even the worst state is not separated from the best: the draft does not use the slot here
    uninformed: bool = False  # the best state is not separated from itself shuffled over positions: the draft does
    # not use what the slot carries, only its statistics (a state it was not trained on can then score best)
    use_margin: Interval | None = None  # best - best shuffled over positions
    equivalent: tuple[int, ...] = ()  # below the best on log-prob but within the tolerances (equivalent): named with it


TOP1_EQUIVALENT = 0.01  # top-1 agreement, best - state: within this (99% interval) is immaterial to acceptance
LOGPROB_EQUIVALENT = 0.02  # mean log-prob per token, best - state: within this (99%) the token's probability moves
# by under 2%


def equivalent(logprob: Interval, top1: Interval | None) -> bool:
    """The draft cannot practically tell the two apart: both differences (best - a state) lie, at the intervals'
    level, within +-``LOGPROB_EQUIVALENT`` mean log-prob and +-``TOP1_EQUIVALENT`` top-1 agreement."""
    return (top1 is not None and -LOGPROB_EQUIVALENT < logprob.low and logprob.high < LOGPROB_EQUIVALENT
            and -TOP1_EQUIVALENT < top1.low and top1.high < TOP1_EQUIVALENT)


def separated(logprob: Interval, top1: Interval | None) -> bool:
    """A state (or a whole wiring) is below the best: its mean log-prob interval against the best clears 0, and
    the two are not :func:`equivalent` (module doc)."""
    return logprob.low > 0 and not equivalent(logprob, top1)


def judge(scorer: Scorer, trace: SearchTrace, level: float = 0.99, max_named: int = 3) -> tuple[SlotJudgement, ...]:
    """Per slot: runner-up, paired cluster-robust margins (at ``level``, :func:`paired_interval`), and the
    states not separated from the best: those whose log-prob interval against it reaches 0, and the best's
    neighbours :func:`equivalent` to it (``SlotJudgement.equivalent``). Log-prob, the search objective, decides
    otherwise; the top-1 margin is evidence beside it (a thresholded, noisier view of the same predictions). With each slot: the tokens at which its runner-up, and its ``max_named + 1``-th
    state, would be separated, and whether the draft uses it at all on this text. A slot whose row is empty is
    not judged, and states scored -inf in a row are left out (:func:`slot_table` ``states``: the confirmation's
    re-judgement of the named slots)."""
    best = trace.best
    cands = scorer.corpus.candidates
    top = scorer.score(best)
    units = scorer.units
    G = int(units.max()) + 1 if units.numel() else 0
    m = scorer.scored if top.logprob.numel() else 0  # text positions (how sure is said in text tokens)
    out = []
    for i, row in enumerate(trace.rows):
        if not row:
            continue
        order = sorted((j for j in range(len(row)) if row[j] > -math.inf), key=lambda j: -row[j])
        runner = next((j for j in order if j != best[i]), None)
        if runner is None or m == 0:
            out.append(SlotJudgement(i, best[i], runner, None, None, (best[i],), False))
            continue
        scores = {j: scorer.score(best[:i] + (j,) + best[i + 1:]) for j in order if j != best[i]}
        ivs = {j: paired_interval(top.logprob, sc.logprob, units, level) for j, sc in scores.items()}
        lp = ivs[runner]
        hits = {j: paired_interval(top.hit, sc.hit, units, level) for j, sc in scores.items()}
        t1 = hits[runner]
        near = {j for j in order if adjacent(cands[j], cands[best[i]])}  # equivalence: the best's neighbours only
        same = tuple(j for j in order if j in near and ivs[j].low > 0 and equivalent(ivs[j], hits[j]))
        close = [best[i]] + [j for j in order if j != best[i] and (ivs[j].low <= 0 or j in same)]
        rest = [j for j in order if j != best[i]]
        nth = ivs[rest[max_named - 1]] if len(rest) >= max_named else None
        use = paired_interval(top.logprob, scorer.shuffled(best, i).logprob, units, level)
        out.append(SlotJudgement(
            i, best[i], runner, lp, t1, tuple(close), len(close) > 1,
            tokens_to_separate(lp, G, m, level),
            tokens_to_separate(nth, G, m, level) if nth is not None else None,
            ivs[order[-1]].low <= 0 if order[-1] != best[i] else False, use.low <= 0, use, same))
    return tuple(out)


def joint_interval(scorer: Scorer, best: Wiring, other: Wiring, level: float = 0.99) -> Interval:
    """best - ``other``, both whole wirings, per token (the test of a claimed wiring that differs in several slots)."""
    return paired_interval(scorer.score(best).logprob, scorer.score(other).logprob, scorer.units, level)


def top1_interval(scorer: Scorer, best: Wiring, other: Wiring, level: float = 0.99) -> Interval:
    """best - ``other`` in top-1 agreement over every scored entry (a wiring is below the best only when
    :func:`separated`, as a slot's states in :func:`judge`)."""
    return paired_interval(scorer.score(best).hit, scorer.score(other).hit, scorer.units, level)
