"""The memo the protocol promises (:mod:`eagle_audit.source.protocol`): per source, teacher-forced states
keyed by the exact token ids, and greedy continuations keyed by (prompt ids, max_new).

A backend calls :meth:`Memo.forced` with a function that runs one forward for one sequence and the states
it must capture; the memo decides which sequences need a forward and with which states (what was asked,
what is reserved, nothing already held), and merges the answers.

Bounded: held states past :data:`MAX_BYTES` (the sum of their tensors' sizes) are dropped oldest first; a
sequence dropped and asked for again runs its forward again (counted, as every forward). The bound is an
assumption sized for an 8B target (8 prompts x 320 tokens x 34 states x 4096 bf16: 0.7 GB); a larger
audit on a larger target pays a second forward where a stage asks again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterable, Sequence

from ..states import State
from .spec import Counts, Forced

#: the most bytes of states held at once (2 GiB; the assumption is in the module's docstring)
MAX_BYTES = 2 << 30

#: one forward of one sequence: (ids, states, want next tokens) -> ({state: [L, hidden]}, next tokens [L] | None)
ForwardOne = Callable[[tuple[int, ...], tuple[State, ...], bool], tuple[dict, Any]]


class Memo:
    def __init__(self, counts: Counts, max_bytes: int = MAX_BYTES):
        self.counts = counts
        self.max_bytes = max_bytes
        self._forced: OrderedDict[tuple[int, ...], Forced] = OrderedDict()
        self._bytes: dict[tuple[int, ...], int] = {}
        self._conts: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}
        self._reserved: set[State] = set()
        self._reserved_next = False

    def reserve(self, states: Iterable[State], next_tokens: bool = False) -> None:
        self._reserved |= set(states)
        self._reserved_next = self._reserved_next or next_tokens

    def forced(self, forward_one: ForwardOne, sequences: Sequence[Sequence[int]], states: Iterable[State],
               next_tokens: bool, progress: Callable[[int, int], None] | None = None) -> list[Forced]:
        wanted = set(states)
        out = []
        for i, seq in enumerate(sequences):
            key = tuple(int(t) for t in seq)
            held = self._forced.get(key)
            missing = wanted - set(held.states) if held is not None else wanted
            need_next = next_tokens and (held is None or held.next_tokens is None)
            if held is not None and not missing and not need_next:
                self.counts.memo_hits += 1
            else:
                capture = tuple(sorted(missing | (self._reserved - set(held.states) if held else self._reserved)))
                want_next = need_next or (self._reserved_next and (held is None or held.next_tokens is None))
                caps, nxt = forward_one(key, capture, want_next)
                self.counts.forwards += 1
                merged = {**(dict(held.states) if held else {}), **caps}
                held = Forced(key, merged, nxt if nxt is not None else (held.next_tokens if held else None))
                self._keep(key, held)
            out.append(Forced(key, {s: held.states[s] for s in sorted(wanted)}, held.next_tokens if next_tokens else None))
            if progress:
                progress(i + 1, len(sequences))
        return out

    def _keep(self, key: tuple[int, ...], entry: Forced) -> None:
        tensors = list(entry.states.values()) + ([entry.next_tokens] if entry.next_tokens is not None else [])
        self._forced[key] = entry
        self._forced.move_to_end(key)
        self._bytes[key] = sum(t.numel() * t.element_size() for t in tensors)
        while sum(self._bytes.values()) > self.max_bytes and len(self._forced) > 1:
            old, _ = self._forced.popitem(last=False)
            del self._bytes[old]

    @property
    def held_bytes(self) -> int:
        return sum(self._bytes.values())

    def continuations(self, generate: Callable[[list[tuple[int, ...]], int, int, Callable | None],
                                                tuple[list[tuple[int, ...]], float]],
                      prompts: Sequence[Sequence[int]], max_new: int, batch: int,
                      progress: Callable[[int, int], None] | None = None) -> tuple[list[tuple[int, ...]], float]:
        keys = [tuple(int(t) for t in p) for p in prompts]
        todo = list(dict.fromkeys(k for k in keys if (k, max_new) not in self._conts))
        self.counts.generation_hits += sum(1 for k in keys if (k, max_new) in self._conts)
        seconds = 0.0
        if todo:
            outs, seconds = generate(todo, max_new, batch, progress)
            self.counts.generations += len(todo)
            self._conts.update(((k, max_new), tuple(o)) for k, o in zip(todo, outs))
        elif progress:
            progress(len(keys), len(keys))
        return [self._conts[(k, max_new)] for k in keys], seconds

    def forget(self) -> None:
        self._forced.clear()
        self._bytes.clear()
        self._conts.clear()
