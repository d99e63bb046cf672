"""The registry of the ``layers`` findings: :data:`CHECKS`, the :func:`check` decorator that fills it, and the
:class:`Context` every check reads (with :class:`Measured`, the wiring ``fingerprint`` measured on the weights).

Its own module so that every module of checks (:mod:`eagle_audit.layers.diagnose`,
:mod:`eagle_audit.layers.diagnose_block`) imports it from below and no module of checks imports another's
registry: :func:`eagle_audit.layers.diagnose.diagnose` runs the checks in registration order, which is the
order their modules are imported in (``diagnose`` imports ``diagnose_block`` last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..conventions import Wiring
from ..draft.read import DraftSpec
from ..resolution import Resolution, SideWiring
from ..states import State
from ..target import TargetInfo
from .result import Finding, Slot


@dataclass(frozen=True)
class Measured:
    """The trained wiring as read off the draft's weights (:mod:`eagle_audit.fingerprint`), for the checks
    that compare it with what is declared. ``candidates[i]``: the states slot i cannot be told apart from
    the best, best first; None where no wiring fits the target (``reason``, ``evidence`` say why)."""

    declared: Wiring
    candidates: tuple[tuple[State, ...], ...] | None
    reason: str = ""
    evidence: str = ""
    hint: str = ""  # how to declare the measured wiring
    differs: bool | None = None  # the fingerprint's verdict on the declared wiring (None: judge by ``candidates``)
    confirmed: str = ""  # where the fingerprint confirmed the measured wiring on other prompts: what it gains

    def agrees(self, states) -> bool:
        return self.candidates is not None and len(states) == len(self.candidates) and all(
            s in c for s, c in zip(states, self.candidates))


@dataclass(frozen=True)
class Context:
    """What every check reads: the inputs, the resolved pair, fc's aux count and the slot table (and,
    from ``fingerprint``, the wiring measured on the weights)."""

    draft: DraftSpec
    target: TargetInfo
    res: Resolution
    aux: int
    slots: tuple[Slot, ...]
    measured: Measured | None = None
    agreement: tuple[float, ...] | None = None  # per draft step: served-semantics top-1 == trained-semantics top-1

    def semantic_cost(self) -> str:
        """The measured cost of the draft-semantics differences, for the findings that name them."""
        if not self.agreement:
            return ""
        steps = " / ".join(f"{a:.0%}" for a in self.agreement)
        return (f" Measured on the audit prompts (all semantic differences together, trained states fed): the "
                f"draft run the engine's way predicts the same token as run the training way on {steps} of positions "
                f"at draft steps {' / '.join(map(str, range(len(self.agreement))))}.")

    @property
    def trained(self) -> SideWiring:
        return self.res.trained

    @property
    def served(self) -> SideWiring:
        return self.res.served

    @property
    def eng(self) -> str:
        return self.res.served.title

    @property
    def n(self) -> int:
        return self.target.num_layers


Check = Callable[[Context], Iterable[Finding]]

#: Every check, in the order its findings are reported.
CHECKS: list[Check] = []


def check(fn: Check) -> Check:
    """Register a check (appended: its findings come after those of the checks before it)."""
    CHECKS.append(fn)
    return fn
