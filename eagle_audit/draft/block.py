"""DFlash and DSpark drafts: which kind a draft is, what its config declares, and which conventions
audit it.

Both families read the target's aux hidden states exactly as EAGLE-3 does (an ``fc`` over the concatenated
states, ``fc.weight``: [hidden, n x target_hidden], so the slot count comes from the weights as for EAGLE-3),
but declare their ids in other places and under another convention, often next to EAGLE-3 ids in one config.

Kinds (``DraftSpec.kind``):

* ``dspark``: ``dspark_target_layer_ids`` or ``dspark_config`` in the config, an architecture naming DSpark,
  or ``speculators_model_type: dspark``;
* ``dflash``: ``dflash_config``, an architecture naming DFlash (``DFlashDraftModel``, ``DFlash2DraftModel``,
  ``MuseGlimmerAssistantModel``, the speculators ``DFlashSpeculator``), or ``speculators_model_type``
  ``dflash`` / ``dflash2``;
* ``eagle3``: everything else.

Layouts: ``dflash`` (the z-lab format SpecForge, modelopt, SGLang and vLLM read: ``dflash_config`` and top-level
keys), ``speculators`` (``speculators_model_type`` with ``aux_hidden_state_layer_ids``, IN-k).

:func:`convention_for` picks the convention of a pipeline for a draft's kind: ``sglang`` -> ``sglang-dflash`` /
``sglang-dspark``, ``vllm`` -> ``vllm-dflash``, ``specforge`` -> ``specforge-dflash``...; a pipeline with no
rules for the kind is bad input (one line, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..conventions import Convention, place_key, read_ids, same_release
from ..errors import AuditError, BadCheckpoint, UnknownConvention

from ..kinds import KINDS, detect

#: The id places a block draft may declare, in the order eagle-audit reports them.
BLOCK_PLACES = ("dflash_target_layer_ids", "target_layer_ids", "dspark_target_layer_ids", "dspark_config_ids",
                "aux_hidden_state_layer_ids")
EAGLE_ID_PLACES = ("top_level", "nested")


def draft_kind(config: Mapping[str, Any]) -> str:
    """The name of the kind ``config`` declares (:func:`eagle_audit.kinds.detect`)."""
    return detect(config).name


def block_layout(config: Mapping[str, Any]) -> str:
    return "speculators" if config.get("speculators_model_type") else "dflash"


@dataclass(frozen=True)
class BlockSpec:
    """What a DFlash / DSpark config declares: the ids in each place (as written), its own layer count, the
    block size, the trained target's depth, and EAGLE-3 ids written next to them (a mixed config)."""

    kind: str
    ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # place -> ids
    num_draft_layers: int | None = None
    block_size: int | None = None
    num_target_layers: int | None = None
    markov_rank: int | None = None
    eagle_ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": self.kind, "ids": {place_key(p): list(v) for p, v in self.ids.items()},
                "num_draft_layers": self.num_draft_layers, "block_size": self.block_size,
                "num_target_layers": self.num_target_layers, "markov_rank": self.markov_rank,
                "eagle_ids": {place_key(p): list(v) for p, v in self.eagle_ids.items()}}


def _int(config: Mapping[str, Any], *keys: str) -> int | None:
    """The first positive integer among ``keys``, each a top-level key or ``node.key``."""
    for key in keys:
        node: Any = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, int) and not isinstance(node, bool) and node > 0:
            return node
    return None


def read_block(config: Mapping[str, Any], where: str) -> BlockSpec:
    """The block-draft facts of a block draft's config (the block family's reading, :mod:`.family`); a malformed id
    list is bad input."""
    kind = detect(config).name
    for key in ("dflash_config", "dspark_config", "text_config"):
        if config.get(key) is not None and not isinstance(config[key], Mapping):
            raise BadCheckpoint(f"{where}: {key} must be a JSON object, got {type(config[key]).__name__}")
    ids, eagle = {}, {}
    for places, out in ((BLOCK_PLACES, ids), (EAGLE_ID_PLACES, eagle)):
        for p in places:
            try:
                found = read_ids(config, p)
            except AuditError:
                raise BadCheckpoint(f"{where}: {place_key(p)} must be a list of integers") from None
            if found is not None:
                out[p] = found
    return BlockSpec(kind, ids,
                     _int(config, "text_config.num_hidden_layers", "num_hidden_layers",
                          "transformer_layer_config.num_hidden_layers"),
                     _int(config, "dflash_config.block_size", "block_size", "dspark_block_size"),
                     _int(config, "dflash_config.num_target_layers", "num_target_layers"),
                     _int(config, "dspark_markov_rank", "dspark_config.markov_rank", "dflash_config.markov_rank",
                          "markov_rank"),
                     eagle)


def convention_for(conv: Convention, kind: str, notes: list[str] | None = None) -> Convention:
    """The convention of ``conv``'s pipeline that describes ``kind`` drafts: ``conv`` itself when it does, else
    the built-in block convention of the same pipeline; bad input when there is none."""
    if kind in conv.draft_kinds:
        return conv
    name = KINDS[kind].convention_name(conv.name) if kind in KINDS else None
    if name is None:
        known = sorted(set(KINDS[kind].conventions.values())) if kind in KINDS else []
        raise UnknownConvention(f"{conv.title} {conv.version} ({conv.path or conv.name}) has no rules for {kind} drafts",
                                hint=f"{kind} rules: {', '.join(known) or 'none built in'}; or a convention file with "
                                     f"\"draft_kinds\": [\"{kind}\"]")
    out = same_release(conv, name)  # the same release of the same engine
    if notes is not None:
        notes.append(f"{kind} draft: {conv.kind} rules of {out.title} {out.version} ({out.name})")
    return out


def require_simulated(draft, command: str) -> None:
    """Bad input (one line, exit 2) when ``command`` is asked to simulate drafting by a kind it cannot simulate
    (:attr:`eagle_audit.kinds.DraftKind.simulated`)."""
    k = KINDS.get(getattr(draft, "kind", "eagle3"))
    if k is not None and not k.simulated:
        raise AuditError(f"{draft.path}: a {k.name} draft: {k.not_simulated.replace('accept-rate', command, 1)}")


#: The boundary an id of each place names: the shift from id to boundary (OUT-k places +1, IN-k places 0).
PLACE_SHIFT = {"dflash_target_layer_ids": 1, "target_layer_ids": 1, "dspark_target_layer_ids": 1, "dspark_config_ids": 1,
               "aux_hidden_state_layer_ids": 0, "top_level": 0, "nested": 1}


def named_boundaries(place: str, ids) -> tuple[int, ...]:
    """The boundaries the ids of ``place`` name under that place's own convention: DFlash / DSpark ids are HF
    ``hidden_states[k + 1]`` (OUT-k); top-level EAGLE-3 ids are vLLM's (IN-k); nested ones SGLang's (OUT-k)."""
    return tuple(i + PLACE_SHIFT[place] for i in ids)
