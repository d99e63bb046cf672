"""What a server's acceptance reading is (:class:`ServerReading`) and the one entry point that takes it
(:func:`read_server`): every engine's reader (``engines/<engine>/acceptance.py``) returns the same object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ServerReading:
    url: str
    kind: str  # "sglang" or "vllm"
    accept_length: float | None  # tokens per verify over our requests (prefill token excluded), as simulated
    request_accept_length: float | None  # SGLang: mean of meta_info.spec_accept_length (prefill included)
    requests: int
    source: str  # which fields the figures came from
    per_position: tuple[float, ...] = ()  # share of verifies that accepted draft i+1
    histogram: tuple[int, ...] = ()  # SGLang: verifies that accepted n drafts (last verify not cut)
    verify_steps: int | None = None
    tokens: int | None = None  # tokens gained by verifies (completion tokens minus the prefill token)
    continuations_equal: int | None = None  # requests whose served output equals the target's greedy one
    lifetime_accept_length: tuple[float | None, ...] = ()  # SGLang /server_info, one per DP rank (context)
    other_traffic: bool | None = None  # vLLM: other clients' requests moved the counters
    key_source: str | None = None  # where the API key came from ("option", an env variable name), never the key
    drafting: Mapping[str, Any] = field(default_factory=dict)  # how the server drafts, as far as it says
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        out["drafting"] = dict(self.drafting)
        return out

