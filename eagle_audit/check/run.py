"""``check``, end to end: the static audit, then (weights present) the captured comparison, the fingerprint
where the trained wiring rests on an assumption (or always with ``fingerprint``), and the accept-rate cost,
each stage taking the target, prompts, captures and continuations of the ones before it from one state
source (:mod:`eagle_audit.source`: one load, no teacher-forced forward or continuation twice).

Assumptions, named:

* A target directory with a config and no weight files (as :func:`eagle_audit.target.has_weights`
  names them) has no weights: the stages after the static one say so and do not run, unless ``--server``
  gives every state (the server backend).
* The captured comparison supersedes the static prediction where it ran (both diagnose the same wiring; the
  captured one also measured it); the static findings stay in its section.
* Where the fingerprint reads a trained wiring other than the declared one (``TRAINED_WIRING_DIFFERS``), the
  accept-rate stage costs the wiring the weights say (its states, the declared trainer's draft flags), and the
  fix is the fingerprint's.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

from ..errors import AuditError, param
from ..accept.gate import Gate, failures
from ..inputs import AuditInputs
from ..resolution import MEASURED
from .result import STAGES, CheckResult, Problem, Stage, Verdict


@dataclass(frozen=True)
class CheckOptions(AuditInputs):
    static: bool = False  # the static audit only (no weights loaded)
    fingerprint: bool = False  # always run the fingerprint (else: when the trained wiring rests on an assumption)
    num_steps: int = 3
    topk: int = 1
    num_draft_tokens: int | None = None
    max_new_tokens: int = 64
    tolerance: float = 0.1
    gen_batch: int = 16
    device_map: str | None = None
    fail_under: float | None = None
    fail_under_positions: tuple[float, ...] = ()
    # the served stage's server is AuditInputs.states_server: a capture-only server launched with the serving line for
    # this draft; where the states come from (its `use`, --states-from) is decided by source.states_from, as everywhere


def no_weights(target: str) -> str | None:
    """Why ``target`` has no weights to load (None: it has, or it is a file / hub id: loading will tell)."""
    from ..target import WEIGHT_FILES, has_weights  # the served backend's rule: one place

    p = Path(os.path.expanduser(target))
    if p.is_dir() and (p / "config.json").is_file() and not has_weights(str(p)):
        return f"{target} holds a config and no weights (none of {', '.join(WEIGHT_FILES)}, model-*.safetensors, *.gguf)"
    return None


def _base(opts: CheckOptions) -> dict:
    return {f.name: getattr(opts, f.name) for f in fields(AuditInputs)}


def _timed(name: str, run: Callable[[], object]) -> Stage:
    t0 = time.perf_counter()
    try:
        result = run()
    except AuditError as e:  # a stage that cannot run says why; the others go on
        return Stage(name, False, f"could not run: {e.message}", None, time.perf_counter() - t0)
    return Stage(name, True, None, result, time.perf_counter() - t0)


def _skip(name: str, why: str) -> Stage:
    return Stage(name, False, why)


def run_check(opts: CheckOptions, status: Callable[[str], None] | None = None,
              progress: Callable[[int, int], None] | None = None) -> CheckResult:
    from ..layers.run import LayersOptions, run_layers  # torch-free: a static check never imports torch

    say = status or (lambda m: None)
    gate = Gate(opts.fail_under, tuple(opts.fail_under_positions))
    gate.fits(opts.num_steps)
    base = _base(opts)
    from ..source import states_from

    # where the states come from, decided once (source.states_from, --states-from): from the server, every state
    # (the server as the target); else the local weights, and the served stage compares the server's with them
    request = None if opts.static else states_from(opts, device_map=opts.device_map)
    from_server = request is not None and request.server is not None
    base["states_server"] = opts.states_server if from_server else None  # else the served stage alone asks it
    weights = not opts.static and (from_server or no_weights(os.fspath(opts.target)) is None)
    if weights:  # bad settings or a bad prompts file fail before anything loads
        from ..accept.run import make_settings
        from ..prompts import load_prompts

        make_settings(opts.num_steps, opts.topk, opts.num_draft_tokens, opts.max_new_tokens)
        load_prompts(opts.prompts, opts.max_prompts)
        from ..inputs import check_tokenizer

        check_tokenizer(opts)  # a target that cannot encode the prompts: said before its weights load
        if opts.states_server is not None:  # a server named and unreachable: said now, not after the target loads
            from ..engines.options import probe

            probe(opts.states_server)
    stages: dict[str, Stage] = {}
    if opts.trainer == MEASURED:
        stages["static"] = _skip("static", f"trainer {MEASURED}: the trained wiring is measured on the weights; "
                                 "the configs alone predict nothing")
    else:
        say("stage static: the configs and the engine's rules")
        t0 = time.perf_counter()
        stages["static"] = Stage("static", True, None, run_layers(LayersOptions(**base, static=True), say),
                                 time.perf_counter() - t0)
    why = (f"{param('static', True)}: the configs only" if opts.static
           else (None if from_server else no_weights(os.fspath(opts.target))))
    source = None
    if why is None:
        from ..source import open_source

        say(f"loading target {Path(opts.target).name or opts.target}")
        try:
            source = open_source(request, say)
        except AuditError as e:
            why = f"the target cannot be loaded: {e.message}"
    if source is None:
        for name in STAGES[1:]:
            stages[name] = _skip(name, f"needs the target's weights; {why}")
    else:
        from ..accept.run import AcceptOptions, run_accept
        from ..fingerprint.options import FingerprintOptions
        from ..fingerprint.run import run_fingerprint

        say("stage captured: the trained and served states on the target")
        stages["captured"] = _timed("captured", lambda: run_layers(
            LayersOptions(**base, device_map=opts.device_map), say, progress, source=source))
        stages["served"] = _served_stage(opts, source, stages["captured"], say)
        stages["fingerprint"] = _fingerprint_stage(opts, stages["captured"], source, say, progress,
                                                   FingerprintOptions, run_fingerprint)
        trained = _measured_trained(stages["fingerprint"])
        accept_base = {**base, "trained_boundaries": trained} if trained else base
        say("stage accept_rate: what the wiring costs in accept length")
        stages["accept_rate"] = _timed("accept_rate", lambda: run_accept(AcceptOptions(
            **accept_base, num_steps=opts.num_steps, topk=opts.topk, num_draft_tokens=opts.num_draft_tokens,
            max_new_tokens=opts.max_new_tokens, tolerance=opts.tolerance, gen_batch=opts.gen_batch,
            device_map=opts.device_map), say, progress, source=source))
    ordered = tuple(stages[n] for n in STAGES)
    verdict = combine(ordered, gate)
    src = {"spec": source.spec.to_json(), "counts": asdict(source.counts)} if source is not None else None
    from ..version import __version__

    prov = {"eagle_audit": __version__, "command": opts.command}
    return CheckResult(verdict, ordered, src, gate.to_json(), prov)


def _served_stage(opts, source, captured: Stage, say) -> Stage:
    if opts.states_server is None:
        return _skip("served", f"no {param('states_server')} given (a capture-only server: docs/server.md)")
    if source.spec.backend == "server":
        return _skip("served", f"every state came from the server ({source.spec.origin}): no local capture to "
                     "compare it with")
    if not captured.ran:
        return _skip("served", f"the captured stage did not run ({captured.why})")
    from ..prompts import encode, load_prompts
    from .served import run_served

    def run():
        ids = encode(load_prompts(opts.prompts, opts.max_prompts), source.tokenizer, opts.max_tokens)
        return run_served(opts, source, captured.result, ids, say)

    say("stage served: the states the running engine feeds")
    return _timed("served", run)


def _fingerprint_stage(opts, captured: Stage, source, say, progress, FingerprintOptions, run_fingerprint) -> Stage:
    if opts.trainer == MEASURED:
        return _skip("fingerprint", f"trainer {MEASURED}: the captured stage measured the trained wiring on the "
                     "draft's weights already")
    if not opts.fingerprint:
        hint = captured.result.suggestions if captured.result is not None else ()
        if not hint:
            return _skip("fingerprint", f"the trained wiring is given, not assumed ({param('fingerprint', True)} measures it anyway)"
                         if captured.ran else f"the captured stage did not run ({captured.why})")
    say("stage fingerprint: the trained wiring read off the draft's weights")
    tb = opts.trained_boundaries
    return _timed("fingerprint", lambda: run_fingerprint(FingerprintOptions(
        target=os.fspath(opts.target), draft=os.fspath(opts.draft), engine=opts.engine if opts.engine is None else os.fspath(opts.engine),
        trainer=opts.trainer, trained_boundaries=tb, trained_ids=opts.trained_ids, prompts=opts.prompts,
        max_prompts=opts.max_prompts, max_tokens=opts.max_tokens, max_new_tokens=opts.max_new_tokens,
        device=opts.device, dtype=opts.dtype, use_installed_engine=opts.use_installed_engine,
        command=opts.command, more_prompts=0), say, progress, source=source))  # the audit's prompts only: every
    # stage reads the same text (one capture per sequence); `fingerprint` itself may add a second round


def _measured_trained(fp: Stage):
    """The trained states the weights say, where they say other than the declared wiring (else None)."""
    r = fp.result
    if r is None or r.inferred is None or not any(f.code == "TRAINED_WIRING_DIFFERS" for f in r.errors):
        return None
    if r.confirmation is not None and r.confirmation.stands:  # the pick the confirmation judged, as the fix serves it
        return r.confirmation.wirings["measured"].states
    from ..fingerprint.claims import settled

    return settled(r, r.declared.states, r.served.states if r.served is not None else None)  # as the fingerprint's fix


#: findings only the weights raise: the fingerprint shows them whenever it raises them
OWN_FINDINGS = ("TRAINED_WIRING_DIFFERS", "REPRESENTATION_MISMATCH")


def fingerprint_shows(r, f) -> bool:
    """Whether the fingerprint's result ``r`` is evidence for its finding ``f`` (a fingerprint
    that left slot 0 undetermined was listed as showing EMBEDDING_COMPOSITION slot 0). Its own findings, and a slot's
    finding where the weights named that slot (not undetermined) and none of the states it admits is the one the
    engine feeds there. A finding without a slot (the config's: IDS_NOT_READ, ...) and a slot the weights do not
    determine come from the declared wiring, as in the other stages, not from the weights."""
    if f.code in OWN_FINDINGS:
        return True
    if f.slot is None or r.inferred is None or not 0 <= f.slot < len(r.slots):
        return False
    sl = r.slots[f.slot]
    served = r.served.states if r.served is not None else None
    if sl.undetermined or served is None or f.slot >= len(served):
        return False
    return served[f.slot] not in sl.admitted


def combine(stages: tuple[Stage, ...], gate: Gate) -> Verdict:
    by = {s.name: s for s in stages}
    layers = by["captured"] if by["captured"].ran else by["static"]
    shown: dict[tuple[str, int | None], list[str]] = {}
    what: dict[tuple[str, int | None], str] = {}
    for name in ("static", "captured", "served", "fingerprint"):
        st = by[name]
        if not st.ran:
            continue
        for f in st.result.errors:
            if name == "fingerprint" and not fingerprint_shows(st.result, f):
                continue  # the fingerprint computed it from the declared wiring, not from what the weights determine
            key = (f.code, f.slot)
            shown.setdefault(key, []).append(name)
            if key not in what or name in ("captured", "served"):  # measured words: cosines, the served slot
                what[key] = f.what
    keep = set()
    for name in (layers.name, "served", "fingerprint"):
        if by[name].ran:
            keep |= {(f.code, f.slot) for f in by[name].result.errors
                     if name != "fingerprint" or fingerprint_shows(by[name].result, f)}
    problems = tuple(Problem(c, s, what[(c, s)], tuple(shown[(c, s)])) for (c, s) in shown if (c, s) in keep)
    order = {n: i for i, n in enumerate(STAGES)}
    sure = max((n for p in problems for n in p.shown_by), key=order.__getitem__, default=None)
    acc = by["accept_rate"]
    cost = None
    if acc.ran:
        r = acc.result
        t, s = r.al("trained"), r.al("served")
        cost = {"trained": t, "served": s, "loss": (t - s) if t is not None and s is not None else None,
                "per_position": {k: list(v.per_position) for k, v in r.stats.items() if v is not None},
                "attribution": [a.to_json() for a in r.attribution], "failures": dict(r.failures)}
    fp = by["fingerprint"]
    fix, fix_from = None, None
    if fp.ran and _measured_trained(fp) is not None and fp.result.fix is not None:
        fix, fix_from = fp.result.fix, "fingerprint"
    elif layers.ran and layers.result.fix is not None:
        fix, fix_from = layers.result.fix, layers.name
    mismatch = bool(problems) or (acc.ran and acc.result.verdict == "mismatch")
    lines = tuple(failures(gate, acc.result.to_json() if acc.ran else None, acc.why))
    g, why = grade(by, problems)
    return Verdict("mismatch" if mismatch else "match", problems, sure, cost, fix, fix_from, lines, g, why)


def grade(by: dict, problems) -> tuple[str | None, str]:
    """How sure the verdict is, as a grade that follows the evidence: what showed the served states (read from the
    running engine, measured on the target's states, or predicted from the configs) and what the trained wiring
    rests on (given, or assumed from the layout; what the draft's weights said of it). A fingerprint that finds no
    wiring the weights fit makes it ``low`` whatever else ran: the trained wiring, and so the fix, is unknown."""
    fp, cap, served = by["fingerprint"], by["captured"], by["served"]
    layers = cap if cap.ran else by["static"]
    if not layers.ran:
        return None, ""
    if fp.ran and fp.result.inferred is None:
        return "low", ("the draft's weights fit no wiring of this target (fingerprint: no wiring makes the draft "
                       "agree with the target): what it was trained on is unknown, and so is the fix; is it the "
                       "draft for this target?")
    shown = {n for p in problems for n in p.shown_by}
    if served.ran and (not problems or "served" in shown):
        states = "read from the running engine"
    elif cap.ran:
        states = "measured on the target's states"
    else:
        states = "predicted from the configs and the engine's rules (no weights)"
    assumed = bool(layers.result.suggestions)
    if fp.ran:
        r = fp.result
        differs = any(f.code == "TRAINED_WIRING_DIFFERS" for f in r.errors)
        open_slots = [s.index for s in r.slots if s.undetermined]
        if differs:
            trained, sure = "the draft's weights read another trained wiring than the declared one", r.confidence == "high"
        else:
            agrees = next((c.agrees for c in r.claims if c.source == "declared"), None)
            trained = ("the draft's weights agree with the declared trained wiring" if agrees else
                       "the draft's weights do not tell the declared trained wiring" if agrees is None else
                       "the draft's weights do not agree with the declared trained wiring")
            sure = bool(agrees) and r.confidence == "high"
            if agrees and open_slots:
                trained += f" (slot {', '.join(map(str, open_slots))} undetermined)"
    elif assumed:
        trained, sure = "the trained wiring is assumed from the draft's layout (not measured)", False
    else:
        trained, sure = "the trained wiring is given", True
    if not cap.ran and not served.ran:
        return "low", f"the served states {states}; {trained}"
    return ("high" if sure else "medium"), f"the served states {states}; {trained}"
