"""The draft floor's entry per draft family (:class:`eagle_audit.kinds.FamilyRegistry` ``DRAFT_FAMILIES``): what
differs per family when a draft is read and fitted to the rules it is audited by. The two built in: ``eagle3`` (the
EAGLE-3 layouts of :mod:`.read` alone) and ``block`` (DFlash / DSpark: :mod:`.block`'s facts and layouts, each
pipeline's convention for the kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..kinds import DraftKind, FamilyRegistry, detect
from .block import block_layout, read_block


@dataclass(frozen=True)
class DraftFamily:
    #: (config, where) -> the family's own facts of a config (``DraftSpec.block``); None: none beyond EAGLE-3's
    read: Callable[[Mapping[str, Any], str], Any] | None = None
    #: config -> the draft's layout; None: :mod:`.read`'s EAGLE-3 layouts (from the config and the weight names)
    layout: Callable[[Mapping[str, Any]], str] | None = None
    #: a pipeline's rules for these drafts are its convention for the kind (:func:`.block.convention_for`, the kind's
    #: ``conventions``), the trainer's too; False: the trainer's own pipeline choice (``resolution.pick_pipeline``)
    kind_conventions: bool = False
    #: the engines size their drafting from the draft's block (vLLM ``num_speculative_tokens`` = ``block_size`` - 1,
    #: SGLang's draft token count; :mod:`eagle_audit.engines`), not from the audit's steps
    blocks: bool = False
    #: ``layers``' DRAFT_CONFIG_KEY check applies: the engines build these drafts with the draft classes of
    #: :mod:`eagle_audit.conventions.draft_classes`, sized from the config's keys
    config_keys: bool = False


DRAFT_FAMILIES = FamilyRegistry("draft", "reading")
DRAFT_FAMILIES.register("eagle3", DraftFamily(config_keys=True))
DRAFT_FAMILIES.register("block", DraftFamily(read_block, block_layout, kind_conventions=True, blocks=True))


def draft_family(kind: DraftKind | Mapping[str, Any]) -> DraftFamily:
    """The entry of a kind's family (or of the kind a draft config declares)."""
    return DRAFT_FAMILIES.of(kind if isinstance(kind, DraftKind) else detect(kind))


def family_facts(config: Mapping[str, Any], where: str) -> Any:
    """The facts a config's family reads beyond EAGLE-3's (a block draft's :class:`.block.BlockSpec`), or None."""
    read = draft_family(config).read
    return read(config, where) if read is not None else None
