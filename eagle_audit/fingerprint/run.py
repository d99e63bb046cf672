"""`fingerprint`, end to end (:func:`run_fingerprint`): load, search (:mod:`.infer`) on the search's prompts, a
second round where it is expected to settle a slot (:mod:`.second`), the claims and findings (:mod:`.claims`), and
the confirmation on other prompts in simulated accept length (:mod:`.confirm`), which every finding raised from the
weights must pass to stand."""

from __future__ import annotations

from typing import Callable

from ..errors import AuditError, param
from ..provenance import provenance
from ..resolution import MEASURED
from ..runtime.load import check_runnable
from ..states import all_states
from .claims import compare, settled
from .confirm import confirm
from .corpus import prepare_corpus, reserve_states
from .defaults import ttt_steps_for
from .infer import infer_wiring, starting_points
from .options import FingerprintOptions
from .result import FingerprintResult
from .score import scoring
from .second import second_round


#: prompts continued together when the search's and the confirmation's text are generated at once (as
#: ``accept-rate``'s ``--gen-batch`` default)
JOINT_BATCH = 16


def run_fingerprint(opts: FingerprintOptions, status: Callable[[str], None] | None = None,
                    progress: Callable[[int, int], None] | None = None, source=None) -> FingerprintResult:
    """``source``: an open state source to take the target's states and continuations from (else one is
    opened)."""
    import time

    from ..inputs import prepare, read_inputs
    from ..prompts import token_ids
    from ..source import states_from

    say = status or (lambda m: None)
    if opts.trainer == MEASURED:
        raise AuditError(f"{param('trainer')}: the fingerprint compares the weights with a declared trainer; {MEASURED!r} is the "
                         "measurement itself (leave the trainer out to use the one the layout implies)")
    notes: list[str] = []
    spec, engine = read_inputs(opts, notes)
    kind = spec.draft_kind
    check_runnable(spec)  # a draft its family's network cannot run: one line, before any loading
    scored = scoring(kind)  # how its family is scored (fingerprint/score.py SCORERS)
    prompts, reserve, confirming = split_prompts(opts)
    request = states_from(opts, server_only=True) if source is None else None
    prep = prepare(opts, status=say, notes=notes, inputs=(spec, engine), source=source, request=request,
                served_optional=True)
    spec, target, info = prep.draft, prep.target, prep.info
    declared, served, trainer = prep.resolution.trained, prep.resolution.served, prep.trainer
    prompt_ids = token_ids(opts.prompt_ids, prompts, target.tokenizer, opts.max_tokens)
    flags = declared.flags
    notes.append(scored.note(kind, flags))
    ttt_steps, why = ttt_steps_for(opts.device, opts.ttt_steps)
    if why and scored.later_steps:
        notes.append(why)
    flat = sum(p.text is not None for p in (prompts or ()))
    if flat:
        notes.append(f"prompts: {flat} of {len(prompts)} are plain text, not chat-templated; drafts are trained on the "
                     "target's chat-templated responses, and on plain text the fingerprint has less to go on (a test "
                     "canary's slot was named wrong there, docs/fingerprint.md): prefer chat prompts")
    confirm_ids = (token_ids(opts.confirm_prompt_ids, confirming, target.tokenizer, opts.max_tokens, "confirmation prompts")
                   if opts.confirm_prompt_ids is not None or confirming else [])
    t0 = time.perf_counter()
    confirms = kind.simulated  # the confirmation judges the pick in simulated accept length
    if confirm_ids and confirms:  # the search's and the confirmation's text continued together
        from ..source import as_source  # (one batched decode, not two: docs/performance.md)

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
    if not confirms:
        why = f"accept-rate does not simulate {kind.title} drafting"
        notes.append(f"{kind.name} draft: no confirmation ({why}); the findings rest on the search's text alone")
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
