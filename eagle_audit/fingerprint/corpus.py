"""The fingerprint's text: the target's greedy continuations of the prompts and one teacher-forced pass capturing
every state its source gives (:func:`prepare_corpus`), which states those are (:func:`searched_states`), and what a
named slot admits beside them where the source does not give every state (:func:`unsearched_neighbours`).

Assumption, named: a source that does not give every state (a server: no B0 on SGLang's +1 rule, no BN / BN+norm)
is searched over what it gives; a slot trained on a state it does not give scores best on the searched state
nearest to that one on the residual stream, so a named state next to a state not searched admits it too
(``B1 or B0 (not searched)``, ambiguous, never exact); BN+norm, which no boundary stands in for (a slot trained on it
was named B1), is admitted by the last slot.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..states import State, all_states
from .score import Corpus, capture_corpus


def continuations(target, prompt_ids: Sequence[Sequence[int]], max_new: int, batch: int = 8) -> list[list[int]]:
    """Prompt + the target's greedy continuation (``accept-rate``'s batched KV-cached decode, cut at EOS)."""
    from ..simulate.accept import make_cases

    cases, _ = make_cases(target, prompt_ids, max_new, batch=batch)
    return [c.ids for c in cases]


def prepare_corpus(target, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int = 64,
                   status: Callable[[str], None] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Corpus:
    """The target's greedy continuations of the prompts, and one teacher-forced pass per sequence
    capturing every state its source gives (reusable for several drafts of the same target). The states
    and the argmax at every position are reserved first, so a source whose continuations carry them (a
    server) answers the teacher-forced pass from its memo."""
    say = status or (lambda m: None)
    cands = reserve_states(target)
    say(f"target generates greedy continuations of {len(prompt_ids)} prompts")
    seqs = continuations(target, prompt_ids, max_new_tokens)
    say(f"one teacher-forced pass per sequence capturing {len(cands)} states")
    return capture_corpus(target, seqs, cands, progress=progress)


def reserve_states(target) -> tuple[State, ...]:
    """Reserve every searched state and the argmax at every position on the target's source, before anything is
    generated (a source whose continuations carry them, a server, then answers the teacher-forced pass from its
    memo); a source that cannot give the argmax says so here (exit 2). Returns the searched states."""
    from ..source import NEXT_TOKENS, CannotGive, as_source

    source = as_source(target)
    cands = searched_states(source)
    source.reserve(cands, next_tokens=True)
    if not source.spec.can(NEXT_TOKENS):
        raise CannotGive(source.spec, "the target's argmax at every position", "its backend cannot give it")
    return cands


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
