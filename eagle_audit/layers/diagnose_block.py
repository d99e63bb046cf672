"""Findings of DFlash / DSpark drafts only, registered with :func:`eagle_audit.layers.checks.check`.

``BLOCK_IDS_DISAGREE``: a block-draft config that also carries EAGLE-3 ids (a mixed config, such as the
Nemotron 3.5 NVFP4 drafts) names its states twice, in two conventions: DFlash / DSpark ids are HF
``hidden_states[k + 1]`` (B_{k+1}), a top-level ``eagle_aux_hidden_state_layer_ids`` is read by vLLM verbatim
(B_k, and first: it wins over ``dflash_config``), a nested one by SGLang with +1. SGLang itself recognises the
Nemotron 3.5 layout only when ``eagle_aux_hidden_state_layer_ids == target_layer_ids + 1``
(``speculative/dflash_utils.py`` ``is_nemotron_35_draft_config``), that is when both name the same states.
"""

from __future__ import annotations

from typing import Iterable

from ..conventions import place_key
from ..draft.block import named_boundaries
from .checks import Context, check
from .result import Finding


@check
def block_ids_disagree(ctx: Context) -> Iterable[Finding]:
    block = ctx.draft.block
    if block is None or not block.eagle_ids or not block.ids:
        return
    own_place = next(iter(block.ids))
    own = named_boundaries(own_place, block.ids[own_place])
    for place, ids in block.eagle_ids.items():
        named = named_boundaries(place, ids)
        if named == own:
            continue
        read = ctx.served.wiring.ids_source
        by = (f"{ctx.eng} reads {place_key(read)}" if read in (place, own_place) else
              f"{ctx.eng} reads neither ({read})")
        differs = list(ctx.served.states) != list(ctx.trained.states)
        yield Finding(
            "BLOCK_IDS_DISAGREE", "error" if differs else "warning", None,
            f"The config names its states twice: {place_key(place)} = {list(ids)} names "
            f"[{', '.join(f'B{b}' for b in named)}], {place_key(own_place)} = {list(block.ids[own_place])} names "
            f"[{', '.join(f'B{b}' for b in own)}] (DFlash ids are hidden_states[k + 1]); {by}.",
            "Which states the draft gets depends on which key an engine reads first: vLLM reads the top-level "
            "EAGLE-3 ids before dflash_config, SGLang only the DFlash places. SGLang's own check of the Nemotron 3.5 "
            "layout expects eagle_aux_hidden_state_layer_ids == target_layer_ids + 1 (dflash_utils.py:470-496).",
            f"Write {place_key(place)} = {[b - (1 if place == 'nested' else 0) for b in own]} (the same states as "
            f"{place_key(own_place)}), or remove it.")
