"""Draft kinds, in one registry: what each kind of draft is, how a config says it is one, and what each command
can do with it. A new kind is one :class:`DraftKind` and one :func:`register` call (its own rules, if any, in its
own folder); nothing else compares kind names. Torch-free, below every floor that reads a draft.

Detection order: the kinds are asked in :data:`KINDS` order, last registered first, and the first whose
``declares`` takes the config wins; ``eagle3`` takes every config (the fallback), so it is asked last.

Assumptions, named: a config declares at most one kind (a mixed DSpark + EAGLE-3 config is DSpark: its EAGLE-3
ids are read as extra places by :mod:`eagle_audit.draft.block`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .errors import AuditError


@dataclass(frozen=True)
class DraftKind:
    name: str  # DraftSpec.kind, the conventions' "draft_kinds" entries
    title: str  # for messages ("DFlash")
    declares: Callable[[Mapping[str, Any]], bool]  # does a draft config declare this kind?
    #: proposes a block of mask-token positions per forward, with the target's states as context
    #: (eagle_audit/runtime/block.py); else a chain/tree of one token per draft forward (EAGLE-3)
    block: bool = False
    #: a block draft whose block is drafted token by token, each draft from the one before (DSpark: through its
    #: Markov head, if any, from the anchor's row when ``sample_from_anchor``); else every draft in one pass (DFlash)
    token_by_token: bool = False
    #: accept-rate simulates its drafting (and so check's accept stage and the fingerprint's confirmation run)
    simulated: bool = True
    #: test-time-training steps apply (the draft is unrolled on its own predictions in training)
    ttt: bool = False
    #: (layout) -> the trainer assumed when none is given (None: the layout's default trainer)
    trainer_by_layout: Mapping[str, str] = field(default_factory=dict)
    #: pipeline -> the convention holding that pipeline's rules for this kind (absent: the pipeline's own)
    conventions: Mapping[str, str] = field(default_factory=dict)
    #: why accept-rate cannot simulate it (when not ``simulated``)
    not_simulated: str = ""

    def convention_name(self, pipeline: str) -> str | None:
        return self.conventions.get(pipeline)


def _dspark(config: Mapping[str, Any]) -> bool:
    archs = [a for a in (config.get("architectures") or ()) if isinstance(a, str)]
    return ("dspark_target_layer_ids" in config or isinstance(config.get("dspark_config"), Mapping)
            or any("DSpark" in a for a in archs) or config.get("speculators_model_type") == "dspark")


#: architecture name parts that make a draft DFlash
DFLASH_ARCHS = ("DFlash", "MuseGlimmerAssistantModel")


def _dflash(config: Mapping[str, Any]) -> bool:
    archs = [a for a in (config.get("architectures") or ()) if isinstance(a, str)]
    return (isinstance(config.get("dflash_config"), Mapping) or any(m in a for a in archs for m in DFLASH_ARCHS)
            or config.get("speculators_model_type") in ("dflash", "dflash2"))


#: every kind, by name, in detection order (the fallback last)
KINDS: dict[str, DraftKind] = {k.name: k for k in (
    DraftKind("dspark", "DSpark", _dspark, block=True, token_by_token=True,
              trainer_by_layout={"dflash": "specforge-dflash", "speculators": "speculators-dflash"},
              conventions={"sglang": "sglang-dspark", "vllm": "vllm-dflash", "vllm-v1": "vllm-v1-dflash",
                           "specforge": "specforge-dflash", "speculators": "speculators-dflash"}),
    DraftKind("dflash", "DFlash", _dflash, block=True,
              trainer_by_layout={"dflash": "dflash", "speculators": "speculators-dflash"},
              conventions={"sglang": "sglang-dflash", "vllm": "vllm-dflash", "vllm-v1": "vllm-v1-dflash",
                           "specforge": "specforge-dflash", "speculators": "speculators-dflash",
                           "modelopt": "modelopt-dflash"}),
    DraftKind("eagle3", "EAGLE-3", lambda config: True, ttt=True),
)}
#: the kind every config falls back to
FALLBACK = "eagle3"


def register(kind: DraftKind) -> None:
    """Add ``kind`` (asked before every kind registered earlier; a name already taken is replaced)."""
    KINDS.pop(kind.name, None)
    rest = dict(KINDS)
    KINDS.clear()
    KINDS.update({kind.name: kind, **rest})


def unregister(name: str) -> None:
    if name == FALLBACK:
        raise ValueError(f"{FALLBACK} is the fallback kind and stays")
    KINDS.pop(name, None)


def kind(name: str) -> DraftKind:
    """The kind called ``name``; an unknown name is bad input that lists the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise AuditError(f"draft kind {name!r}: not one eagle-audit knows (known: {', '.join(KINDS)})") from None


def detect(config: Mapping[str, Any]) -> DraftKind:
    """The kind a draft config declares (:data:`FALLBACK` when none other does)."""
    return next((k for k in KINDS.values() if k.name != FALLBACK and k.declares(config)), KINDS[FALLBACK])
