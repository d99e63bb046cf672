"""The protocol every analysis asks for states through (``layers``, ``fingerprint``, ``accept-rate``,
``check``); none of them knows which backend answers.

A backend implements :class:`StateSource` and registers itself in :mod:`eagle_audit.source.registry`.
:class:`eagle_audit.source.memo.Memo` gives any backend the memoisation the protocol promises: within one
source, no teacher-forced forward of the same token ids runs twice and no prompt is continued twice.

Assumptions, named:

* Teacher-forced states do not depend on what else is captured in the same forward (hooks only read),
  so states captured for one analysis serve another asking for a subset.
* A prompt's greedy continuation is fixed once generated: a later request with another batch size gets
  the memoised one (batching can change near-tied argmaxes in the last bits, see
  :func:`eagle_audit.source.forwards.greedy_generate_batch`).
* Memoised states stay in memory (the source's dtype, on its devices) until :meth:`StateSource.forget`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol, Sequence, runtime_checkable

from ..states import State
from .spec import Counts, Decoded, Forced, SourceSpec

Progress = Callable[[int, int], None]


@runtime_checkable
class StateSource(Protocol):
    """Where an audit's states come from.

    Attributes: ``spec`` (:class:`SourceSpec`), ``info`` (:class:`eagle_audit.target.TargetInfo`),
    ``tokenizer`` (or None: token ids only), ``device`` / ``dtype`` (strings, for provenance),
    ``input_device`` (the torch device states are gathered on and drafts run on), ``counts``
    (:class:`Counts`)."""

    spec: SourceSpec
    info: Any
    tokenizer: Any
    device: str
    dtype: str
    counts: Counts

    @property
    def input_device(self) -> Any: ...

    def eos_ids(self) -> set[int]:
        """The target's end-of-sequence token ids."""

    def teacher_forced(self, sequences: Sequence[Sequence[int]], states: Iterable[State], *,
                       next_tokens: bool = False, progress: Progress | None = None) -> list[Forced]:
        """One forward per sequence not memoised, capturing ``states`` (and the argmax after each position
        with ``next_tokens``); memoised sequences are answered without a forward."""

    def reserve(self, states: Iterable[State], next_tokens: bool = False) -> None:
        """Widen what every later forward captures (an orchestrator that knows a later stage will ask for
        more states over the same sequences calls it first, so that stage needs no second forward)."""

    def continuations(self, prompts: Sequence[Sequence[int]], max_new: int, *, batch: int = 16,
                      progress: Progress | None = None) -> tuple[list[tuple[int, ...]], float]:
        """The target's greedy continuation of each prompt (at most ``max_new`` tokens, ending at an EOS
        token, kept) and the seconds generating them took (memoised prompts: 0). ``batch`` prompts are
        continued together."""

    def decode(self, prompts: Sequence[Sequence[int]], states: Iterable[State], max_new: int, *, batch: int = 16,
               temperature: float = 0.0, seed: int = 0, out_device: str = "cpu",
               progress: Progress | None = None) -> list[Decoded]:
        """The target's own continuations of ``prompts`` (``temperature`` 0: greedy; else sampled, seeded by
        ``seed``), ``batch`` prompts decoded together, with ``states`` captured at every position but the
        last (float32 on ``out_device``), in prompt order; never memoised (``spec.gives`` holds
        ``decode``), or ``CannotGive``. Batching changes rounding: training data, not the simulation's text."""

    def embedding(self) -> Any:
        """The target's input embedding matrix [vocab, hidden] (the draft runtime's token embedding), or
        :class:`~eagle_audit.source.spec.CannotGive`."""

    def lm_head(self) -> Any:
        """The target's output head [vocab, hidden] (tied: the embedding), or ``CannotGive``."""

    def live(self) -> Any:
        """An incremental forward for the live loop (:class:`eagle_audit.source.local.LiveForward`), or
        ``CannotGive``."""

    def weights(self) -> Any:
        """The loaded model (:class:`eagle_audit.target.LoadedTarget`) for what copies its weights
        (``train-canary``), or ``CannotGive``."""

    def forget(self) -> None:
        """Drop every memoised state and continuation."""
