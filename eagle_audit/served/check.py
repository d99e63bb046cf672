"""``layers --server`` with the target's weights local: each state the server serves against the local
capture of every boundary on the same tokens (:mod:`eagle_audit.served.compare`), reported for the states
this draft is served (its slots), the whole table kept in the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..layers.result import Finding
from ..states import State
from .compare import ASSUMED_SERVED_DTYPE, SlotMatch, compare_slots, served_findings, thresholds_for
from ..engines.launch import Capture, TargetShape
from ..source.server import StatesServer, server_capture


@dataclass(frozen=True)
class ServedCheck:
    server: StatesServer
    capture: Capture
    matches: tuple[SlotMatch, ...]  # one per server slot
    findings: tuple[Finding, ...]  # for the draft's served slots
    tokens: int
    thresholds: tuple[float, float] = (0.0, 0.0)  # (cosine min, relative error max) applied

    def to_json(self) -> dict:
        return {"server": self.server.to_json(), "capture": self.capture.to_json(), "tokens": self.tokens,
                "thresholds": {"min_cosine": self.thresholds[0], "rel_error": self.thresholds[1]},
                "slots": [m.to_json() for m in self.matches]}


def served_check(server: StatesServer, source, prompts_ids: Sequence[Sequence[int]], served_states: Sequence[State],
                 engine_title: str, status=None, progress=None) -> ServedCheck:
    """``source``: the local state source (weights loaded); ``served_states``: what the engine's rules say
    serving feeds this draft, slot by slot; ``progress(done, total)``: the reading, request by request (the CLI
    draws it on stderr, only on a terminal and never with ``--json -``)."""
    from ..engines.registry import read_served_states

    info = source.info
    shape = TargetShape(info.name, info.architecture, info.num_layers, info.hidden_size)
    capture = server_capture(server, shape)
    if status:
        status(f"reading {capture.slots} served states per token from {server.url}")
    bar = (lambda i, n, received: progress(i, n)) if progress else None  # (request, requests, bytes so far)
    served = read_served_states(server.options(), prompts_ids, capture, max_new_tokens=1,
                                hidden_states_dir=server.hidden_states_dir, progress=bar)
    if progress:
        progress(len(prompts_ids), len(prompts_ids))
    everything = tuple(State(k) for k in range(info.num_layers + 1))
    local: dict[State, list] = {s: [] for s in everything}
    for r in served:
        caps = source.teacher_forced([list(r.token_ids)], everything)[0].states
        for s in everything:
            local[s].append(caps[s].float().cpu().numpy())
    cos_min, rel_max = thresholds_for(capture.dtype or ASSUMED_SERVED_DTYPE, source.dtype)
    table = compare_slots([r.states for r in served], {s: np.concatenate(v) for s, v in local.items()},
                          capture.states, cos_min, rel_max)
    where = f"{capture.engine} server {server.url}"
    findings = []
    for slot, want in enumerate(served_states):
        for m in table:
            if m.expected == want:
                for f in served_findings([m], engine_title, where):
                    findings.append(Finding(f.code, f.severity, slot, f.what.replace(f"slot {m.slot}:", f"slot {slot}:", 1),
                                            f.why, f.fix))
                break
    return ServedCheck(server, capture, table, tuple(findings), sum(len(r.token_ids) for r in served),
                       (cos_min, rel_max))
