"""What a state source is, as data: the request that opens one, its frozen description, what it can
give, and the objects its teacher-forced forwards return.

Shapes (``Forced``), per sequence of L token ids:

  =================  ====================  ==================================================
  field              shape                 meaning
  =================  ====================  ==================================================
  ``states[s]``      [L, hidden]           state ``s`` at every position, in the source's dtype,
                                           on the device its layer ran on (callers move/upcast)
  ``next_tokens``    [L] long or None      the target's argmax after each position (None: not
                                           asked for)
  =================  ====================  ==================================================

Shapes (``Decoded``), per decoded sequence of L = prompt + continuation ids:

  =================  ====================  ==================================================
  field              shape                 meaning
  =================  ====================  ==================================================
  ``states[s]``      [L - 1, hidden]       state ``s`` at every position but the last (the last
                                           token is never fed), float32, on the device asked for
  =================  ====================  ==================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import AuditError
from ..states import State

#: What a source may be able to give beyond teacher-forced states (:attr:`SourceSpec.gives`).
TEACHER_FORCED = "teacher_forced"  # states of given token-id sequences
NEXT_TOKENS = "next_tokens"  # ... and the target's argmax after each of their positions (fingerprint's labels)
GENERATE = "generate"  # the target's greedy continuations of prompts
EMBEDDING = "embedding"  # the target's input embedding matrix (the draft runtime borrows it)
LM_HEAD = "lm_head"  # the target's output head (drafts with no lm_head of their own borrow it)
LIVE = "live"  # incremental KV-cached forwards (``accept-rate --live``)
WEIGHTS = "weights"  # the loaded model itself (``train-canary`` copies a layer and the final norm)
DECODE = "decode"  # greedy or sampled continuations, batched, with states captured on the way (``train-canary``'s data)
CAPABILITIES = (TEACHER_FORCED, NEXT_TOKENS, GENERATE, EMBEDDING, LM_HEAD, LIVE, WEIGHTS, DECODE)


class CannotGive(AuditError):
    """A source asked for something its backend cannot give (a server has no embedding matrix unless it
    names a shard that holds one): one line naming the source and what is missing, exit 2."""

    def __init__(self, source: "SourceSpec", what: str, why: str, hint: str | None = None):
        super().__init__(f"{source.name} ({source.origin}) cannot give {what}: {why}", hint=hint)
        self.what = what


@dataclass(frozen=True)
class SourceRequest:
    """Where an audit asks its states to come from; :func:`eagle_audit.source.open_source` picks the
    backend that takes it (registry order). Built from an audit's options in one place,
    :func:`eagle_audit.source.registry.source_request`."""

    target: str  # a local HF directory, a cached hub id or a .gguf file (a server backend: its config dir)
    device: str = "cpu"
    dtype: str = "auto"
    device_map: str | None = None  # "auto": split over the visible GPUs (accelerate)
    backend: str | None = None  # a registry name to force one backend (None: the first that accepts)
    # served: a server backend adds the URL (and its options) here and accepts requests that carry one.
    server: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # backend-specific settings, read by that backend only


@dataclass(frozen=True)
class SourceSpec:
    """A source, described: enough for provenance and for an analysis to check what it can ask for."""

    name: str  # the target as the user named it
    backend: str  # the registry name ("local", "device-map", ...)
    origin: str  # where the states come from, in words ("transformers on cpu", "transformers, device_map=auto")
    num_layers: int
    hidden_size: int
    states: tuple[State, ...]  # every State it can give (local: B0..BN and BN+norm)
    dtype: str
    device: str
    gives: frozenset[str] = frozenset(CAPABILITIES)

    def __post_init__(self) -> None:
        unknown = set(self.gives) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"unknown capabilities {sorted(unknown)} (known: {', '.join(CAPABILITIES)})")

    def can(self, what: str) -> bool:
        return what in self.gives

    def to_json(self) -> dict:
        return {"name": self.name, "backend": self.backend, "origin": self.origin, "num_layers": self.num_layers,
                "hidden_size": self.hidden_size, "states": [s.label() for s in self.states], "dtype": self.dtype,
                "device": self.device, "gives": sorted(self.gives)}


@dataclass(frozen=True)
class Forced:
    """One teacher-forced forward of one sequence (shapes in the module docstring)."""

    ids: tuple[int, ...]
    states: Mapping[State, Any]
    next_tokens: Any | None = None


@dataclass(frozen=True)
class Decoded:
    """One sequence the target decoded itself, with the states its forwards computed on the way (shapes
    in the module docstring)."""

    ids: tuple[int, ...]  # the prompt, then the continuation (cut at its first EOS token, kept)
    prompt_len: int
    states: Mapping[State, Any]


@dataclass
class Counts:
    """What a source has run (tests and ``check`` count it: one load, no forward twice)."""

    loads: int = 0  # targets loaded (or servers connected)
    forwards: int = 0  # teacher-forced forwards run (one per sequence not memoised)
    memo_hits: int = 0  # teacher-forced sequences answered from the memo
    generations: int = 0  # prompts continued by the target (greedy)
    generation_hits: int = 0  # prompts whose continuation came from the memo
    decodes: int = 0  # prompts decoded with their states (``decode``: never memoised)
