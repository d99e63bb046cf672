"""The fingerprint result: frozen data, rendered by the CLI, written as ``eagle-audit/fingerprint/2`` JSON.

Schema 2 (breaking against 1): ``inferred.states`` is guarded per slot: a label where the slot is separated, a
list of labels where it is ambiguous, null where it is undetermined (schema 1 wrote the unguarded best guess);
each slot says what would determine it (``needs``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..conventions import Wiring
from ..errors import param
from ..layers.result import Finding, Fix
from ..states import State
from .intervals import POWER, Interval

FINGERPRINT_SCHEMA = "eagle-audit/fingerprint/2"
MAX_NAMED = 3  # a slot with more states not separated from its best is "undetermined", not a list to pick from


def _label(s: State | None) -> str | None:
    return s.label() if s is not None else None


@dataclass(frozen=True)
class SlotInference:
    index: int
    best: State
    runner_up: State | None
    margin: Interval | None  # mean log-prob of the target's token: best - runner-up (paired, per token)
    top1_margin: Interval | None  # top-1 agreement: best - runner-up
    candidates: tuple[State, ...]  # the best and every state not separated from it
    ambiguous: bool
    undetermined: bool = False  # more than MAX_NAMED states not separated: the slot carries too little signal here
    separate_tokens: int | None = None  # scored tokens (prompts like these) that would separate the runner-up
    # (not separated yet: with probability intervals.POWER, these tokens among them; intervals.tokens_to_separate)
    name_tokens: int | None = None  # ... that would leave at most MAX_NAMED states (None: not within reach)
    unused: bool = False  # not even the worst state is separated from the best: the draft does not use the slot here
    scored_tokens: int = 0  # the evidence the judgement rests on
    uninformed: bool = False  # the best state scores as well shuffled over positions: the draft does not use the slot's
    # information (undetermined, whatever the list)
    use_margin: Interval | None = None  # best - best shuffled over positions (mean log-prob)
    steps: int = 1  # training-time-test steps the judgement scored per position (1: the first draft token only)
    equivalent: tuple[State, ...] = ()  # below the best on log-prob, but within the tolerances (search.equivalent)
    unsearched: tuple[State, ...] = ()  # states the search never had (its source does not give them) next to a named
    # state (fingerprint.corpus.unsearched_neighbours): admitted as possibilities, never scored; the slot is then ambiguous
    confirmed: bool | None = None  # the confirmation's text (other prompts, fingerprint.confirm) separated the same
    # states (True), or not (False: confirm_added joined the slot); None: not re-judged (no confirmation, undetermined)
    confirm_tokens: int = 0  # the tokens the confirmation scored
    confirm_added: tuple[State, ...] = ()  # states the confirmation did not separate from the best, beyond the search's
    accept_admitted: tuple[State, ...] = ()  # the declared state, admitted because the measured wiring did not beat the
    # declared one in simulated accept length (fingerprint.confirm.admit_declared)
    lines: str = "function"  # which lines of evidence decided the slot (fingerprint.weights.combine): "function" (the
    # draft's function alone: the weights gave no reading), "both" (they agree), "weights" (the weights separate a
    # state the function's interval contains), "disagree" (undetermined: each line excludes the other's reading)
    weights: str = ""  # what fc's weights say of the slot (fingerprint.weights.WeightSlot.text), "" where not read
    weights_state: State | None = None  # the state fc's weights separate from every other (None: they do not)
    function: str = ""  # what the function said before the weights narrowed or overruled it ("" where it stands)

    @property
    def admitted(self) -> tuple[State, ...]:
        """The states named: those not separated from the best, then the unsearched neighbours."""
        return tuple(self.candidates) + tuple(self.unsearched)

    def text(self) -> str:
        """``B15`` or, where not separated, ``B15 or B16``; ``B1 or B0 (not searched)`` beside a state the search
        never had; ``undetermined (9 states ...)`` where too many are not separated to name."""
        if self.lines == "disagree":
            return f"undetermined (function {self.function}; weights {self.weights})"
        if self.uninformed:
            return f"undetermined (the draft does not use its information; best {self.best.label()})"
        if self.undetermined:
            also = " or admitted in accept length" if self.accept_admitted else ""
            return f"undetermined ({len(self.candidates)} states not separated{also}, best {self.best.label()})"
        return " or ".join([s.label() for s in self.candidates] + [f"{s.label()} (not searched)" for s in self.unsearched])

    def admits(self, state: State) -> bool:
        """``state`` is consistent with what the weights say about this slot (an undetermined slot admits any; a
        named one its states and their unsearched neighbours)."""
        return self.undetermined or state in self.admitted

    def guarded(self) -> str | list[str] | None:
        """What the weights support for this slot: the state, the states it is ambiguous between (with the
        unsearched neighbours, last), or None."""
        if self.undetermined:
            return None
        return self.best.label() if not self.ambiguous else [s.label() for s in self.admitted]

    def needs(self) -> str:
        """How sure, in evidence: what separated it, or what would."""
        if self.lines == "disagree":
            return ("the two lines of evidence exclude each other's reading: the draft's function (its first "
                    f"prediction, {self.function}) and fc's weights ({self.weights}); a draft fine-tuned from another, "
                    "or an fc started from one, keeps the old states in its weights (docs/fingerprint.md)")
        if self.lines == "weights":
            return (f"fc's weights separate {self.best.label()}, and the function does not exclude it (the function "
                    f"alone: {self.function})")
        on = f"{self.scored_tokens} scored tokens" + (f" x {self.steps} training-time-test steps" if self.steps > 1 else "")
        if self.unsearched and not self.undetermined:
            ns = " or ".join(s.label() for s in self.unsearched)
            beside = (f"; not told from {ns}: not searched, the states' source does not give it (a source that does, "
                      "the target's weights, would tell)")
            if len(self.candidates) == 1:
                return f"separated from every searched state on {on}{beside}"
            return replace(self, unsearched=(), ambiguous=True).needs() + beside
        if not self.ambiguous:
            again = (f", and again on {self.confirm_tokens} tokens of other prompts (the confirmation)" if self.confirmed
                     else ", and fc's weights separate it too (two lines agree: the confirmation does not re-judge it)"
                     if self.lines == "both" and self.weights_state == self.best
                     else f"; not confirmed on prompts that did not choose it (the confirmation, {param('confirm_prompts')})")
            return (f"separated on {on}"
                    + (f" (about {self.separate_tokens} tokens would do)" if self.separate_tokens else "") + again)
        if self.accept_admitted:
            d = " or ".join(s.label() for s in self.accept_admitted)
            rest = replace(self, candidates=tuple(s for s in self.candidates if s not in self.accept_admitted),
                           accept_admitted=(), undetermined=False)
            return (f"the weights named {rest.text()} in log-prob, but the declared {d} is not worse in simulated accept "
                    f"length on other prompts (the confirmation), so it is admitted; " + rest.needs())
        if self.confirmed is False:
            added = " or ".join(s.label() for s in self.confirm_added)
            return (f"the search's text named {' or '.join(s.label() for s in self.candidates if s not in self.confirm_added)}"
                    f" on {on}, but on {self.confirm_tokens} tokens of other prompts {added} is not separated from "
                    f"{self.best.label()}; " + replace(self, confirmed=None, confirm_added=()).needs())
        if self.uninformed:
            return ("nothing on text like this: its best state scores as well shuffled over the positions of each "
                    "text, so the draft does not use what the slot carries here (prompts like the draft's training "
                    "data may change that)")
        if self.unused:
            return ("nothing on text like this: not even the worst state is separated from the best, the draft "
                    "does not use this slot here")
        if self.equivalent and not self.undetermined:
            same = " or ".join(s.label() for s in self.equivalent)
            return (f"{same} scores a lower log-prob than {self.best.label()} on {on}, but within 0.02 per token and a "
                    "point of top-1 (99%): equivalent to the draft, so more text of this kind would not tell them "
                    "apart (adjacent states are nearly interchangeable)")
        want = self.name_tokens if self.undetermined else self.separate_tokens
        what = f"at most {MAX_NAMED} states" if self.undetermined else "one state"
        if want is None:
            return (f"not expected within 64x the {on}: the closest states' measured difference is too small against "
                    "its spread across prompts (to this draft they are nearly alike on such text)")
        return (f"about {want} scored tokens ({want / max(1, self.scored_tokens):.1f}x these, these among them) of "
                "prompts like the draft's training data (the target's own chat-templated continuations) to name "
                f"{what} (planned for a {POWER:.0%} chance; on a real draft's text such estimates came true less often, "
                "docs/fingerprint.md)")

    def to_json(self) -> dict:
        iv = self.margin
        return {"index": self.index, "state": self.guarded(), "best": self.best.label(),
                "runner_up": _label(self.runner_up),
                "margin": iv.mean if iv else None, "interval": [iv.low, iv.high] if iv else None,
                "top1_margin": self.top1_margin.mean if self.top1_margin else None,
                "top1_interval": [self.top1_margin.low, self.top1_margin.high] if self.top1_margin else None,
                "ambiguous": self.ambiguous, "undetermined": self.undetermined,
                "candidates": [s.label() for s in self.candidates], "text": self.text(),
                "separate_tokens": self.separate_tokens, "name_tokens": self.name_tokens, "unused": self.unused,
                "uninformed": self.uninformed, "steps": self.steps, "unsearched": [s.label() for s in self.unsearched],
                "equivalent": [s.label() for s in self.equivalent], "confirmed": self.confirmed,
                "confirm_added": [s.label() for s in self.confirm_added],
                "accept_admitted": [s.label() for s in self.accept_admitted],
                "lines": self.lines, "weights": self.weights,
                "weights_state": _label(self.weights_state), "function": self.function,
                "use_margin": [self.use_margin.mean, self.use_margin.low, self.use_margin.high] if self.use_margin else None,
                "needs": self.needs()}


@dataclass(frozen=True)
class Agreement:
    """Per slot, the draft's agreement with every candidate state in that slot (other slots at the best)."""

    states: tuple[State, ...]
    logprob: tuple[tuple[float, ...], ...]  # [slot][state]: mean log-prob of the target's next token
    top1: tuple[tuple[float, ...], ...]  # [slot][state]: share of tokens where the draft's top-1 is it

    def to_json(self) -> dict:
        return {"states": [s.label() for s in self.states], "logprob": [list(r) for r in self.logprob],
                "top1": [list(r) for r in self.top1]}


@dataclass(frozen=True)
class Claim:
    """What one source says the draft was trained on, and whether the weights agree."""

    source: str  # "declared", a trainer convention name, or "engine"
    states: tuple[State, ...] | None
    agrees: bool | None  # None: no inferred wiring, or the claim does not fit the checkpoint
    note: str = ""

    def to_json(self) -> dict:
        return {"source": self.source, "states": [s.label() for s in self.states] if self.states is not None else None,
                "agrees": self.agrees, "note": self.note}


@dataclass(frozen=True)
class FingerprintResult:
    verdict: str  # "match" or "mismatch" (any error finding)
    confidence: str  # "high" (every slot separated), "ambiguous" (some slot not), "none" (representation mismatch)
    target: Mapping[str, Any]
    draft: Mapping[str, Any]
    inferred: tuple[State, ...] | None  # the best wiring where it is trusted (JSON: guarded per slot); None: REPRESENTATION_MISMATCH
    best: tuple[State, ...]  # the best-scoring wiring, whether or not it is trusted
    slots: tuple[SlotInference, ...]
    top1: float | None  # the best wiring's top-1 agreement (None: nothing could be scored)
    logprob: float | None  # its mean log-prob of the target's next token
    baseline_top1: float | None  # the draft with no target information
    baseline_logprob: float | None
    scored_tokens: int
    coverage: float  # share of positions whose target token is in the draft vocabulary
    agreement: Agreement
    claims: tuple[Claim, ...]
    declared: Wiring
    served: Wiring | None
    findings: tuple[Finding, ...]
    fix: Fix | None
    search: Mapping[str, Any]
    provenance: Mapping[str, Any]
    confirmation: Any = None  # fingerprint.confirm.Confirmation: the pick judged on other prompts (None: not run)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def weights_alone(self) -> tuple[SlotInference, ...]:
        """Where the draft's function agrees with the target under no wiring (``inferred`` None,
        REPRESENTATION_MISMATCH), the slots fc's weights still separate one state in: what the draft was trained
        on, read off its fc, whatever it learnt to predict. No claim is judged against them and no finding comes
        from them (the claims need the function's agreement)."""
        if self.inferred is not None:
            return ()
        return tuple(s for s in self.slots if s.weights_state is not None and tuple(s.candidates) == (s.weights_state,)
                     and not s.undetermined)

    def guarded_states(self) -> list | None:
        """JSON ``inferred.states``: guarded per slot; under REPRESENTATION_MISMATCH the slots fc's weights name
        alone (:attr:`weights_alone`), null elsewhere; null where nothing is named."""
        if self.inferred is not None:
            return [s.guarded() for s in self.slots]
        alone = {s.index for s in self.weights_alone}
        return [s.guarded() if s.index in alone else None for s in self.slots] if alone else None

    def to_json(self) -> dict:
        return {
            "schema": FINGERPRINT_SCHEMA, "verdict": self.verdict, "target": dict(self.target),
            "draft": dict(self.draft),
            "inferred": {"states": self.guarded_states(),
                         "confidence": self.confidence, "best": [s.label() for s in self.best],
                         "slots": [s.to_json() for s in self.slots], "top1": self.top1, "logprob": self.logprob,
                         "baseline": {"top1": self.baseline_top1, "logprob": self.baseline_logprob},
                         "scored_tokens": self.scored_tokens, "coverage": self.coverage},
            "agreement": self.agreement.to_json(), "claims": [c.to_json() for c in self.claims],
            "declared": self.declared.to_json(), "served": self.served.to_json() if self.served else None,
            "findings": [f.to_json() for f in self.findings], "fix": self.fix.to_json() if self.fix else None,
            "search": dict(self.search),
            "confirmation": self.confirmation.to_json() if self.confirmation is not None else None,
            "provenance": dict(self.provenance),
        }
