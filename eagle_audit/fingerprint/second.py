"""The second round: more text where a slot is not separated, within the stated budget (:func:`second_round`), and
only for the slots it is expected to settle (:func:`unsettled`)."""

from __future__ import annotations

from ..draft.read import DraftSpec
from .corpus import prepare_corpus
from .infer import infer_wiring
from .score import Corpus, merge_corpora
from .verdict import Inference


def unsettled(inf: Inference, extra_tokens: int) -> list[int]:
    """Slots a second round of ``extra_tokens`` more scored tokens (prompts like these) is expected to settle:
    ambiguous or undetermined, used by the draft (not ``unused``, not ``uninformed``: more text of this kind
    would not change that), whose two lines of evidence do not exclude each other (``lines`` "disagree": more text
    narrows the function's interval, and the weights' state lies outside it already, so the slot stays
    undetermined: the demo's slot 2 spent a whole second round so), and whose estimate (``name_tokens`` for an
    undetermined slot, ``separate_tokens`` for an ambiguous one) is within the evidence the two rounds would have.
    Assumption, named: more text shrinks the function's interval around the same best (it does not move the best
    into the weights' reading)."""
    if inf.confidence == "none":
        return []
    out = []
    for sl in inf.slots:
        if not sl.ambiguous or sl.unused or sl.uninformed or sl.lines == "disagree":
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
