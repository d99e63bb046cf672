"""``check --server``: the served stage. What the running engine really feeds this draft, slot by slot:
the states a capture-only server returns for the audit's prompts (the launch line ``sglang_serving`` /
``vllm_serving`` prints for this draft, :mod:`eagle_audit.served`) against the local capture of every
boundary on the same tokens, taken from the check's state source (the captured stage ran those prompts
with every state: no forward of its own). Findings ``ENGINE_STATE_MISMATCH`` / ``ENGINE_STATE_SHIFTED``
(:func:`eagle_audit.served.served_findings`).

Assumptions, named: the server at the URL was launched with the serving line for this draft (the stage
prints it, and compares against the slots that line captures); one new token per request (the states of
the prompt's positions: exactly the tokens the captured stage ran).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ..result import Finding


@dataclass(frozen=True)
class ServedCheck:
    """The served stage's result (a section of ``eagle-audit/check/1``, not a document of its own)."""

    url: str
    kind: str
    launch: str  # the launch line the server is compared against
    expected: tuple  # the states that line captures, per slot
    matches: tuple  # eagle_audit.served.SlotMatch per slot
    findings: tuple[Finding, ...]
    requests: int
    tokens: int
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return "mismatch" if self.errors else "match"

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "url": self.url, "kind": self.kind, "launch": self.launch,
                "expected": [s.label() for s in self.expected], "slots": [m.to_json() for m in self.matches],
                "findings": [f.to_json() for f in self.findings], "requests": self.requests, "tokens": self.tokens,
                "notes": list(self.notes)}


def run_served(opts, source, draft_config, prompt_ids, status: Callable[[str], None] | None = None) -> ServedCheck:
    import numpy as np

    from ..accept.server import ServerOptions, detect
    from ..errors import AuditError
    from ..served import compare_slots, read_served_states, served_findings, sglang_serving, vllm_serving
    from ..served.launch import TargetShape
    from ..states import all_states

    say = status or (lambda m: None)
    server = ServerOptions(opts.server, opts.server_kind, opts.server_api_key, opts.server_timeout,
                           opts.server_deadline)
    kind = detect(server)
    info = source.info
    shape = TargetShape(str(opts.target), info.architecture, info.num_layers, info.hidden_size)
    if kind == "vllm":
        if opts.hidden_states_dir is None:
            raise AuditError("a vLLM server writes the states to its disk: name that folder", options="hidden_states_dir")
        launch = vllm_serving(draft_config, shape, str(opts.hidden_states_dir))
    else:
        launch = sglang_serving(draft_config, shape)
    if launch.capture is None:
        raise AuditError("no capture-only launch reproduces what serving this draft feeds: " + "; ".join(launch.notes))
    say(f"reading the served states of {len(prompt_ids)} prompts from the {kind} server {opts.server}")
    served = read_served_states(replace(server, kind=kind), prompt_ids, launch.capture, max_new_tokens=1,
                                hidden_states_dir=opts.hidden_states_dir)
    cands = all_states(info.num_layers)
    local: dict[Any, list] = {s: [] for s in cands}
    for r in served:  # the captured stage's forwards, from the memo
        forced = source.teacher_forced([r.token_ids], cands)[0]
        for s in cands:
            local[s].append(forced.states[s].float().cpu().numpy())
    base = {s: np.concatenate(v, axis=0) for s, v in local.items()}
    matches = compare_slots([r.states for r in served], base, launch.capture.states)
    title = "vLLM" if kind == "vllm" else "SGLang"
    notes = tuple(n for r in served for n in r.notes) + tuple(launch.notes)
    return ServedCheck(opts.server, kind, launch.line, tuple(launch.capture.states), matches,
                       served_findings(matches, title, opts.server), len(served),
                       sum(len(r.token_ids) for r in served), tuple(dict.fromkeys(notes)))
