"""What a server hands out: one prompt's served states (:class:`ServedStates`), the progress callback of a
reading, and :class:`BadStates`, the error of malformed states (every engine's reader raises it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import AuditError
from .launch import Capture


class BadStates(AuditError):
    """The served hidden states are malformed, short or of the wrong width."""


Progress = Callable[[int, int, int], None]  # (request index, requests, bytes of this reply so far)


@dataclass(frozen=True)
class ServedStates:
    """The states one server returned for one prompt.

    ``states``: ``[T, K, H]`` float32, T = ``len(prompt) + len(output_ids) - 1`` positions (the prompt, then
    every output token but the last, which is never fed); slot i is ``capture.states[i]``.
    ``token_ids``: the token at each position; ``next_tokens`` (when asked): the target's argmax after each."""

    source: str
    prompt: tuple[int, ...]
    output_ids: tuple[int, ...]
    states: np.ndarray = field(repr=False)
    capture: Capture
    finish_reason: str | None = None
    notes: tuple[str, ...] = ()
    next_tokens: tuple[int, ...] | None = None  # [T]: the target's argmax after each position (None: not asked)

    @property
    def token_ids(self) -> tuple[int, ...]:
        return self.prompt + self.output_ids[:-1]

    def slot(self, i: int) -> np.ndarray:
        return self.states[:, i, :]  # [T, H]
