"""The pick judged again on prompts that did not choose it, and in the user's currency.

The search (:mod:`.infer`) picks the best state per slot on its own text and judges the pick on the same tokens:
the pick's margin is then biased upwards (the best of about 31 states a slot, chosen on those tokens), and mean
log-prob is not what a user pays. Here, on the target's greedy continuations of *other* prompts (the confirmation's,
disjoint from the search's and the second round's):

1. **Each named slot again** (:func:`rejudge`): every state (``RECHECK``) against the search's pick, the other slots at the
   search's best, with the same paired cluster-robust interval and equivalence rule (:func:`~.search.judge`). The
   pick is fixed before this text is read, so the interval is honest. A slot stays as named only where the
   confirmation separates the same states; a state it does not separate from the pick joins the slot (``B19 or
   B15``), and a slot that would then name more than ``MAX_NAMED`` states is undetermined. So "exact" never
   comes from one pass: it needs the search's text and the confirmation's to agree.
   A slot named by fc's weights (:func:`~.weights.combine`) holds where the confirmation's interval contains
   the weights' state: the rule that named it, on this text. A slot where both lines separate the same one state
   (``lines`` "both", :func:`agreed`) is not re-judged: two independent readings (the draft's function on the
   search's text, fc's weights against the states) already agree, and re-separating its neighbours is the
   confirmation's largest cost (one draft forward per state). Its accept length is still judged (2.).
2. **Simulated accept length** (:func:`accept_lengths`, ``accept-rate``'s simulation: greedy verify of a chain of
   ``steps`` drafts from every accepted point, :func:`eagle_audit.simulate.accept.simulate`) of the declared
   wiring, the measured one (:func:`~.claims.settled`) and the engine's. A finding raised from the weights
   (the measured wiring differs from the declared one: ``TRAINED_WIRING_DIFFERS`` and the engine findings and fix
   computed from it) stands only where the measured wiring's accept length beats the declared one's by at least
   ``MATERIAL_GAIN`` tokens per verify with its 99% interval above 0 (:func:`stands`). Otherwise the declared wiring
   agrees "within x accept length" and the audit goes on with it.
3. **The declared state admitted where accept length does not refute it** (:func:`admit_declared`): where the
   measured wiring does not stand, a named slot that excluded the declared state admits it (it may then be
   undetermined): a slot never names, against the declared wiring, what the user's currency does not support.

The interval of an accept-length difference (:func:`ratio_difference`): accept length is a ratio (tokens gained /
verifies) over prompts; per prompt, the linearised contribution of its tokens and verifies to each wiring's ratio
(the delta method), paired between the two wirings on the same continuation; CR1 variance G/(G-1), Student's t
with G-1 degrees of freedom, one unit per prompt (as :func:`~.intervals.paired_interval`).

Assumptions, named: the engine drafts a chain (``topk`` 1) of ``CONFIRM_STEPS`` tokens (``accept-rate``'s default;
a tree draft's accept length ranks wirings the same way it was not measured to); the draft runs as declared
(flags), as in the search. A block draft (DFlash, DSpark) is re-judged with its own scorer (the block's first drafted
token, :class:`~.score.BlockScorer`) and its accept length simulated as the engines draft it
(:mod:`eagle_audit.simulate.block`: the block's drafts a round, :func:`~eagle_audit.simulate.block.block_steps`, not
``CONFIRM_STEPS``); a kind accept-rate does not simulate gets no confirmation, and its findings rest on the search's
text (the result says so).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import torch

from ..errors import param
from ..states import State
from .intervals import Interval, t_quantile, tokens_to_separate
from .result import MAX_NAMED
from .score import Corpus, scorer_for
from .search import SearchTrace, judge, slot_table
from .infer import weights_joint
from .verdict import Inference

#: tokens per verify the measured wiring must gain over the declared one for a finding from the weights to stand:
#: about 1.5% of a 1.3 accept length (an early checkpoint's); a fix that gains less is not worth a config change
MATERIAL_GAIN = 0.02
LEVEL = 0.99
#: the states a named slot is judged against again: the search's best RECHECK for that slot (its last sweep's
#: table), None: every state. Every state: tried with the best 8 (16 draft forwards on the demo instead of 64), the demo's slot 1 came out "B3 or B4 or B2" where every state gives "undetermined": B0,
#: ranked below the 8 best on the search's text, is not separated from B3 on the confirmation's
RECHECK: int | None = None


def ratio_difference(num_a: Sequence[float], den_a: Sequence[float], num_b: Sequence[float], den_b: Sequence[float],
                     level: float = LEVEL) -> Interval:
    """sum(num_a)/sum(den_a) - sum(num_b)/sum(den_b) over paired units (one per prompt), with a cluster-robust
    interval by the delta method (module doc). Fewer than 2 units: an infinite interval."""
    a_n, a_d = torch.tensor(num_a, dtype=torch.float64), torch.tensor(den_a, dtype=torch.float64)
    b_n, b_d = torch.tensor(num_b, dtype=torch.float64), torch.tensor(den_b, dtype=torch.float64)
    if float(a_d.sum()) == 0 or float(b_d.sum()) == 0:
        return Interval(0.0, -math.inf, math.inf)
    ra, rb = float(a_n.sum() / a_d.sum()), float(b_n.sum() / b_d.sum())
    G = a_n.numel()
    if G < 2:
        return Interval(ra - rb, -math.inf, math.inf)
    u = (a_n - ra * a_d) / a_d.sum() - (b_n - rb * b_d) / b_d.sum()  # [G]: each prompt's linearised contribution
    se = math.sqrt(G / (G - 1) * float((u ** 2).sum()))
    half = t_quantile((1 + level) / 2, G - 1) * se
    return Interval(ra - rb, ra - rb - half, ra - rb + half)


@dataclass(frozen=True)
class WiringAccept:
    """One wiring's simulated acceptance on the confirmation's continuations."""

    states: tuple[State, ...]
    accept_length: float | None  # tokens per verify (accepted drafts + 1)
    per_position: tuple[float, ...]  # [steps]: share of verifies that accepted draft i
    tokens: tuple[int, ...]  # per prompt: tokens gained
    verifies: tuple[int, ...]  # per prompt: verifies

    def to_json(self) -> dict:
        return {"states": [s.label() for s in self.states], "accept_length": self.accept_length,
                "per_position": list(self.per_position)}


@dataclass(frozen=True)
class Gain:
    """``better`` - ``worse`` in simulated accept length, tokens per verify (99% interval), and per position."""

    mean: float
    low: float
    high: float
    per_position: tuple[float, ...]

    @classmethod
    def of(cls, a: WiringAccept, b: WiringAccept, level: float = LEVEL) -> "Gain":
        iv = ratio_difference(a.tokens, a.verifies, b.tokens, b.verifies, level)
        return cls(iv.mean, iv.low, iv.high, tuple(x - y for x, y in zip(a.per_position, b.per_position)))

    def text(self) -> str:
        pos = ", ".join(f"{x:+.3f}" for x in self.per_position)
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] tokens per verify (per position {pos})"

    def to_json(self) -> dict:
        return {"mean": self.mean, "interval": [self.low, self.high], "per_position": list(self.per_position)}


def stands(gain: Gain | None, material: float = MATERIAL_GAIN) -> bool:
    """The measured wiring beats the declared one materially: a gain of at least ``material`` tokens per verify
    whose interval excludes 0."""
    return gain is not None and gain.mean >= material and gain.low > 0


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation's prompts said (JSON ``confirmation``)."""

    prompts: int
    scored_tokens: int  # positions scored in the slots' re-judgement
    steps: int
    wirings: Mapping[str, WiringAccept]  # "declared", "measured", "served" (distinct wirings only, by first name)
    gain: Gain | None  # measured - declared (None: the same wiring)
    fix_gain: Gain | None  # what the fix gains: the wiring the audit goes on with - the engine's (None: the same)
    stands: bool | None  # the measured wiring's finding stands (None: measured == declared, nothing to stand)
    seconds: float
    slots: tuple[str, ...] = ()  # per slot, what the confirmation said of the search's naming

    def agrees_text(self) -> str:
        """The declared wiring's standing where the measured one did not beat it, and what more text would decide."""
        if self.gain is None:
            return ""
        return (f"agrees within {abs(self.gain.mean):.3f} accept length: on {self.prompts} other prompts the measured "
                f"wiring's simulated accept length is {self.gain.text()} against the declared one's, under the "
                f"{MATERIAL_GAIN} tokens per verify with an interval above 0 a finding from the weights needs; "
                + self.needs())

    def needs(self) -> str:
        """What more confirmation text would decide (as a slot's ``needs``): where the gain is material but its
        interval reaches 0, the prompts of this kind at which it is predicted to exclude 0 (probability
        ``intervals.POWER``, :func:`~eagle_audit.fingerprint.intervals.tokens_to_separate` on prompts as units)."""
        g = self.gain
        if g is None or stands(g):
            return ""
        if g.mean < MATERIAL_GAIN:
            return "a gain this small is not worth a fix, whatever more text would show"
        want = tokens_to_separate(Interval(g.mean, g.low, g.high), self.prompts, self.prompts)
        if want is None:
            return "more prompts of this kind are not expected to decide it (the gain is small against its spread)"
        return f"about {want} confirmation prompts of this kind would decide it ({param('confirm_prompts')})"

    def gain_text(self) -> str:
        """What the measured wiring gains over the declared one, where it stood."""
        m, d = self.wirings["measured"], self.wirings["declared"]
        return (f"Confirmed on {self.prompts} other prompts in simulated accept length ({self.steps} draft tokens a "
                f"verify): {m.accept_length:.3f} for the measured wiring against {d.accept_length:.3f} declared, "
                f"{self.gain.text()}.")

    def to_json(self) -> dict:
        return {"prompts": self.prompts, "scored_tokens": self.scored_tokens, "steps": self.steps,
                "material_gain": MATERIAL_GAIN,
                "wirings": {k: v.to_json() for k, v in self.wirings.items()},
                "gain": self.gain.to_json() if self.gain else None,
                "fix_gain": self.fix_gain.to_json() if self.fix_gain else None,
                "stands": self.stands, "needs": self.needs(), "slots": list(self.slots), "seconds": self.seconds}


def rejudge(inf: Inference, draft, corpus: Corpus) -> tuple[Inference, tuple[str, ...], int]:
    """Each named slot of ``inf`` judged again on ``corpus`` (the confirmation's text, the same candidate states),
    the search's best fixed (module doc, 1). Undetermined slots are left as they are (nothing was named). Returns
    the inference with its slots updated, what the confirmation said per slot, and the tokens it scored."""
    cands = corpus.candidates
    index = {s: j for j, s in enumerate(cands)}
    best = tuple(index[s] for s in inf.best)
    scorer = scorer_for(draft, corpus)
    rows = inf.agreement.logprob  # the search's last sweep: [slot][state] mean log-prob on its own text
    again = {i: set(sorted(range(len(cands)), key=lambda j: -rows[i][j])[:RECHECK]) | {index[c] for c in sl.candidates}
             for i, sl in enumerate(inf.slots) if not sl.undetermined and not agreed(sl)}
    lp, top1 = slot_table(scorer, best, len(cands), states=again)
    trace = SearchTrace(best, (), lp, top1, 0, scorer.evaluations)
    judged = {j.index: j for j in judge(scorer, trace, max_named=MAX_NAMED)}
    whole = inf.search.get("weights_wiring")  # the weights' whole wiring, judged again on this text (weights.combine)
    joint = (weights_joint(scorer, best, whole["states"], index)
             if whole and any(sl.lines == "weights" for sl in inf.slots) else None)
    admits = bool(joint and joint["admits"])
    out, said = [], []
    for sl in inf.slots:
        j = judged.get(sl.index)
        if agreed(sl):
            out.append(sl)  # confirmed stays None: not re-judged
            said.append(f"held: the draft's function and fc's weights both separate {sl.best.label()}; "
                        "not re-judged")
            continue
        if j is None:
            out.append(sl)
            said.append("not re-judged (undetermined on the search's text)")
            continue
        again = tuple(cands[c] for c in j.candidates)
        union = tuple(sl.candidates) + tuple(s for s in again if s not in sl.candidates)
        if sl.weights_state is not None and sl.candidates == (sl.weights_state,) and (
                sl.weights_state in again or j.uninformed or (admits and sl.lines == "weights")):
            # weights.combine's rule on this text: one line separates the state, the other's interval contains it
            # (where the draft does not use the slot's information on this text, it excludes none; where the
            # function does not separate the weights' whole wiring from its best, it does not exclude it)
            out.append(replace(sl, confirmed=True, confirm_tokens=scorer.scored))
            where = ("the draft does not use the slot's information on the confirmation's text (it excludes no "
                     "state)" if j.uninformed else f"the confirmation's {' or '.join(s.label() for s in again)} "
                     "contains it" if sl.weights_state in again else
                     "the confirmation does not separate the weights' whole wiring from the search's best")
            said.append(f"held: fc's weights separate {sl.weights_state.label()}, and {where}, on {scorer.scored} tokens")
            continue
        if union == tuple(sl.candidates):
            out.append(replace(sl, confirmed=True, confirm_tokens=scorer.scored))
            said.append(f"held: {' or '.join(s.label() for s in again)} on {scorer.scored} tokens")
            continue
        undetermined = len(union) > MAX_NAMED
        out.append(replace(sl, candidates=union, ambiguous=True, undetermined=sl.undetermined or undetermined,
                           confirmed=False, confirm_tokens=scorer.scored, separate_tokens=j.separate_tokens,
                           name_tokens=j.name_tokens,
                           confirm_added=tuple(s for s in union if s not in sl.candidates)))
        said.append(f"widened: the confirmation does not separate {' or '.join(s.label() for s in union[len(sl.candidates):])}"
                    f" from {sl.best.label()} on {scorer.scored} tokens")
    return with_slots(inf, tuple(out)), tuple(said), scorer.scored


def agreed(sl) -> bool:
    """Both lines of evidence separate the same one state in this slot (module doc, 1)."""
    return (sl.lines == "both" and sl.weights_state is not None and tuple(sl.candidates) == (sl.weights_state,)
            and not sl.undetermined)


def with_slots(inf: Inference, slots: tuple) -> Inference:
    """``inf`` with its slots re-judged, its confidence following them (``none`` stays: nothing is trusted)."""
    confidence = inf.confidence if inf.confidence == "none" else (
        "ambiguous" if any(s.ambiguous for s in slots) else "high")
    return replace(inf, slots=slots, confidence=confidence)


def admit_declared(inf: Inference, said: Sequence[str], declared: Sequence[State], measured: Sequence[State],
                   gain: Gain) -> tuple[Inference, tuple[str, ...]]:
    """Where the measured wiring does not beat the declared one in simulated accept length (:func:`stands` false),
    the declared state joins every named slot that excluded it (module doc, 3): the weights' naming was made in
    log-prob on the search's text, and in what a user pays the declared state is not worse, so a slot that excludes
    it would name a state the evidence does not support. Seen on a SpecForge 0.2.0 draft trained on [B6, B13, B22]
    (tests/trainers, ``specforge-5-12-21``, held-out top-1 0.20): the search's best [B13, B23, B27] beat the truth
    by 0.107 mean log-prob with top-1 no better, and slot 1 came out "B23 or B22 or B21"; the declared and measured
    wirings' accept lengths were equal. A slot that then names more than ``MAX_NAMED`` states is undetermined."""
    out, told = [], list(said)
    for k, (sl, d, m) in enumerate(zip(inf.slots, declared, measured)):
        if sl.undetermined or d == m or sl.admits(d):
            out.append(sl)
            continue
        union = tuple(sl.candidates) + (d,)
        out.append(replace(sl, candidates=union, ambiguous=True, undetermined=len(union) > MAX_NAMED,
                           accept_admitted=(d,)))
        told[k] = (f"widened: the declared {d.label()} joins it, the measured wiring's simulated accept length being "
                   f"{gain.text()} against the declared one's, not a material gain")
    return with_slots(inf, tuple(out)), tuple(told)


def accept_lengths(target, draft, cases, wirings: Mapping[str, tuple[State, ...]], steps: int
                   ) -> dict[str, WiringAccept]:
    """Simulated acceptance of each distinct wiring on ``cases`` (``accept-rate``'s simulation)."""
    from ..simulate.accept import capture_cases
    from ..simulate.wiring import simulate

    union = sorted({s for w in wirings.values() for s in w})
    caps = capture_cases(target, cases, union)  # through the source's memo: the text was captured already
    out: dict[str, WiringAccept] = {}
    done: dict[tuple[State, ...], WiringAccept] = {}
    for name, w in wirings.items():
        if w not in done:
            st = simulate(draft, cases, caps, tuple(w), steps)
            done[w] = WiringAccept(tuple(w), st.accept_length, st.per_position,
                                   tuple(sum(g) for g in st.gains), tuple(len(g) for g in st.gains))
        out[name] = done[w]
    return out


def confirm(target, spec, flags, inf: Inference, declared: tuple[State, ...], measured: tuple[State, ...],
            served: tuple[State, ...] | None, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int, steps: int,
            say: Callable[[str], None]) -> tuple[Inference, Confirmation]:
    """The confirmation (module doc) on the target's continuations of ``prompt_ids``: the slots of ``inf``
    re-judged (the inference returned, for what the weights name), and the accept length of ``declared``,
    ``measured`` (the search's pick as the audit would go on with it, :func:`~.claims.settled` on the search's
    inference: the wiring a finding from the weights and its fix are about) and ``served``. The pick is judged in
    accept length whatever the re-judgement says of its slots: a slot the confirmation's text cannot name (a short
    canary off its training text left every slot undetermined) may still carry a miswiring that costs accept length,
    and the accept length on that text decides whether the finding stands."""
    from ..runtime.load import load_draft
    from ..simulate.accept import make_cases
    from ..simulate.wiring import steps_of
    from .corpus import prepare_corpus

    t0 = time.perf_counter()
    say(f"confirmation: {len(prompt_ids)} other prompts, the pick judged again and in simulated accept length")
    corpus = prepare_corpus(target, prompt_ids, max_new_tokens, say)
    draft = load_draft(spec, target, flags)
    steps = steps_of(draft, steps)  # a block draft drafts its block's tokens a round, whatever ``steps`` says
    inf, said, scored = rejudge(inf, draft, corpus)
    cases, _ = make_cases(target, prompt_ids, max_new_tokens, batch=8)  # from the source's memo (continued above)
    wirings = {"declared": tuple(declared), "measured": tuple(measured)}
    if served is not None and len(served) == len(declared):
        wirings["served"] = tuple(served)
    acc = accept_lengths(target, draft, cases, wirings, steps)
    gain = Gain.of(acc["measured"], acc["declared"]) if tuple(measured) != tuple(declared) else None
    ok = stands(gain) if gain is not None else None
    if ok is False:
        inf, said = admit_declared(inf, said, declared, measured, gain)
    fix_gain = None
    if "served" in acc:
        goes_on = acc["measured"] if ok else acc["declared"]
        if goes_on.states != acc["served"].states:
            fix_gain = Gain.of(goes_on, acc["served"])
    return inf, Confirmation(len(prompt_ids), scored, steps, acc, gain, fix_gain, ok,
                             round(time.perf_counter() - t0, 2), said)
