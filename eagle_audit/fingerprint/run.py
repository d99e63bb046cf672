"""`fingerprint`, end to end (:func:`run_fingerprint`): load, search (:mod:`.infer`) on the search's prompts, a
second round where it is expected to settle a slot (:mod:`.second`), the claims and findings (:mod:`.claims`), and
the confirmation on other prompts in simulated accept length (:mod:`.confirm`), which every finding raised from the
weights must pass to stand."""

from __future__ import annotations

from typing import Callable

from ..draft.fit import check_target_fit
from ..draft.read import read_draft
from ..errors import AuditError, param
from ..provenance import engine_convention, provenance
from ..resolution import MEASURED, resolve_trained, side_of
from ..states import all_states
from .claims import compare, settled
from .confirm import confirm
from .corpus import prepare_corpus, reserve_states
from .defaults import ttt_steps_for
from .infer import infer_wiring, starting_points
from .options import FingerprintOptions
from .result import FingerprintResult
from .second import second_round


#: prompts continued together when the search's and the confirmation's text are generated at once (as
#: ``accept-rate``'s ``--gen-batch`` default)
JOINT_BATCH = 16


def run_fingerprint(opts: FingerprintOptions, status: Callable[[str], None] | None = None,
                    progress: Callable[[int, int], None] | None = None, source=None) -> FingerprintResult:
    """``source``: an open state source to take the target's states and continuations from (else one is
    opened)."""
    import time

    from ..prompts import encode
    from ..source import open_source, source_request, states_from

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
    prompts, reserve, confirming = split_prompts(opts)
    if source is None:
        states_from(opts, server_only=True)
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
                     "canary's slot was named wrong there, docs/fingerprint.md): prefer chat prompts")
    confirm_ids = ([list(p) for p in opts.confirm_prompt_ids] if opts.confirm_prompt_ids is not None
                   else encode(confirming, target.tokenizer, opts.max_tokens) if confirming else [])
    t0 = time.perf_counter()
    if confirm_ids and spec.kind == "eagle3":  # the search's and the confirmation's text continued together
        from ..source import as_source  # (one batched decode of 16 took 11.8 s of CPU, two of 8 17.4 s: the demo)

        reserve_states(target)
        say(f"target generates greedy continuations of {len(prompt_ids) + len(confirm_ids)} prompts (the search's and "
            "the confirmation's)")
        as_source(target).continuations(prompt_ids + confirm_ids, opts.max_new_tokens, batch=JOINT_BATCH)
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
    confirmation, standing, judged = None, None, inf
    if spec.kind != "eagle3":
        notes.append(f"{spec.kind} draft: no confirmation (accept-rate simulates EAGLE-3 drafts only); the findings rest "
                     "on the search's text alone")
    elif inf.states is not None:
        served_states = served.states if served is not None else None
        ids = confirm_ids
        if ids:
            judged, confirmation = confirm(target, spec, flags, inf, declared.states,
                                           settled(inf, declared.states, served_states), served_states, ids,
                                           opts.max_new_tokens, opts.confirm_steps, say)
            if confirmation.stands is not None:
                standing = (True, confirmation.gain_text()) if confirmation.stands else (False, confirmation.agrees_text())
        else:
            notes.append("confirmation: no prompts left for it (they follow the search's in the prompts file; "
                         f"{param('confirm_prompts')}): no slot is confirmed on other text, and no finding from the "
                         "weights can stand")
            if tuple(settled(inf, declared.states, served_states)) != tuple(declared.states):
                standing = (False, "not confirmed: no other prompts were left to judge the measured wiring in simulated "
                                   "accept length, so the declared wiring stands")
    # the findings and fix are about the search's pick (what the confirmation judged in accept length); the slots
    # reported are the re-judged ones (what two texts name)
    claims, findings, fix = compare(inf, spec, info, declared, trainer, served, standing)
    inf = judged
    verdict = "mismatch" if any(f.severity == "error" for f in findings) else "match"
    prov = provenance(command=opts.command, engine=engine, trainer=trainer, target=target, prompts=opts.prompts,
                      num_prompts=len(prompt_ids) + inf.search.get("second_round", {}).get("prompts", 0),
                      tokens=inf.scored_tokens, notes=notes)
    return FingerprintResult(verdict, inf.confidence, info.to_json(), spec.to_json(), inf.states, inf.best, inf.slots,
                             inf.top1, inf.logprob, inf.baseline_top1, inf.baseline_logprob, inf.scored_tokens,
                             inf.coverage, inf.agreement, claims, declared.wiring, served.wiring if served else None,
                             tuple(findings), fix, inf.search,
                             prov, confirmation)


def split_prompts(opts: FingerprintOptions):
    """The search's prompts, the second round's and the confirmation's, disjoint, in that order in the prompts
    source (``max_prompts``, ``more_prompts``, ``confirm_prompts``). Where the source holds fewer, the confirmation
    takes its prompts before the second round does (a finding from the weights needs it to stand). With
    ``prompt_ids`` (library use): (None, (), ()) (``confirm_prompt_ids`` gives the confirmation's)."""
    from ..prompts import load_prompts

    if opts.prompt_ids is not None:
        return None, (), ()
    more, conf = max(0, opts.more_prompts), max(0, opts.confirm_prompts)
    listed = load_prompts(opts.prompts, opts.max_prompts + more + conf)
    prompts, rest = listed[:opts.max_prompts], listed[opts.max_prompts:]
    take = min(conf, len(rest))
    return prompts, rest[:len(rest) - take][:more], rest[len(rest) - take:]
