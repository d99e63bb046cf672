"""One seam for where an audit's states come from (docs/sources.md).

``open_source(SourceRequest(target, device=..., device_map=...))`` gives a :class:`StateSource`; every
analysis asks it for teacher-forced states, greedy continuations, decoded text with its states
(``train-canary``) and what the draft runtime borrows (embedding, lm_head), and never knows which
backend answers. Backends: :data:`BACKENDS`.
"""

from .protocol import StateSource
from .registry import BACKENDS, Backend, as_source, open_source, source_request, states_from
from .spec import (CAPABILITIES, DECODE, EMBEDDING, GENERATE, LIVE, LM_HEAD, NEXT_TOKENS, TEACHER_FORCED, WEIGHTS,
                   CannotGive, Counts, Decoded, Forced, SourceRequest, SourceSpec)

__all__ = ["BACKENDS", "Backend", "CAPABILITIES", "CannotGive", "Counts", "DECODE", "Decoded", "EMBEDDING", "Forced",
           "GENERATE", "LIVE", "LM_HEAD", "NEXT_TOKENS", "SourceRequest", "SourceSpec", "StateSource", "TEACHER_FORCED",
           "WEIGHTS", "as_source", "open_source", "source_request", "states_from"]
