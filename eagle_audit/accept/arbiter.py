"""The live server as the arbiter (`accept-rate --server`).

What: when the server's accept length disagrees with the simulated served wiring, the candidate wirings the server
may be serving are simulated on the same requests (:func:`build_candidates`: the trained wiring, the static guess,
each engine variant of the server's engine serving the draft's kind, each single-slot fix, the guess with the
trained draft semantics where the draft's family runs its flags), scored against the live figures within
:func:`live_tolerance`, and the matching candidate decides the verdict (:func:`arbitrate`); a server that fails on
the audited requests is judged by what each candidate's static audit predicts (:func:`server_failed`).

Why: the static audit guesses which wiring an engine serves from its rules (``probes/*.json``); a running server
measures one, and another runner of the same engine or a rule modelled otherwise shows up as a disagreement.

The method, the tolerances and what each engine reports for EAGLE-3 and block drafts, with the engine sources they
were read from and the measurements behind :data:`NUMERIC_SLACK`: docs/accept-rate.md, "The live server as the
arbiter".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..conventions import Convention, Wiring, builtin_conventions
from ..kinds import FALLBACK, kind as kind_of
from ..resolution import DraftFlags, Resolution, SideWiring, side_of
from ..runtime.load import network
from ..states import State

#: live - simulated accept length (and per-position rate) allowed either way for the engine's numerics (an
#: assumption: a few near-tie drafts decided otherwise; measured in docs/accept-rate.md)
NUMERIC_SLACK = 0.02

#: Arbitration statuses (docs/results.md ``arbiter.status``)
AGREES = "agrees"  # the server matches the simulated served wiring: the static verdict stands
MATCHED = "matched"  # the server matches one other candidate: the verdict follows it
AMBIGUOUS = "ambiguous"  # several candidates match: the closest decides
UNMATCHED = "unmatched"  # no candidate matches: the verdict follows the server's own figure
SERVER_FAILED = "server_failed"  # the server failed on the audited requests
NOT_COMPARABLE = "not_comparable"  # the server's figures do not compare with the simulation (drafting, traffic)
DECIDES = (MATCHED, AMBIGUOUS, UNMATCHED, SERVER_FAILED)


@dataclass(frozen=True)
class Tolerance:
    """How far the live figures may lie from a candidate's simulation: live - simulated in ``[-below, above]``."""

    accept_length: tuple[float, float]  # (below, above)
    per_position: tuple[float, float]
    why: str

    def to_json(self) -> dict:
        return {"accept_length": list(self.accept_length), "per_position": list(self.per_position), "why": self.why}


def live_tolerance(kind: str, requests: int, verifies: int | None, num_steps: int) -> Tolerance:
    """How far one reading's live figures may lie from a candidate's simulation: the engine's uncut last verify
    (above only) and :data:`NUMERIC_SLACK` either way (docs/accept-rate.md, "The live server as the arbiter")."""
    from ..engines.registry import engine

    v = max(verifies or 0, 1)
    uncut = engine(kind).last_verify_uncut
    uncut_al = requests * num_steps / v if uncut else 0.0
    uncut_pp = requests / v
    who = (f"{kind} counts each request's last verify uncut" if uncut else
           f"{kind}'s accept length is cut as simulated, its per-position counts the last verify uncut")
    why = (f"{who}: up to {uncut_al:.3f} accept length and {uncut_pp:.3f} per position above the simulation "
           f"({requests} requests, {verifies} verifies, {num_steps} drafts each), plus {NUMERIC_SLACK} either way "
           "for the engine's numerics")
    return Tolerance((NUMERIC_SLACK, uncut_al + NUMERIC_SLACK), (NUMERIC_SLACK, uncut_pp + NUMERIC_SLACK), why)


@dataclass(frozen=True)
class Candidate:
    """One wiring the server may be serving: states in concatenation order and the draft semantics run."""

    name: str  # "trained", "served", an engine convention name, "served, slot 2 fixed", ...
    kind: str  # "trained", "served", "engine", "slot_fix", "semantics"
    what: str  # one line: where it comes from
    states: tuple[State, ...]
    flags: DraftFlags
    failure: str | None = None  # the engine cannot run it: why (static prediction)
    code: str | None = None  # the finding the static audit gives that failure (docs/findings.md)
    also: tuple[str, ...] = ()  # other candidates with the same states and semantics

    @property
    def label(self) -> str:
        return " = ".join((self.name,) + self.also)


@dataclass(frozen=True)
class Scored:
    """A candidate and how its simulation compares with the server."""

    candidate: Candidate
    accept_length: float | None = None
    per_position: tuple[float, ...] = ()
    matches: bool = False
    distance: float | None = None  # the largest |live - simulated| over accept length and positions, in bounds

    def to_json(self) -> dict:
        c = self.candidate
        return {"name": c.name, "also": list(c.also), "kind": c.kind, "what": c.what,
                "states": [s.label() for s in c.states], "draft_flags": c.flags.to_json(), "failure": c.failure,
                "code": c.code, "accept_length": self.accept_length, "per_position": list(self.per_position),
                "matches": self.matches, "distance": self.distance}


@dataclass(frozen=True)
class Arbitration:
    """What the live server says about the served wiring, and whether it decides the verdict."""

    status: str  # one of AGREES, MATCHED, AMBIGUOUS, UNMATCHED, SERVER_FAILED, NOT_COMPARABLE
    message: str
    tolerance: Tolerance | None = None
    candidates: tuple[Scored, ...] = ()
    matched: tuple[str, ...] = ()  # labels of the matching candidates, closest first
    chosen: str | None = None  # the candidate the verdict follows
    mismatch: bool | None = None  # the verdict it gives (None: it does not decide)
    server_failure: str | None = None
    predicted: tuple[str, ...] = ()  # server_failed: what the static audit of each candidate predicted
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def decides(self) -> bool:
        return self.status in DECIDES and self.mismatch is not None

    def to_json(self) -> dict:
        return {"status": self.status, "message": self.message, "decides": self.decides,
                "tolerance": self.tolerance.to_json() if self.tolerance else None,
                "candidates": [c.to_json() for c in self.candidates], "matched": list(self.matched),
                "chosen": self.chosen, "mismatch": self.mismatch, "server_failure": self.server_failure,
                "predicted": list(self.predicted), "notes": list(self.notes)}


# ----------------------------------------------------------------------------- candidates


def engine_variants(kind: str, draft_kind: str = FALLBACK) -> dict[str, Convention]:
    """The built-in engine conventions of a server's engine that serve ``draft_kind`` drafts (a name of
    :data:`eagle_audit.kinds.KINDS`; the conventions' ``draft_kinds`` say which they describe): EAGLE-3, ``vllm`` ->
    the V2 and the V1 runner's (``vllm``, ``vllm-v1``), ``sglang`` -> ``sglang``; DFlash, ``vllm`` ->
    ``vllm-dflash``, ``vllm-v1-dflash``, ``sglang`` -> ``sglang-dflash`` (a server says which engine it is, never
    which runner)."""
    return {n: c for n, c in builtin_conventions("engine").items()
            if (n == kind or n.startswith(kind + "-")) and draft_kind in c.draft_kinds}


def cannot_run(wiring: Wiring, aux: int, title: str = "EAGLE-3") -> tuple[str | None, str | None]:
    """Why a wiring cannot run the draft, and the static finding for it; (None, None) when it can: the one ladder
    of failures, read by `accept-rate` for its two sides and here for every candidate. ``title``: the draft kind's
    (whose capture the engine lacks)."""
    if wiring.unsupported:
        return f"no {title} capture for this architecture: {wiring.unsupported}", "ENGINE_UNSUPPORTED"
    if wiring.failure is not None:
        return f"the engine raises {wiring.failure.text()} ({wiring.failure.at})", "ENGINE_CRASH"
    if wiring.not_residual:
        return ("feeds " + "; ".join(f"index {k}: {what}" for k, what in wiring.not_residual)
                + " (not the residual stream: not simulated)"), "NOT_RESIDUAL_STREAM"
    if len(wiring.states) != aux:
        said = f"the engine captures {len(wiring.states)} state(s) for a {aux}-slot fc: it fails at the first draft forward"
        if wiring.dropped:
            return f"ids {list(wiring.dropped)} are never captured; {said}", "UNREACHABLE_LAYER"
        return said, "AUX_COUNT_MISMATCH"
    return None, None


def _side(name: str, kind: str, what: str, side: SideWiring, aux: int, title: str = "EAGLE-3") -> Candidate:
    failure, code = cannot_run(side.wiring, aux, title)
    return Candidate(name, kind, what, side.states, side.flags, failure, code)


def _ids_text(w: Wiring) -> str:
    ids = "-" if w.ids is None else list(w.ids)
    return f"ids {ids} ({w.ids_source}) -> {', '.join(s.label() for s in w.states) or 'nothing'}"


def build_candidates(config: Mapping[str, Any], architecture: str, num_layers: int, res: Resolution, engine_name: str,
                     server_kind: str, aux: int, draft_kind: str = FALLBACK) -> tuple[Candidate, ...]:
    """Every wiring the server may be serving (module docstring), deduplicated, trained first. ``draft_kind``: the
    audited draft's kind (:mod:`eagle_audit.kinds`): the engine variants are those serving it; a block draft runs
    one forward whatever the draft flags, so it has no "trained semantics" candidate."""
    dk = kind_of(draft_kind)
    tr, sv = res.trained, res.served
    out = [_side("trained", "trained", f"the trained wiring ({tr.title})", tr, aux, dk.title),
           _side("served", "served", f"{sv.title}: {_ids_text(sv.wiring)}", sv, aux, dk.title)]
    for name, conv in engine_variants(server_kind, dk.name).items():
        if name == engine_name:
            continue
        side = side_of(conv, config, architecture, num_layers)
        out.append(_side(name, "engine", f"{side.title}: {_ids_text(side.wiring)}", side, aux, dk.title))
    if len(tr.states) == len(sv.states) == aux:
        for i, (t, s) in enumerate(zip(tr.states, sv.states)):
            if t != s:
                fixed = tuple(t if j == i else x for j, x in enumerate(sv.states))
                out.append(Candidate(f"served, slot {i} fixed", "slot_fix",
                                     f"the static guess with slot {i} fed {t.label()} instead of {s.label()}",
                                     fixed, sv.flags))
    flags_apply = network(dk).flags_apply  # a block draft: one forward whatever the flags
    if tr.flags != sv.flags and len(sv.states) == aux and flags_apply:
        out.append(Candidate("served, trained semantics", "semantics",
                             "the static guess's states run with the trained draft semantics", sv.states, tr.flags))
    merged: list[Candidate] = []
    for c in out:
        key = lambda x: (x.states, x.flags if flags_apply else None, x.failure)  # noqa: E731  (flags run alike)
        same = next((i for i, m in enumerate(merged) if key(m) == key(c)), None)
        if same is None:
            merged.append(c)
        else:
            m = merged[same]
            merged[same] = Candidate(m.name, m.kind, m.what, m.states, m.flags, m.failure, m.code, m.also + (c.name,))
    return tuple(merged)


def candidate_states(cands: Sequence[Candidate]) -> set[State]:
    return {s for c in cands if c.failure is None for s in c.states}


# ----------------------------------------------------------------------------- arbitration


def score(cand: Candidate, stats, live_al: float, live_pp: Sequence[float], tol: Tolerance) -> Scored:
    """``stats``: the candidate's simulation (AcceptStats) or None (not simulated)."""
    if stats is None or stats.accept_length is None:
        return Scored(cand)
    d_al = live_al - stats.accept_length
    diffs = [(d_al, tol.accept_length)]
    diffs += [(lp - sp, tol.per_position) for lp, sp in zip(live_pp, stats.per_position)]
    ok = all(-below <= d <= above for d, (below, above) in diffs)
    dist = max(abs(d) for d, _ in diffs)
    return Scored(cand, stats.accept_length, tuple(stats.per_position), ok, dist)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def merge_equal(scored: Sequence[Scored]) -> tuple[Scored, ...]:
    """Candidates whose simulations on these requests are identical (accept length and every position) are one:
    the server cannot tell them apart (for example the trained wiring and an engine variant that feeds it with
    an equivalent draft class). The first keeps its place, the others' names go to ``also``."""
    out: list[Scored] = []
    for s in scored:
        same = next((i for i, m in enumerate(out) if s.accept_length is not None
                     and (m.accept_length, m.per_position) == (s.accept_length, s.per_position)), None)
        if same is None:
            out.append(s)
            continue
        m = out[same]
        c = m.candidate
        merged = Candidate(c.name, c.kind, c.what, c.states, c.flags, c.failure, c.code,
                           c.also + (s.candidate.name,) + s.candidate.also)
        out[same] = Scored(merged, m.accept_length, m.per_position, m.matches, m.distance)
    return tuple(out)


def arbitrate(scored: Sequence[Scored], live_al: float, trained_al: float | None, tolerance: float, tol: Tolerance,
              continuations_equal: int | None, requests: int) -> Arbitration:
    """The arbitration over simulated candidates (``scored``, trained first, the static guess second)."""
    scored = merge_equal(scored)
    served = next(s for s in scored if s.candidate.kind == "served" or "served" in s.candidate.also)
    if served.matches:
        return Arbitration(AGREES, f"the server's accept length {_fmt(live_al)} matches the simulated served wiring "
                           f"({served.candidate.label}: {_fmt(served.accept_length)})", tol, tuple(scored),
                           (served.candidate.label,), served.candidate.label)
    matched = sorted((s for s in scored if s.matches), key=lambda s: s.distance)
    notes = []
    if continuations_equal is not None and continuations_equal < requests:
        notes.append(f"{continuations_equal} of {requests} served outputs equal the greedy continuation computed here: "
                     "the server's model or numerics differ, so its acceptance is over other text")
    static = (f"the simulated served wiring ({served.candidate.what}) gives {_fmt(served.accept_length)}"
              if served.accept_length is not None else
              f"the static guess ({served.candidate.what}) cannot run ({served.candidate.failure})")
    if not matched:
        mismatch = None if trained_al is None else trained_al - live_al > tolerance
        return Arbitration(UNMATCHED, f"the server measured {_fmt(live_al)}; no candidate wiring matches it ({static}; "
                           "trained, the engine variants and the single-slot fixes simulated): the server runs other "
                           "numerics, another draft or another target than this audit assumes; the verdict follows the "
                           f"server's own figure against the trained {_fmt(trained_al)}", tol, tuple(scored), (),
                           None, mismatch, notes=tuple(notes))
    best = matched[0]
    mismatch = None if trained_al is None else trained_al - best.accept_length > tolerance
    status = MATCHED if len(matched) == 1 else AMBIGUOUS
    others = "" if len(matched) == 1 else (" (also within the tolerance: " + "; ".join(
        f"{s.candidate.label} {_fmt(s.accept_length)}" for s in matched[1:]) + "; the closest decides)")
    msg = (f"the server measured {_fmt(live_al)} where {static}; the server's acceptance matches "
           f"{best.candidate.label} ({', '.join(x.label() for x in best.candidate.states)}; {best.candidate.what}): "
           f"simulated {_fmt(best.accept_length)}{others}. The verdict follows the server's wiring")
    return Arbitration(status, msg, tol, tuple(scored), tuple(s.candidate.label for s in matched), best.candidate.label,
                       mismatch, notes=tuple(notes))


def server_failed(error: str, cands: Sequence[Candidate], served_al: float | None) -> Arbitration:
    """The server failed on the audited requests. Where an engine rule predicts the failure (a candidate wiring
    fails statically), it cannot serve the draft: a mismatch, with what each candidate was predicted to do; where
    none does, :class:`~eagle_audit.errors.CouldNotMeasure` (exit 2): the server's failure, not the draft's."""
    predicted = []
    failing = []
    for c in cands:
        if c.kind not in ("served", "engine"):
            continue
        names = c.label
        if c.failure is not None:
            predicted.append(f"{names}: {c.code}: {c.failure}")
            failing.append(names)
        else:
            extra = f", simulated {_fmt(served_al)}" if c.kind == "served" and served_al is not None else ""
            predicted.append(f"{names}: serves {', '.join(s.label() for s in c.states)}{extra}")
    if not failing:  # the server's own failure (overloaded, broken, out of memory): not the draft's
        from ..errors import CouldNotMeasure

        raise CouldNotMeasure(f"could not measure: the server failed on the audited requests ({error}), and no "
                              f"engine rule eagle-audit knows predicts that for this draft (the static audit: "
                              f"{'; '.join(predicted)}): a failure of the server, not a verdict on the draft",
                              hint="see the server's log, and run again once it serves")
    agree = f"; the failure is what {' and '.join(failing)} predicts"
    return Arbitration(SERVER_FAILED, f"the server failed on the audited requests ({error}): it does not serve this "
                       f"draft{agree}", mismatch=True, server_failure=error, predicted=tuple(predicted),
                       candidates=tuple(Scored(c) for c in cands))
