"""A draft rewritten in SGLang's layout (``LlamaForCausalLMEagle3``, ids only in ``eagle_config``, the decoder keys
at the top level), from any layout the draft is in (the demo in speculators' own layout keeps its decoder keys in
``transformer_layer_config``); the weights file is linked, never copied or changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

#: keys of the speculators layout and of eagle-audit's own records that an SGLang-layout config does not carry
DROP = ("speculators_model_type", "speculators_config", "speculators_version", "eagle_aux_hidden_state_layer_ids",
        "eagle_audit_demo", "eagle_audit_canary", "transformer_layer_config", "auto_map")


def sglang_layout(src, out, nested) -> Path:
    src, out = Path(src), Path(out)
    out.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "config.json":
            os.symlink(f.resolve(), out / f.name)
    cfg = json.loads((src / "config.json").read_text())
    inner = cfg.get("transformer_layer_config") or {}
    new = {k: v for k, v in inner.items() if k != "transformers_version"}
    new.update({k: v for k, v in cfg.items() if k not in DROP})
    new["architectures"] = ["LlamaForCausalLMEagle3"]
    new["model_type"] = "llama"
    new.setdefault("norm_before_residual", False)
    new["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(nested)}
    (out / "config.json").write_text(json.dumps(new, indent=1))
    return out
