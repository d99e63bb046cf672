"""The fingerprint's evidence budget (torch-free: the CLI's option defaults read it at ``--help``).

Measured on the test canaries and a SpecForge 0.2.0 draft (``bench/evidence/fingerprint_evidence.py``, numbers in
``docs/fingerprint.md``, "What each piece of evidence adds")."""

from __future__ import annotations

#: training-time-test steps scored per position on a GPU: steps 0..2, as speculators 0.9.0 trains by default (3;
#: SpecForge 0.2.0's default ttt_length is 7); a later step counts only where the draft predicts at it
#: (``infer.later_steps``). On the SpecForge draft they cut the text needed to separate a slot by 37%.
TTT_STEPS = 3
#: ... on the CPU: step 0 only. There the later-step rollouts cost 4.8x the search (measured), and more text
#: (``MORE_PROMPTS``) is the cheaper way to the same evidence; ``--ttt-steps 3`` asks for them anyway.
TTT_STEPS_CPU = 1
#: the second round's budget: prompts of the same source after the first ``--max-prompts`` (the built-in set
#: holds 24 prompts: 8 + 8, and 8 for the confirmation), used once and only where a slot is expected to be settled
#: by them
MORE_PROMPTS = 8

#: the confirmation's prompts: after the search's (``--max-prompts`` + ``--more-prompts``) in the same source, so
#: the text that judges the pick never chose it; the built-in set holds 24 prompts: 8 + 8 + 8, the last 8
#: the last of ``bench/data/heldout_prompts.jsonl``
CONFIRM_PROMPTS = 8
#: draft tokens per verify in the confirmation's simulated accept length (``accept-rate``'s default ``--num-steps``)
CONFIRM_STEPS = 3

def ttt_steps_for(device: str, asked: int | None) -> tuple[int, str]:
    """The steps to score and, where a default was applied, the note that says so."""
    if asked is not None:
        return int(asked), ""
    steps = TTT_STEPS if str(device).startswith("cuda") else TTT_STEPS_CPU
    where = "a GPU" if steps == TTT_STEPS else "the CPU (the later steps cost about 5x the search there)"
    return steps, f"training-time-test steps scored: {steps} (the default on {where}; `ttt_steps` sets it)"
