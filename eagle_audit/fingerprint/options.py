"""What a fingerprint run starts from (:class:`FingerprintOptions`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..inputs import AuditInputs
from .defaults import CONFIRM_PROMPTS, CONFIRM_STEPS, MORE_PROMPTS


@dataclass(frozen=True)
class FingerprintOptions(AuditInputs):
    """What a fingerprint run starts from: the inputs every audit shares (:class:`~eagle_audit.inputs.AuditInputs`;
    ``trainer`` / ``trained_boundaries`` / ``trained_ids`` name the declared wiring the weights are compared with,
    as ``layers`` resolves them; ``states_server`` takes every state from a reference server, for a weights-free
    target), and the fingerprint's own. ``prompt_ids`` gives token ids directly (library use, tokenizer-less
    targets): the search's prompts; ``confirm_prompt_ids`` the confirmation's (disjoint from them)."""

    max_new_tokens: int = 64
    prompt_ids: tuple[tuple[int, ...], ...] | None = None
    ttt_steps: int | None = None  # training-time-test steps scored where the draft predicts at them (later_steps);
    # None: defaults.ttt_steps_for the device
    more_prompts: int = MORE_PROMPTS  # the second round's budget: prompts after the first max_prompts (0: none)
    confirm_prompts: int = CONFIRM_PROMPTS  # the confirmation's prompts, after the search's (0: no confirmation)
    confirm_prompt_ids: tuple[tuple[int, ...], ...] | None = None  # ... as token ids (with prompt_ids)
    confirm_steps: int = CONFIRM_STEPS  # draft tokens per verify in the confirmation's simulated accept length
