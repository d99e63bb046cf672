"""`fingerprint`, end to end: read the trained wiring off the draft's weights.

:func:`infer_wiring` works on a loaded target and a draft (``layers`` / ``accept-rate`` call it for
``--trainer fingerprint``); :func:`run_fingerprint` adds loading, the claims of the config, the trainer
conventions and the engine, and the usual findings and fix against the engine for the inferred wiring.

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
* A source that does not give every state (a server: no B0 on SGLang's +1 rule, no BN / BN+norm) is searched over
  what it gives; a slot trained on a state it does not give scores best on the searched state nearest to that one
  on the residual stream, so a named state next to a state not searched admits it too (``B1 or B0 (not searched)``,
  ambiguous, never exact); BN+norm, which no boundary stands in for (a slot trained on it was named B1), is
  admitted by the last slot: :func:`unsearched_neighbours` says which.
* A slot with more than ``MAX_NAMED`` states not separated from its best is *undetermined*: the draft barely
  relies on it on these prompts, and on a short canary's held-out text such a list was seen to miss the true
  state; it admits any state (no ``TRAINED_WIRING_DIFFERS`` because of it) and names none.
* A draft whose vocabulary holds the target's next token at fewer than ``MIN_COVERAGE`` of the
  positions (another tokenizer or target: no search is run), or for which no wiring scored (the starting
  wirings, the best one and every one-slot change of it) agrees with the target's next token on ``MIN_TOP1``
  of the tokens and ``MIN_GAIN`` above the same draft fed no target information, is not trusted to name any
  wiring (``REPRESENTATION_MISMATCH``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ..conventions import Convention, Wiring, builtin_conventions
from ..draft.fit import check_target_fit
from ..draft.read import DraftSpec, read_draft
from ..errors import AuditError, param
from ..layers.diagnose import Context, Measured, diagnose, representation_mismatch, trained_wiring_differs
from ..layers.fix import plan_fix
from ..layers.result import Finding, Fix
from ..provenance import engine_convention, provenance
from ..resolution import MEASURED, Resolution, SideWiring, given_side, resolve_trained, side_of
from ..states import State, all_states
from .defaults import MORE_PROMPTS, ttt_steps_for
from .result import MAX_NAMED, Agreement, Claim, FingerprintResult, SlotInference
from .score import Corpus, Scorer, capture_corpus, merge_corpora
from .intervals import Interval
from .search import LOGPROB_EQUIVALENT, TOP1_EQUIVALENT, joint_interval, judge, search, separated, slot_table, top1_interval

MIN_COVERAGE = 0.5  # the draft vocabulary must hold the target's next token at this share of positions ...
MIN_TOP1 = 0.2  # ... some scored wiring's top-1 agreement must reach this ...
MIN_GAIN = 0.1  # ... and beat the draft fed no target information by this much


@dataclass(frozen=True)
class FingerprintOptions:
    """What a fingerprint run starts from. ``trainer`` / ``trained_boundaries`` / ``trained_ids`` name the
    declared wiring the weights are compared with (as ``layers`` resolves them); ``prompt_ids`` gives token
    ids directly (library use, tokenizer-less targets)."""

    target: str
    draft: str
    engine: str = "sglang"
    trainer: str | None = None
    trained_boundaries: str | None = None
    trained_ids: tuple[int, ...] | None = None
    prompts: str | None = None
    max_prompts: int = 8
    max_tokens: int = 256
    max_new_tokens: int = 64
    device: str = "cpu"
    dtype: str = "auto"
    use_installed_engine: bool = True
    prompt_ids: tuple[tuple[int, ...], ...] | None = None
    command: str | None = None  # the CLI line that reproduces this run (None: library call)
    states_server: Any = None  # eagle_audit.served.source.StatesServer: every state from it (a weights-free target)
    ttt_steps: int | None = None  # training-time-test steps scored where the draft predicts at them (later_steps);
    # None: defaults.ttt_steps_for the device
    more_prompts: int = MORE_PROMPTS  # the second round's budget: prompts after the first max_prompts (0: none)


@dataclass(frozen=True)
class Inference:
    """What the weights say, before any comparison."""

    best: tuple[State, ...]
    slots: tuple[SlotInference, ...]
    confidence: str  # "high", "ambiguous", "none"
    top1: float | None  # None: nothing scored (see reason)
    logprob: float | None
    baseline_top1: float | None
    baseline_logprob: float | None
    scored_tokens: int
    coverage: float
    agreement: Agreement
    search: dict
    reason: str  # why "none", else ""
    joint: Mapping[tuple[State, ...], Interval] = field(default_factory=dict)  # best - wiring, whole wirings scored
    joint_top1: Mapping[tuple[State, ...], Interval] = field(default_factory=dict)  # best - wiring, top-1 agreement

    @property
    def states(self) -> tuple[State, ...] | None:
        return None if self.confidence == "none" else self.best

    def consistent(self, states: Sequence[State] | None) -> bool:
        """``states`` is one of the wirings the weights cannot tell from the best (:meth:`verdict` is True)."""
        return self.verdict(states)[0] is True

    def verdict(self, states: Sequence[State] | None) -> tuple[bool | None, str]:
        """Whether the weights agree with the claimed wiring ``states``, and why.

        True: every slot the weights determine admits it, and the whole wiring scored against the best is
        not separated from it. False: a determined slot excludes it *and* the whole wiring is separated
        (below the best). None otherwise: it differs from the best only in slots the weights do not
        determine, or the two tests disagree, or the wiring was not scored as a whole and differs from the
        best in more than one slot. An undetermined slot therefore never turns a wiring the scores reject
        into agreement, and never makes one differ on its own; nor does a claimed state that was not searched."""
        if states is None or self.confidence == "none" or len(states) != len(self.slots):
            return None, ""
        states = tuple(states)
        # a state the search never had (a server without it: B0 on the +1 rule, BN+norm) is neither admitted nor
        # excluded: a correct claim of it must not come out as differing
        unsearched = [f"slot {sl.index} {s.label()}" + (f" (admitted beside {sl.text()})" if s in sl.unsearched else "")
                      for s, sl in zip(states, self.slots) if s not in self.agreement.states]
        if unsearched:
            return None, f"not searched (the states' source does not give it): {', '.join(unsearched)}"
        excluded = [sl.index for s, sl in zip(states, self.slots) if not sl.undetermined and s not in sl.candidates]
        iv = self.joint.get(states)
        if iv is None:
            if sum(s != b for s, b in zip(states, self.best)) <= 1 and not any(
                    sl.undetermined and s != sl.best for s, sl in zip(states, self.slots)):
                return (not excluded), ""  # one slot off the best: the per-slot test is the test of the wiring
            return None, "not scored as a whole wiring"
        joint = f"whole wiring {-iv.mean:+.3f} [{-iv.high:+.3f}, {-iv.low:+.3f}] mean log-prob against the best"
        t1 = self.joint_top1.get(states)
        rejected = separated(iv, t1)  # as a slot's states (search.judge)
        if iv.low > 0 and not rejected:
            joint += (f", but within the tolerances of equivalence (top-1 {-t1.mean:+.3f} [{-t1.high:+.3f}, "
                      f"{-t1.low:+.3f}]; search.equivalent)")
        if not rejected and not excluded:
            return True, ""
        if rejected and excluded:
            return False, f"slot {', '.join(map(str, excluded))} excluded; {joint}"
        if rejected:
            return None, f"{joint}, but it differs only in slots the weights do not determine"
        return None, f"slot {', '.join(map(str, excluded))} excluded, but the {joint} is not separated"


def continuations(target, prompt_ids: Sequence[Sequence[int]], max_new: int, batch: int = 8) -> list[list[int]]:
    """Prompt + the target's greedy continuation (``accept-rate``'s batched KV-cached decode, cut at EOS)."""
    from ..accept.simulate import make_cases

    cases, _ = make_cases(target, prompt_ids, max_new, batch=batch)
    return [c.ids for c in cases]


def prepare_corpus(target, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int = 64,
                   status: Callable[[str], None] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Corpus:
    """The target's greedy continuations of the prompts, and one teacher-forced pass per sequence
    capturing every state its source gives (reusable for several drafts of the same target). The states
    and the argmax at every position are reserved first, so a source whose continuations carry them (a
    server) answers the teacher-forced pass from its memo."""
    from ..source import NEXT_TOKENS, CannotGive, as_source

    say = status or (lambda m: None)
    source = as_source(target)
    cands = searched_states(source)
    source.reserve(cands, next_tokens=True)  # a source that cannot give the argmax says so here (exit 2) ...
    if not source.spec.can(NEXT_TOKENS):  # ... or here, before anything is generated
        raise CannotGive(source.spec, "the target's argmax at every position", "its backend cannot give it")
    say(f"target generates greedy continuations of {len(prompt_ids)} prompts")
    seqs = continuations(target, prompt_ids, max_new_tokens)
    say(f"one teacher-forced pass per sequence capturing {len(cands)} states")
    return capture_corpus(target, seqs, cands, progress=progress)


def searched_states(source) -> tuple[State, ...]:
    """The candidate states: every state of the target (``B0``..``BN``, ``BN+norm``) its source gives (a
    server: what its launch captures)."""
    return tuple(s for s in all_states(source.info.num_layers) if s in set(source.spec.states))


def unsearched_neighbours(named: Sequence[State], searched: Sequence[State], num_layers: int,
                          last: bool = False) -> tuple[State, ...]:
    """The states a named slot admits beyond its named (searched) states, in the residual stream's order B0, B1,
    ..., BN, BN+norm (:func:`~eagle_audit.states.all_states`): from each named state, the states next to it that
    were not searched, and beyond them while the next is not searched either (they have no nearer searched state);
    and, for the ``last`` slot, BN+norm where it was not searched, whatever the slot is named. A server on
    SGLang's +1 rule captures B1..B(N-1): a slot named B1 admits B0, the last slot admits BN+norm (and BN where it
    is named B(N-1)).

    Assumed (named):

    * *adjacent* is one boundary apart (B0 and B1, B(N-1) and BN: one layer's update between them), or BN and
      BN+norm, the order the search's states have; a slot trained on a boundary the search never had scores best
      on, or not separated from, the searched boundary nearest to it in that order. A named state farther from it
      than another searched state does not admit it.
    * BN+norm is not a boundary: the final norm rescales it, and no searched boundary stands in for it. Measured
      on the SmolLM2 canary trained on [B8, B30+norm] (tests/fingerprint/fp_canaries.py) searched over B1..B29:
      slot 1 came out B1, separated from every searched state (+0.316 [+0.139, +0.493] mean log-prob against B2).
      Slots hold their states in ascending order (every engine concatenates them so; a trainer that does not is
      fixed by permuting fc), so only the last slot can hold BN+norm: it admits it.

    The states admitted are never scored: the slot is ambiguous, never exact."""
    chain, have = all_states(num_layers), set(searched)
    out: set[State] = set()
    for s in named:
        if s not in chain:
            continue
        i = chain.index(s)
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(chain) and chain[j] not in have:
                out.add(chain[j])
                j += step
    if last and chain[-1] not in have:
        out.add(chain[-1])
    return tuple(x for x in chain if x in out)


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

    from ..runtime.eagle3 import load_draft_model

    say = status or (lambda m: None)
    if not spec.uses_aux:
        raise AuditError(f"{spec.path}: the draft takes no aux states (eagle_config.use_aux_hidden_state: false, no "
                         "fc): there is no wiring in its weights to fingerprint; every engine feeds it the post-norm "
                         "final state (the layers audit checks that)")
    info = target.info
    aux = check_target_fit(spec, info)
    cands = corpus.candidates
    index = {s: j for j, s in enumerate(cands)}
    if spec.kind != "eagle3":  # a block draft: its own forward, the same scoring (score.BlockScorer)
        from ..runtime.block import load_dflash_draft
        from .score import BlockScorer

        draft = load_dflash_draft(spec, target)
        t2 = time.perf_counter()
        scorer = BlockScorer(draft, corpus)
    else:
        draft = load_draft_model(spec, target, flags)
        t2 = time.perf_counter()
        scorer = Scorer(draft, corpus)  # the search scores step 0; later_steps decides what the judgement reads
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
                   "sweeps": trace.sweeps, "wirings_scored": trace.evaluations, "linear_fc": scorer.linear,
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


def later_steps(draft, corpus: Corpus, scorer: Scorer, trace, asked: int, top, base):
    """The evidence the judgement reads: step 0 alone, or steps 0..k-1 of the training-time test where the draft
    predicts at every one of them (the best wiring's top-1 at step j at least ``MIN_TOP1`` and ``MIN_GAIN`` above
    the same draft fed no target information, at step j). A draft trained at step 0 only (the test canaries:
    top-1 0.03 at step 1) gives its later steps nothing to say about the wiring: counting them named a wrong state
    (``bench/README.md``). The search itself stays on step 0 (its cost per wiring is one forward); only the
    per-slot table, the shuffle test and the whole-wiring tests are scored again on the steps used.
    Returns (the scorer to judge with, the trace with its per-slot table from it, what was used and why)."""
    info = {"asked": asked, "used": 1}
    if type(scorer) is not Scorer:  # a block draft (BlockScorer): its first drafted token only
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


def _labels(states) -> str:
    return "[" + ", ".join(s.label() for s in states) + "]"


def compare(inf: Inference, spec: DraftSpec, info, declared: SideWiring, trainer: Convention | None,
            served: SideWiring | None) -> tuple[tuple[Claim, ...], tuple[Finding, ...], Fix | None]:
    """Claims of the config / conventions / engine against the weights; the findings (the usual checks of
    :func:`eagle_audit.layers.diagnose.diagnose` with the measured wiring as the trained side, plus
    ``TRAINED_WIRING_DIFFERS`` / ``REPRESENTATION_MISMATCH``) and the fix against the engine."""
    n = info.num_layers
    engine = served.states if served is not None else None

    def claim(source: str, states, note: str) -> Claim:
        agrees, why = inf.verdict(states)
        return Claim(source, states, agrees, "; ".join(x for x in (note, why) if x))

    declared_verdict = inf.verdict(declared.states)[0]
    claims = [claim("declared", declared.states, f"{declared.wiring.convention} ({declared.wiring.ids_source})")]
    for name, conv in builtin_conventions("trainer").items():
        try:
            w = conv.resolve(spec.config, info.architecture, n)
        except AuditError as e:
            claims.append(Claim(name, None, None, e.message))
            continue
        fits = len(w.states) == len(inf.slots)
        claims.append(claim(name, w.states, "") if fits else
                      Claim(name, w.states, None, f"{len(w.states)} states; fc takes {len(inf.slots)}"))
    if served is not None:
        claims.append(claim("engine", served.states, f"{served.title} feeds this"))
    evidence = (f"Best wiring {_labels(inf.best)}: top-1 {inf.top1:.3f}, mean log-prob {inf.logprob:.3f}; fed no "
                f"target information: top-1 {inf.baseline_top1:.3f}, mean log-prob {inf.baseline_logprob:.3f}."
                if inf.top1 is not None else f"{inf.scored_tokens} positions could be scored.")
    hint = ""
    if inf.states:
        hint = (f"{param('trained_boundaries', ','.join(_bound(s) for s in settled(inf, declared.states, engine)))}, or "
                f"{param('trainer', MEASURED)}")
    measured = Measured(declared.wiring, tuple(corpus_all(inf) if sl.undetermined else sl.admitted
                                              for sl in inf.slots) if inf.states else None,
                        inf.reason, evidence, hint, differs=declared_verdict is False)
    trained = declared
    if inf.states:
        states = settled(inf, declared.states, engine)
        trained = given_side(Wiring("fingerprint", "trainer", "-", "measured", None, "boundaries", "draft weights",
                                    tuple(s.boundary for s in states), states), spec, trainer)
    if served is None:  # the engine has no rule for this target: only the weights' own findings
        ctx = Context(spec, info, Resolution(trained, trained, info.architecture, n), len(inf.slots), (), measured)
        return tuple(claims), tuple(representation_mismatch(ctx)) + tuple(trained_wiring_differs(ctx)), None
    res = Resolution(trained, served, info.architecture, n)
    _, findings = diagnose(spec, info, res, None, measured)
    fix = None
    if inf.states and any(f.severity == "error" and f.code != "TRAINED_WIRING_DIFFERS" for f in findings):
        fix = plan_fix(res, spec, info.hidden_size)
    return tuple(claims), findings, fix


def settled(inf: Inference, declared: Sequence[State], served: Sequence[State] | None = None) -> tuple[State, ...]:
    """The measured wiring the audit goes on with: per slot, the declared state where the weights admit it
    (an ambiguous or undetermined slot gives no reason to doubt it), else the state the engine feeds
    (``served``) where it is one of the slot's unsearched neighbours (the weights were never asked about it:
    no fix may move the engine off it), else the best state."""
    if len(declared) != len(inf.slots):
        return inf.best
    served = tuple(served) if served is not None and len(served) == len(inf.slots) else (None,) * len(inf.slots)
    return tuple(d if sl.admits(d) else e if e is not None and e in sl.unsearched else sl.best
                 for sl, d, e in zip(inf.slots, declared, served))


def corpus_all(inf: Inference) -> tuple[State, ...]:
    """Every candidate state (what an undetermined slot admits)."""
    return tuple(inf.agreement.states)


def _bound(s: State) -> str:
    return "final" if s.normed else str(s.boundary)


def run_fingerprint(opts: FingerprintOptions, status: Callable[[str], None] | None = None,
                    progress: Callable[[int, int], None] | None = None, source=None) -> FingerprintResult:
    """``source``: an open state source to take the target's states and continuations from (else one is
    opened)."""
    import time

    from ..prompts import encode, load_prompts
    from ..source import open_source, source_request

    say = status or (lambda m: None)
    if opts.trainer == MEASURED:
        raise AuditError(f"{param('trainer')}: the fingerprint compares the weights with a declared trainer; {MEASURED!r} is the "
                         "measurement itself (leave the trainer out to use the one the layout implies)")
    notes: list[str] = []
    spec = read_draft(opts.draft)
    if spec.kind != "eagle3":
        from ..runtime.block import dflash_arch

        dflash_arch(spec, spec.hidden_size)  # a block draft this forward cannot run: one line, before any loading
    engine = engine_convention(opts.engine, opts.use_installed_engine, notes)
    if spec.kind != "eagle3":
        from ..draft.block import convention_for

        engine = convention_for(engine, spec.kind, notes)
    listed = None if opts.prompt_ids is not None else load_prompts(opts.prompts, opts.max_prompts + max(0, opts.more_prompts))
    prompts = listed[:opts.max_prompts] if listed is not None else None
    reserve = listed[opts.max_prompts:] if listed is not None else ()
    if source is None and opts.states_server is not None:
        from ..target import has_weights

        if has_weights(str(opts.target)):  # the states would silently come from the weights instead
            raise AuditError(f"{param('states_server')} takes every target state from the server, but "
                             f"{param('target', str(opts.target))} holds weights: name a directory of config.json, "
                             "the tokenizer and embed_tokens.safetensors only (docs/server.md), or leave the server out")
    if source is None:
        say(f"loading target {opts.target}")
    target = source if source is not None else open_source(source_request(opts), say)
    info = target.info
    check_target_fit(spec, info)
    declared, trainer = resolve_trained(spec, info, notes, opts.trainer, opts.trained_boundaries, opts.trained_ids)
    try:
        served = side_of(engine, spec.config, info.architecture, info.num_layers)
    except AuditError as e:
        served = None
        notes.append(f"engine: {e.message}")
    prompt_ids = ([list(p) for p in opts.prompt_ids] if opts.prompt_ids is not None
                  else encode(prompts, target.tokenizer, opts.max_tokens))
    if not prompt_ids or any(len(p) < 2 for p in prompt_ids):
        raise AuditError("prompts: every prompt needs at least 2 tokens")
    flags = declared.flags
    if spec.kind == "eagle3":
        notes.append(f"draft flags as trained: {flags.to_json()}")
    else:
        notes.append(f"{spec.kind} draft: its block forward (eagle_audit/runtime/block.py), the block's first "
                     "drafted token scored")
    ttt_steps, why = ttt_steps_for(opts.device, opts.ttt_steps)
    if why and spec.kind == "eagle3":
        notes.append(why)
    flat = sum(p.text is not None for p in (prompts or ()))
    if flat:
        notes.append(f"prompts: {flat} of {len(prompts)} are plain text, not chat-templated; drafts are trained on the "
                     "target's chat-templated responses, and on plain text the fingerprint has less to go on (a test "
                     "canary's slot was named wrong there, bench/README.md): prefer chat prompts")
    t0 = time.perf_counter()
    corpus = prepare_corpus(target, prompt_ids, opts.max_new_tokens, say, progress)
    left_out = [s.label() for s in all_states(info.num_layers) if s not in corpus.candidates]
    if left_out:
        from ..source import as_source

        notes.append(f"states searched: the {len(corpus.candidates)} that {as_source(target).spec.origin} gives; not searched: "
                     f"{', '.join(left_out)} (a slot named next to one of them admits it, 'B1 or B0 (not searched)'; "
                     "the last slot admits a post-norm state not searched: no boundary stands in for it)")
    t1 = time.perf_counter()
    starts = starting_points(spec, info, declared.wiring, engine)
    inf = infer_wiring(target, spec, corpus, starts, flags, say, ttt_steps=ttt_steps)
    inf.search.setdefault("seconds", {})["generate_and_capture"] = round(t1 - t0, 2)
    inf = second_round(target, spec, corpus, starts, flags, inf, reserve, opts, say, ttt_steps)
    claims, findings, fix = compare(inf, spec, info, declared, trainer, served)
    verdict = "mismatch" if any(f.severity == "error" for f in findings) else "match"
    prov = provenance(command=opts.command, engine=engine, trainer=trainer, target=target, prompts=opts.prompts,
                      num_prompts=len(prompt_ids) + inf.search.get("second_round", {}).get("prompts", 0),
                      tokens=inf.scored_tokens, notes=notes)
    return FingerprintResult(verdict, inf.confidence, info.to_json(), spec.to_json(), inf.states, inf.best, inf.slots,
                             inf.top1, inf.logprob, inf.baseline_top1, inf.baseline_logprob, inf.scored_tokens,
                             inf.coverage, inf.agreement, claims, declared.wiring, served.wiring if served else None,
                             tuple(findings), fix, inf.search,
                             prov)


def unsettled(inf: Inference, extra_tokens: int) -> list[int]:
    """Slots a second round of ``extra_tokens`` more scored tokens (prompts like these) is expected to settle:
    ambiguous or undetermined, used by the draft (not ``unused``, not ``uninformed``: more text of this kind
    would not change that), and whose estimate (``name_tokens`` for an undetermined slot, ``separate_tokens``
    for an ambiguous one) is within the evidence the two rounds would have."""
    if inf.confidence == "none":
        return []
    out = []
    for sl in inf.slots:
        if not sl.ambiguous or sl.unused or sl.uninformed:
            continue
        if sl.unsearched and len(sl.candidates) == 1:  # only a state the source does not give: more text cannot tell
            continue
        want = sl.name_tokens if sl.undetermined else sl.separate_tokens
        if want is not None and want <= inf.scored_tokens + extra_tokens:
            out.append(sl.index)
    return out


def second_round(target, spec: DraftSpec, corpus: Corpus, starts, flags, inf: Inference, reserve, opts, say,
                 ttt_steps: int | None = None):
    """More tokens where a slot is not separated, within the stated budget (``opts.more_prompts`` prompts of
    the same source after the first ``max_prompts``): once, only when :func:`unsettled` names a slot the extra
    evidence is expected to settle. The whole inference is run again on both rounds' text together (starting
    from the first round's best): two looks at the data, so each 99% statement is at worst 98% (Bonferroni)."""
    import time

    from ..prompts import encode

    if not reserve or opts.more_prompts <= 0:
        return inf
    per_prompt = inf.scored_tokens / max(1, corpus.next_ids.shape[0])
    extra = int(per_prompt * len(reserve))
    slots = unsettled(inf, extra)
    if not slots:
        return inf
    say(f"second round: {len(reserve)} more prompts for slot(s) {', '.join(map(str, slots))}")
    t0 = time.perf_counter()
    more = prepare_corpus(target, encode(reserve, target.tokenizer, opts.max_tokens), opts.max_new_tokens, say)
    merged = merge_corpora(corpus, more)
    t1 = time.perf_counter()
    cands = corpus.candidates
    first = [("first round", tuple(inf.best))] + [st for st in starts if tuple(st[1]) != tuple(inf.best)]
    again = infer_wiring(target, spec, merged, first, flags, say, ttt_steps=ttt_steps)
    again.search["seconds"]["generate_and_capture"] = inf.search["seconds"].get("generate_and_capture", 0) + round(t1 - t0, 2)
    again.search["second_round"] = {
        "prompts": len(reserve), "for_slots": slots, "budget_prompts": opts.more_prompts,
        "first": [sl.text() for sl in inf.slots], "first_scored_tokens": inf.scored_tokens,
        "seconds": round(time.perf_counter() - t0, 2), "of_candidates": len(cands)}
    return again


def fingerprint(target: str, draft: str, *, engine: str = "sglang", trainer: str | None = None,
                prompts: str | None = None, prompt_ids: Sequence[Sequence[int]] | None = None, max_prompts: int = 8,
                max_tokens: int = 256, max_new_tokens: int = 64, device: str = "cpu", dtype: str = "auto",
                use_installed_engine: bool = True, server=None, ttt_steps: int | None = None,
                more_prompts: int = MORE_PROMPTS) -> FingerprintResult:
    """Read the trained wiring off ``draft``'s weights against ``target`` (paths or hub ids). ``server``: a
    reference SGLang or vLLM server (URL or :class:`eagle_audit.served.source.StatesServer`) to take every target
    state and the argmax at every position from, for a ``target`` directory without weights."""
    if isinstance(server, str):
        from ..served.source import StatesServer

        server = StatesServer(server)
    return run_fingerprint(FingerprintOptions(
        target=target, draft=draft, engine=engine, trainer=trainer, prompts=prompts, max_prompts=max_prompts,
        max_tokens=max_tokens, device=device, dtype=dtype, use_installed_engine=use_installed_engine,
        max_new_tokens=max_new_tokens, states_server=server, ttt_steps=ttt_steps, more_prompts=more_prompts,
        prompt_ids=tuple(tuple(p) for p in prompt_ids) if prompt_ids is not None else None))



def resolve_measured(target, spec: DraftSpec, engine: Convention, notes: list[str],
                     prompt_ids: Sequence[Sequence[int]], max_new_tokens: int = 64,
                     status: Callable[[str], None] | None = None) -> Resolution:
    """Both sides of an audit with the trained side measured on the draft's weights (trainer
    ``fingerprint``): the wiring the fingerprint infers (for a slot not separated, its best state, said in
    ``notes``); the draft flags as the config states them (or as the layout's trainer runs them)."""
    info = target.info
    declared, _ = resolve_trained(spec, info, [])
    served = side_of(engine, spec.config, info.architecture, info.num_layers)
    corpus = prepare_corpus(target, prompt_ids, max_new_tokens, status)
    inf = infer_wiring(target, spec, corpus, starting_points(spec, info, declared.wiring, engine), declared.flags,
                       status=status)
    if inf.states is None:
        raise AuditError(f"trainer {MEASURED}: no wiring can be read off {spec.path}'s weights for {info.name}: "
                         f"{inf.reason}", hint="eagle-audit fingerprint shows the evidence (REPRESENTATION_MISMATCH)")
    amb = [f"slot {sl.index}: {sl.text()}" for sl in inf.slots if sl.ambiguous]
    states = settled(inf, declared.states, served.states)
    notes.append(f"trained states measured on the draft's weights (fingerprint, {inf.scored_tokens} tokens): "
                 f"{[s.label() for s in states]}, confidence {inf.confidence}"
                 + (f"; not separated: {'; '.join(amb)} (the declared state where the weights admit it, else the "
                    "best)" if amb else ""))
    wiring = Wiring(MEASURED, "trainer", "-", "measured", None, "boundaries", "draft weights",
                    tuple(s.boundary for s in states), states)
    return Resolution(given_side(wiring, spec, None), served, info.architecture, info.num_layers)

