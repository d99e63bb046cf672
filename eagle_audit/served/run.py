"""``layers --server`` with the target's weights local: each state the server serves against the local
capture of every boundary on the same tokens (:mod:`eagle_audit.served.compare`), reported for the states
this draft is served (its slots), the whole table kept in the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..layers.result import Finding
from ..states import State
from .compare import ASSUMED_SERVED_DTYPE, SlotMatch, compare_slots, local_boundaries, served_findings, thresholds_for
from ..engines.launch import Capture, TargetShape
from ..engines.options import Server
from ..source.server import server_capture


@dataclass(frozen=True)
class ServedCheck:
    server: Server
    capture: Capture
    matches: tuple[SlotMatch, ...]  # one per server slot
    findings: tuple[Finding, ...]  # for the draft's served slots
    tokens: int
    thresholds: tuple[float, float] = (0.0, 0.0)  # (cosine min, relative error max) applied
    notes: tuple[str, ...] = ()  # what the reading said beside the states (a busy server's Retry-After waits)

    def to_json(self) -> dict:
        return {"server": self.server.to_json(), "capture": self.capture.to_json(), "tokens": self.tokens,
                "thresholds": {"min_cosine": self.thresholds[0], "rel_error": self.thresholds[1]},
                "slots": [m.to_json() for m in self.matches]}


def served_check(server: Server, source, prompts_ids: Sequence[Sequence[int]], served_states: Sequence[State],
                 engine_title: str, status=None, progress=None, draft_config=None, conv=None) -> ServedCheck:
    """``source``: the local state source (weights loaded); ``served_states``: what the engine's rules say
    serving feeds this draft, slot by slot; ``progress(done, total)``: the reading, request by request (the CLI
    draws it on stderr, only on a terminal and never with ``--json -``). ``draft_config`` and ``conv`` (the
    audited engine's convention): a server that does not say what it captures (vLLM) may run this draft's
    serving line instead of the reference line; its files' slot count says which (engines/vllm/states.py)."""
    from ..engines.registry import engine, read_served_states

    info = source.info
    shape = TargetShape(info.name, info.architecture, info.num_layers, info.hidden_size)
    capture = server_capture(server, shape)
    also = ()
    if draft_config is not None and conv is not None and (conv.name == capture.engine
                                                         or conv.name.startswith(capture.engine + "-")):
        line = engine(capture.engine).serving(draft_config, shape, server.hidden_states_dir, conv)
        if line.capture is not None and line.capture.states != capture.states:
            also = (line.capture,)
    if status:
        status(f"reading {capture.slots} served states per token from {server.url}")
    bar = (lambda i, n, received: progress(i, n)) if progress else None  # (request, requests, bytes so far)
    served = read_served_states(server.options(), prompts_ids, capture, max_new_tokens=1,
                                hidden_states_dir=server.hidden_states_dir, progress=bar, also=also)
    if served:
        capture = served[0].capture  # the launch the server runs
    if progress:
        progress(len(prompts_ids), len(prompts_ids))
    everything = tuple(State(k) for k in range(info.num_layers + 1))
    cos_min, rel_max = thresholds_for(capture.dtype or ASSUMED_SERVED_DTYPE, source.dtype)
    table = compare_slots([r.states for r in served], local_boundaries(source, served, everything),
                          capture.states, cos_min, rel_max)
    # each draft slot reported by the server slot that carries the state the rules say it is fed (the first such)
    fed = [(slot, next((m for m in table if m.expected == want), None)) for slot, want in enumerate(served_states)]
    fed = [(slot, m) for slot, m in fed if m is not None]
    findings = served_findings([m for _, m in fed], engine_title, f"{capture.engine} server {server.url}",
                               slots=[slot for slot, _ in fed])
    said = tuple(dict.fromkeys(n for r in served for n in r.notes))
    return ServedCheck(server, capture, table, findings, sum(len(r.token_ids) for r in served), (cos_min, rel_max),
                       said)
