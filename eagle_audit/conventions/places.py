"""Where a draft config holds what a convention reads: the id places, the draft flags, ``use_aux_hidden_state``
and the draft's own depth. Plain reads of the config, no pipeline's semantics (those are in :mod:`.convention`)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import BadConvention

#: Where the draft's ids live, by place name: the keys to follow from the config's top level.
ID_PLACES: dict[str, tuple[str, ...]] = {
    "nested": ("eagle_config", "eagle_aux_hidden_state_layer_ids"),
    "top_level": ("eagle_aux_hidden_state_layer_ids",),
    "nested_layer_ids": ("eagle_config", "layer_ids"),
    "dflash_target_layer_ids": ("dflash_config", "target_layer_ids"),
    "dspark_target_layer_ids": ("dspark_target_layer_ids",),
    "target_layer_ids": ("target_layer_ids",),
    "dflash_layer_ids": ("dflash_config", "layer_ids"),
    "dspark_config_ids": ("dspark_config", "target_layer_ids"),
    "aux_hidden_state_layer_ids": ("aux_hidden_state_layer_ids",),  # speculators' DFlash / DSpark configs (IN-k)
}
#: The places that hold EAGLE-3 ids proper (a draft declaring ids in one an engine does not read: IDS_NOT_READ).
EAGLE_PLACES = ("nested", "top_level", "nested_layer_ids")
FLAG_PLACES = ("top_level", "nested")
DRAFT_FLAGS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")


def draft_layer_count(config: Mapping[str, Any]) -> int | None:
    """The draft's own decoder-layer count (``D`` in expressions): ``num_hidden_layers`` of its text config, as
    SGLang's DFlash reader takes it (``dflash_utils.py`` ``parse_dflash_draft_config``); None when absent."""
    node = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    v = node.get("num_hidden_layers")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def place_key(place: str) -> str:
    """The dotted config key of an id place, for messages and fixes."""
    return ".".join(ID_PLACES[place]) if place in ID_PLACES else place


def uses_aux(config: Mapping[str, Any]) -> bool:
    """False when the draft says ``eagle_config.use_aux_hidden_state: false`` (no fc, the last state only; read
    there by SGLang spec_aux_hidden_state.py:188-191, vLLM eagle3_utils.py:15-21 and llm_base_proposer.py:1674-1687,
    modelopt hf_eagle.py:488-494)."""
    nested = config.get("eagle_config")
    return not (isinstance(nested, Mapping) and nested.get("use_aux_hidden_state") is False)


def read_ids(config: Mapping[str, Any], place: str) -> tuple[int, ...] | None:
    node: Any = config
    for key in ID_PLACES[place]:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if node is None:
        return None
    if not isinstance(node, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in node):
        raise BadConvention(f"draft config: {place_key(place)} must be a list of integers, got {node!r}")
    return tuple(node)
