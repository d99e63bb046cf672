"""``check --server``: the served stage. What the running engine really feeds this draft, slot by slot: the
states the server returns for the audit's prompts against the local capture of every boundary on the same
tokens, by :func:`eagle_audit.served.run.served_check` (the path ``layers --server`` takes), the local states
from the check's state source (the captured stage ran those prompts with every state: no forward of its own).
Findings ``ENGINE_STATE_MISMATCH`` / ``ENGINE_STATE_SHIFTED`` on the draft's slots.

Assumptions, named: the server says what it captures (SGLang ``/server_info``; vLLM: the reference launch line or
this draft's serving line, told apart by its files' slot count, :func:`eagle_audit.served.run.served_check`); one
new token per request (the states of the
prompt's positions: exactly the tokens the captured stage ran).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AuditError

from ..layers.result import Finding


@dataclass(frozen=True)
class ServedCheck:
    """The served stage's result (a section of ``eagle-audit/check/1``, not a document of its own)."""

    url: str
    kind: str
    launch: str  # what the server captures, in words
    expected: tuple  # the states the server captures, per server slot
    matches: tuple  # eagle_audit.served.SlotMatch per server slot
    findings: tuple[Finding, ...]  # on the draft's slots
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


def run_served(opts, source, captured, prompt_ids, status=None) -> ServedCheck:
    """``captured``: the captured stage's LayersResult (what the engine's rules say serving feeds, per slot)."""
    from ..served.run import served_check

    server = opts.states_server
    conv = captured.served.convention
    title = {"sglang": "SGLang", "vllm": "vLLM", "vllm-v1": "vLLM", "trtllm": "TensorRT-LLM"}.get(conv, conv)
    draft_config = engine_conv = None
    try:  # the draft's serving line under the audited engine's rules, which a vLLM server may run instead
        from ..conventions import get_convention
        from ..draft.read import read_draft

        engine_conv, draft_config = get_convention(opts.engine, "engine"), read_draft(opts.draft, True).config
    except AuditError:
        pass
    check = served_check(server, source, prompt_ids, captured.served.states, title, status, draft_config=draft_config,
                         conv=engine_conv)
    cap = check.capture
    launch = f"{cap.engine} server capturing {', '.join(s.label() for s in cap.states)}" + (
        f" (ids {list(cap.ids)})" if cap.ids is not None else "")
    return ServedCheck(server.url, cap.engine, launch, tuple(cap.states), tuple(check.matches), tuple(check.findings),
                       len(prompt_ids), check.tokens, tuple(check.notes))
