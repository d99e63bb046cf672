"""Does a draft fit a target: the number of states its fc takes from this target, or bad input. Read by
every audit before it measures (:mod:`eagle_audit.inputs`, ``layers``' diagnosis, ``fingerprint``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BadCheckpoint
from .read import DraftSpec

if TYPE_CHECKING:
    from ..target import TargetInfo


def check_target_fit(draft: DraftSpec, target: TargetInfo) -> int:
    """The draft's aux count for this target; bad input if its fc cannot take this target's states."""
    aux = draft.aux_count(target.hidden_size)
    if aux is None or (draft.target_hidden_size and draft.target_hidden_size != target.hidden_size
                       and draft.fc_in % draft.target_hidden_size == 0):
        built_for = draft.target_hidden_size or "another"
        raise BadCheckpoint(
            f"{draft.path}: draft was built for a target of hidden size {built_for} (fc.weight takes {draft.fc_in} "
            f"inputs), but {target.name} has hidden size {target.hidden_size}")
    if target.vocab_size and draft.vocab_size and draft.vocab_size != target.vocab_size:
        raise BadCheckpoint(f"{draft.path}: draft vocab_size {draft.vocab_size} differs from the target's "
                            f"{target.vocab_size}: a draft for another target")
    return aux
