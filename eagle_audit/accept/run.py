"""The `accept-rate` run, end to end: resolve the trained and served wirings with the same code as
`layers` (:func:`eagle_audit.inputs.prepare`: draft, engine rules, target, both wirings), simulate
acceptance under each, attribute the loss slot by slot, and optionally run the live loop and read a
server. Returns a frozen :class:`AcceptResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping


from ..conventions import Wiring
from ..errors import AuditError, BadCheckpoint, BadOption, param, shown
from ..inputs import AuditInputs, prepare, read_inputs
from ..provenance import provenance
from ..states import State
from .limits import MAX_NEW_TOKENS, MAX_NUM_STEPS, MAX_TOPK
from .live import LiveResult, run_live
from ..runtime.eagle3 import DraftFlags
from ..draft.family import draft_family
from ..runtime.load import check_runnable, load_draft, network
from ..engines.http import ServerFailed
from ..engines.options import Server, detect
from ..engines.reading import ServerReading
from ..engines.registry import engine as engine_of, read_server
from .arbiter import (Arbitration, arbitrate, build_candidates, candidate_states, cannot_run, live_tolerance, score,
                      server_failed)
from .family import ACCEPT_FAMILIES
from ..simulate.accept import AcceptStats, capture_cases, make_cases
from ..simulate.tree import EXACT_ANCESTOR, KV_BY_SLOT, max_tree_nodes
from ..simulate.wiring import simulate, simulation

ACCEPT_SCHEMA = "eagle-audit/accept-rate/1"


@dataclass(frozen=True)
class Settings:
    num_steps: int
    topk: int
    num_draft_tokens: int
    max_new_tokens: int
    mode: str = "chain"
    notes: tuple[str, ...] = ()
    tree_attention: str | None = None  # tree mode: which draft keys a node attends to (simulate/tree.py)

    def to_json(self) -> dict:
        return {"num_steps": self.num_steps, "topk": self.topk, "num_draft_tokens": self.num_draft_tokens,
                "max_new_tokens": self.max_new_tokens, "mode": self.mode, "tree_attention": self.tree_attention,
                "notes": list(self.notes)}


def make_settings(num_steps: int, topk: int, num_draft_tokens: int | None, max_new_tokens: int) -> Settings:
    """SGLang's rules (arg_groups/speculative_hook.py @v0.5.23): topk == 1 forces num_draft_tokens to
    num_steps + 1 (chain); topk > 1 (tree) needs num_draft_tokens - 1 <= topk + (num_steps - 1) * topk**2
    (eagle_utils.py ``organize_draft_results`` runs ``torch.topk`` over that many candidates)."""
    for name, value, lo, hi in (("num_steps", num_steps, 1, MAX_NUM_STEPS), ("topk", topk, 1, MAX_TOPK),
                                ("max_new_tokens", max_new_tokens, 2, MAX_NEW_TOKENS)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise BadOption(f"{param(name)}: must be an integer in {lo}..{hi}, got {shown(value)}")
    if topk > 1:
        if num_draft_tokens is None:
            raise BadOption(f"{param('topk', topk)}: tree drafts need {param('num_draft_tokens')} (SGLang "
                            "--speculative-num-draft-tokens)")
        cap = max_tree_nodes(num_steps, topk)
        if isinstance(num_draft_tokens, bool) or not isinstance(num_draft_tokens, int) or not 2 <= num_draft_tokens <= cap + 1:
            raise BadOption(f"{param('num_draft_tokens')} {shown(num_draft_tokens)}: with {param('topk', topk)} and "
                            f"{param('num_steps', num_steps)} SGLang needs 2 <= num_draft_tokens and num_draft_tokens - 1 "
                            f"<= topk + (num_steps - 1) * topk^2 = {cap}")
        note = (f"tree: {num_steps} levels of topk {topk}, pruned to the {num_draft_tokens - 1} best of {cap} "
                f"candidates by cumulative draft probability (SGLang select_top_k_tokens / organize_draft_results)")
        return Settings(num_steps, topk, num_draft_tokens, max_new_tokens, "tree", (note,))
    notes = []
    if num_draft_tokens is not None and num_draft_tokens != num_steps + 1:
        notes.append(f"num_draft_tokens {num_draft_tokens} ignored: with topk == 1 SGLang forces num_draft_tokens "
                     f"to num_steps + 1 = {num_steps + 1}")
    else:
        notes.append(f"topk == 1: num_draft_tokens = num_steps + 1 = {num_steps + 1} (SGLang forces it)")
    return Settings(num_steps, topk, num_steps + 1, max_new_tokens, "chain", tuple(notes))


def with_tree_attention(settings: Settings, engine) -> Settings:
    """Tree settings with the attention mode the engine's convention declares (``tree_drafts``): SGLang
    reads draft keys by slot, an engine that drafts chains only cannot serve a tree (AuditError), an
    undeclared engine is simulated with exact-ancestor attention (EAGLE's reference), and says so."""
    if settings.mode != "tree":
        return settings
    td = engine.tree_drafts
    who = f"{engine.title} {engine.version}"
    if td is None:
        mode, note = EXACT_ANCESTOR, (f"tree attention: {who} declares no tree_drafts; nodes attend to their exact "
                                      f"ancestors' keys (EAGLE reference eagle/model/cnets.py topK_genrate)")
    elif td.attention is None:
        raise AuditError(f"topk {settings.topk}: {who} drafts chains only ({td.source}); a tree (topk > 1) is "
                         f"not served by it")
    else:
        mode, note = td.attention, f"tree attention: {td.attention}, as {who} drafts ({td.source})"
    assert mode in (KV_BY_SLOT, EXACT_ANCESTOR)
    return replace(settings, tree_attention=mode, notes=settings.notes + (note,))


@dataclass(frozen=True)
class AcceptOptions(AuditInputs):
    num_steps: int = 3
    topk: int = 1
    num_draft_tokens: int | None = None
    max_new_tokens: int = 64
    tolerance: float = 0.1
    live: bool = False
    server: Server | None = None  # the server under test, serving the draft: its accept length is read (a URL: defaults)
    prompt_ids: tuple[tuple[int, ...], ...] | None = None  # token ids given directly (library use, tokenizer-less targets)
    gen_batch: int = 16  # prompts the target continues together (1: one at a time; --live always runs one at a time)
    device_map: str | None = None  # "auto": the target split over the visible GPUs (accelerate)

    def __post_init__(self):
        if isinstance(self.server, str):  # a bare URL: the default kind, key and deadlines
            object.__setattr__(self, "server", Server(self.server))


@dataclass(frozen=True)
class Attribution:
    """The served wiring with one mis-wired slot corrected alone."""

    slot: int
    trained: State
    served: State
    accept_length: float | None

    def to_json(self) -> dict:
        return {"slot": self.slot, "trained": self.trained.label(), "served": self.served.label(),
                "accept_length": self.accept_length}


@dataclass(frozen=True)
class AcceptResult:
    verdict: str  # "match", "mismatch"
    target: Mapping[str, Any]
    draft: Mapping[str, Any]
    trained: Wiring
    served: Wiring
    settings: Settings
    stats: Mapping[str, AcceptStats | None]  # "trained", "served"
    attribution: tuple[Attribution, ...]
    flags: Mapping[str, DraftFlags]
    tolerance: float
    live: LiveResult | None
    server: ServerReading | None
    provenance: Mapping[str, Any]
    failures: Mapping[str, str] = field(default_factory=dict)  # wiring -> why it cannot run
    arbiter: Arbitration | None = None  # --server: what the live server says about the served wiring (accept/arbiter.py)

    def al(self, name: str) -> float | None:
        s = self.stats.get(name)
        return s.accept_length if s is not None else None

    def to_json(self) -> dict:
        hist = {k: list(v.histogram) for k, v in self.stats.items() if v is not None}
        return {
            "schema": ACCEPT_SCHEMA, "verdict": self.verdict, "target": dict(self.target), "draft": dict(self.draft),
            "wirings": {"trained": self.trained.to_json(), "served": self.served.to_json()},
            "accept_length": {"trained": self.al("trained"), "served": self.al("served")},
            "request_accept_length": {k: (v.request_accept_length if v else None) for k, v in self.stats.items()},
            "per_position": {k: list(v.per_position) for k, v in self.stats.items() if v is not None},
            "histogram": hist, "verify_steps": {k: v.verify_steps for k, v in self.stats.items() if v is not None},
            "attribution": [a.to_json() for a in self.attribution], "tolerance": self.tolerance,
            "failures": dict(self.failures), "draft_flags": {k: v.to_json() for k, v in self.flags.items()},
            "settings": self.settings.to_json(), "live": self.live.to_json() if self.live else None,
            "server": self.server.to_json() if self.server else None,
            "arbiter": self.arbiter.to_json() if self.arbiter else None, "provenance": dict(self.provenance),
        }


def _semantics(f: DraftFlags) -> str:
    """A one-line account of how a side runs the draft."""
    parts = ["fc only when widths differ" if f.fc_skip_at_hidden_width else "fc always on target states"]
    parts += [name for name in ("norm_before_fc", "fc_norm", "norm_before_residual") if getattr(f, name)]
    parts.append("final norm before lm_head" if f.head_norm else "no final norm before lm_head")
    parts.append("normed hidden carried" if f.norm_output else "pre-norm hidden carried")
    return ", ".join(parts)


def run_accept(opts: AcceptOptions, status: Callable[[str], None] | None = None,
               progress: Callable[[int, int], None] | None = None, source=None) -> AcceptResult:
    """``source``: an open state source to take the target's states and continuations from (else the one
    :func:`eagle_audit.source.states_from` names, asked once, before the target loads, and opened by ``prepare``).
    What the draft's family runs is asked of the families' registries (its network, its simulation, what accept-rate
    refuses of it), and why a side cannot run of :func:`.arbiter.cannot_run`, the ladder the arbiter's candidates
    share."""
    say = status or (lambda m: None)
    settings = make_settings(opts.num_steps, opts.topk, opts.num_draft_tokens, opts.max_new_tokens)
    if not isinstance(opts.tolerance, (int, float)) or not math.isfinite(opts.tolerance) or opts.tolerance < 0:
        raise BadOption(f"{param('tolerance')}: must be a finite number >= 0, got {shown(opts.tolerance)}")
    if opts.live and settings.topk > 1:
        raise BadOption(f"{param('live')} runs chain mode only ({param('topk', 1)}); {param('topk', settings.topk)} "
                        "is simulated without it")
    notes: list[str] = []
    spec, engine = read_inputs(opts, notes)
    kind = spec.draft_kind
    from ..draft.block import require_simulated

    require_simulated(spec, "accept-rate")
    ACCEPT_FAMILIES.of(kind).refuse(kind, opts.live, settings.topk)
    check_runnable(spec)  # a draft its family's network cannot run: one line, before any loading
    flags_apply = network(kind).flags_apply  # else one forward whatever the flags: one model for every side
    settings = with_tree_attention(settings, engine)
    from ..prompts import load_prompts, token_ids

    prompts = None if opts.prompt_ids is not None else load_prompts(opts.prompts, opts.max_prompts)
    server_opts = None
    if opts.server is not None:  # checked before the target loads: a wrong URL or kind fails in seconds
        server_opts = replace(opts.server, kind=detect(opts.server))

    if isinstance(opts.gen_batch, bool) or not isinstance(opts.gen_batch, int) or opts.gen_batch < 1:
        raise BadOption(f"{param('gen_batch')}: must be an integer >= 1, got {shown(opts.gen_batch)}")
    request = None
    if source is None:  # where the states come from, decided once (a refused --states-from fails before loading)
        from ..source import states_from

        request = states_from(opts, server_only=True, device_map=opts.device_map)
    p = prepare(opts, device_map=opts.device_map, status=say, notes=notes, inputs=(spec, engine), source=source,
                request=request)
    target, info, res, trainer, aux = p.target, p.info, p.resolution, p.trainer, p.aux
    src = getattr(target, "spec", None)
    if src is not None and src.backend == "server":  # which states came from where (provenance.source: details)
        notes.append(f"target states and greedy continuations: from the {src.origin}; the draft runs here "
                     f"({opts.device}) on them")
    trained, served = res.trained.wiring, res.served.wiring
    flags = {"trained": res.trained.flags, "served": res.served.flags}
    models = {"trained": load_draft(spec, target, flags["trained"])}
    unrunnable = None  # the served draft class cannot be run (or loaded): one line, and the served side is not simulated
    served_conv = res.served.convention
    if served_conv is not None and (served_conv.base or served_conv).draft_classes and served_conv.draft_class is None:
        unrunnable = served_conv.draft_class_how
    try:
        same = flags["served"] == flags["trained"] or unrunnable or not flags_apply
        models["served"] = models["trained"] if same else load_draft(spec, target, flags["served"])
    except BadCheckpoint as e:
        unrunnable, models["served"] = e.message, models["trained"]
    for side, model in models.items():
        notes.extend(f"approximated ({side} draft): {n}" for n in model.arch.notes)
    rounds = simulation(models["trained"])
    if rounds.steps is not None:  # the draft fixes its drafts a verify (a block draft: its block)
        b = rounds.steps(models["trained"])
        settings = replace(settings, num_steps=b, num_draft_tokens=b + 1, mode=rounds.mode, notes=(
            f"{rounds.note(models['trained'])}; the draft's {param('num_steps')} and tree settings do not apply",))
    if flags["served"] != flags["trained"] and flags_apply:
        notes.append(f"draft semantics differ: trained runs {_semantics(flags['trained'])}; served runs "
                     f"{_semantics(flags['served'])}")

    prompt_ids = token_ids(opts.prompt_ids, prompts, target.tokenizer, opts.max_tokens)
    say(f"target generates greedy continuations of {len(prompt_ids)} prompts")
    # --live compares against the target alone on one prompt at a time, so its baseline is generated that way
    cases, target_seconds = make_cases(target, prompt_ids, settings.max_new_tokens, progress,
                                       1 if opts.live else opts.gen_batch)
    wirings = {"trained": trained, "served": served}
    failures = {}
    for name, wiring in wirings.items():
        why = f"not simulated: {unrunnable}" if name == "served" and unrunnable else cannot_run(wiring, aux, kind.title)[0]
        if why is not None:
            failures[name] = why
    fixes = []
    if not failures:
        fixes = [(i, t, s) for i, (t, s) in enumerate(zip(trained.states, served.states)) if t != s]
    candidates = ()
    if server_opts is not None:  # the wirings the live server may be serving (accept/arbiter.py), captured in the same pass
        candidates = build_candidates(spec.config, info.architecture, info.num_layers, res, engine.name,
                                      server_opts.kind, aux, spec.kind)
    union = set(trained.states) | set(served.states) | candidate_states(candidates)
    say(f"one teacher-forced pass per prompt capturing {len(union)} states")
    caps = capture_cases(target, cases, tuple(union))
    done: dict[tuple, AcceptStats] = {}

    def sim(model, states) -> AcceptStats:  # the same model on the same states has the same figures: run once
        key = (id(model), tuple(states))
        if key not in done:
            done[key] = simulate(model, cases, caps, tuple(states), settings.num_steps, settings.topk,
                                 settings.num_draft_tokens, settings.tree_attention or KV_BY_SLOT)
        return done[key]

    stats: dict[str, AcceptStats | None] = {name: None if name in failures else sim(models[name], w.states)
                                            for name, w in wirings.items()}
    attribution = []
    for i, t, s in fixes:
        fixed = tuple(t if j == i else x for j, x in enumerate(served.states))
        attribution.append(Attribution(i, t, s, sim(models["served"], fixed).accept_length))
    live = None
    if opts.live:
        say("live speculative decoding (served wiring)")
        if "served" in failures:
            raise AuditError(f"{param('live')}: the served wiring cannot run ({failures['served']})")
        live = run_live(target, models["served"], cases, served.states, settings.num_steps, settings.max_new_tokens,
                        target_seconds, progress)
    server = arbiter = None
    if server_opts is not None:
        say(f"reading accept length from the {server_opts.kind} server {server_opts.url}")
        try:
            server = read_server(server_opts, prompt_ids, settings.max_new_tokens,
                                 expected=[list(c.continuation) for c in cases], progress=progress)
        except ServerFailed as e:  # the engine raised on the audited requests: it does not serve this draft
            arbiter = server_failed(e.message, candidates, stats["served"].accept_length if stats["served"] else None)
        if server is not None:
            differs = engine_of(server.kind).drafting_differs(server.drafting, settings.num_steps, settings.topk,
                                                           settings.num_draft_tokens, block=draft_family(kind).blocks)
            if differs:
                server = replace(server, notes=server.notes + (differs,))
                notes.append(f"server: {differs}")
            by_flags = {flags["trained"]: models["trained"]}
            if not unrunnable:
                by_flags.setdefault(flags["served"], models["served"])
            one = None if flags_apply else models["trained"]  # one forward whatever the flags: every candidate runs it
            arbiter = _arbitrate(server, differs, candidates, stats, by_flags, spec, target, cases, caps, settings,
                                 opts.tolerance, say, one)
    tr, sv = stats["trained"], stats["served"]
    bad = sv is None or (tr is not None and tr.accept_length is not None and sv.accept_length is not None
                         and tr.accept_length - sv.accept_length > opts.tolerance)
    if arbiter is not None and arbiter.decides:  # the live server's wiring, not the static guess
        bad = arbiter.mismatch
    prov = provenance(command=opts.command, engine=engine, trainer=trainer, target=target, prompts=opts.prompts,
                      num_prompts=len(prompt_ids), tokens=sum(len(c.prompt) + len(c.continuation) for c in cases),
                      notes=notes + list(settings.notes))
    return AcceptResult("mismatch" if bad else "match", info.to_json(), spec.to_json(), trained, served, settings,
                        stats, tuple(attribution), flags, opts.tolerance, live, server, prov, failures, arbiter)


def _arbitrate(server: ServerReading, differs: str | None, candidates, stats, models: dict, spec, target, cases, caps,
               settings: Settings, tolerance: float, say, one=None) -> Arbitration:
    """The live server's reading against the candidate wirings (accept/arbiter.py), simulated on the same cases
    only when it disagrees with the simulated served one. ``models``: the draft models loaded so far, by flags;
    ``one``: the model every candidate runs (a family whose network the flags do not change), else None."""
    from .arbiter import NOT_COMPARABLE

    why = (differs or ("other clients' traffic moved the server's counters" if server.other_traffic else None)
           or (None if server.accept_length is not None else "the server reported no accept length")
           or ("tree drafts: the candidates are compared in chain and block mode only" if settings.mode == "tree"
               else None))
    if why:
        return Arbitration(NOT_COMPARABLE, f"the server's figures are not compared with the candidates: {why}")
    tol = live_tolerance(server.kind, server.requests, server.verify_steps, settings.num_steps)
    live_al, live_pp = server.accept_length, server.per_position
    sims = {"trained": stats["trained"], "served": stats["served"]}
    served_c = next(c for c in candidates if c.kind == "served" or "served" in c.also)  # merged: the trained one
    if score(served_c, sims["served"], live_al, live_pp, tol).matches:
        scored = [score(c, sims.get(c.kind), live_al, live_pp, tol) for c in candidates
                  if c.kind in ("trained", "served")]
    else:
        say(f"the server disagrees with the simulated served wiring: simulating {len(candidates)} candidate wirings")
        scored = []
        for c in candidates:
            st = sims.get(c.kind) if c.kind in ("trained", "served") else None
            if st is None and c.failure is None:
                model = one if one is not None else models.get(c.flags)
                if model is None:
                    try:
                        model = models[c.flags] = load_draft(spec, target, c.flags)
                    except BadCheckpoint:
                        model = None
                if model is not None:
                    st = simulate(model, cases, caps, c.states, settings.num_steps, settings.topk,
                                  settings.num_draft_tokens, settings.tree_attention or KV_BY_SLOT)
            scored.append(score(c, st, live_al, live_pp, tol))
    return arbitrate(scored, live_al, sims["trained"].accept_length if sims["trained"] else None, tolerance, tol,
                     server.continuations_equal, server.requests)
