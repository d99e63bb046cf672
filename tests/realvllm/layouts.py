"""Draft layouts for the real-engine tier: the shipped demo draft's weights (eagle_audit/data/demo-draft-v2,
trained on [B0, B3, B16] of SmolLM2-135M, reduced vocabulary 1536 with ``d2t``: every layout carries a draft
vocabulary mapping) under rewritten configs. The weights file is linked, never copied or changed.

Each :class:`Layout` says what the engine should do with it (``outcome``): ``serve`` (it loads and drafts),
``refused_at_start`` (the server never becomes healthy) or ``dies_at_first_request``. These are expectations of
the test, checked against the running engine; the tool's verdicts are checked against what the engine did.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from eagle_audit.demo import demo_draft

TRAINED = [0, 3, 16]  # the demo's trained boundaries
DEFAULT_N30 = [2, 15, 27]  # vLLM's default [2, N//2, N-3] on SmolLM2 (N = 30)


def speculators_config() -> dict:
    """The demo's config as shipped: speculators 0.9.0's own layout."""
    return json.loads((Path(demo_draft()) / "config.json").read_text())


def sglang_config(nested=None, top=None, **extra) -> dict:
    """The demo in SGLang's layout: ``LlamaForCausalLMEagle3``, the decoder keys at the top level."""
    s = speculators_config()
    cfg = {"architectures": ["LlamaForCausalLMEagle3"],
           **{k: v for k, v in s["transformer_layer_config"].items() if k != "transformers_version"},
           "draft_vocab_size": s["draft_vocab_size"], "target_hidden_size": s["target_hidden_size"],
           "norm_before_residual": False}
    if nested is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(nested)}
    if top is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(top)
    cfg.update(extra)
    return cfg


def _spec(**change) -> Callable[[], dict]:
    def make() -> dict:
        cfg = speculators_config()
        for k, v in change.items():
            if v is None:
                cfg.pop(k, None)
            else:
                cfg[k] = copy.deepcopy(v)
        return cfg
    return make


def _old_demo() -> dict:
    """The demo as shipped until 2026-12-01: a top-level ``model_type`` beside ``Eagle3Speculator``, the layer keys
    at the top level, no ``transformer_layer_config`` or ``proposal_methods``."""
    s = speculators_config()
    layer = s["transformer_layer_config"]
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "model_type": "llama",
            "speculators_config": {"algorithm": "eagle3", "verifier": s["speculators_config"]["verifier"]},
            "eagle_aux_hidden_state_layer_ids": TRAINED, "norm_before_residual": False,
            **{k: layer[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                     "intermediate_size", "num_hidden_layers", "hidden_act", "rms_norm_eps",
                                     "vocab_size", "max_position_embeddings", "tie_word_embeddings")},
            "rope_theta": layer["rope_parameters"]["rope_theta"], "target_hidden_size": 576, "draft_vocab_size": 1536}


@dataclass(frozen=True)
class Layout:
    name: str
    make: Callable[[], dict]
    outcome: str = "serve"  # serve | refused_at_start | dies_at_first_request
    served: tuple[int, ...] | None = None  # the ids the worker should log ("Using auxiliary layers ...")
    trained: tuple[int, ...] = tuple(TRAINED)  # what the audit is told was trained (--trained-boundaries)
    default_ids: bool = False  # the worker takes the model's default: it logs no ids (gpu_model_runner.py:5239-5247)

    def write(self, root: Path) -> Path:
        out = root / self.name
        if not out.exists():
            out.mkdir(parents=True)
            (out / "config.json").write_text(json.dumps(self.make(), indent=2) + "\n")
            (out / "model.safetensors").symlink_to(Path(demo_draft()) / "model.safetensors")
        return out


SERVED = (
    # speculators 0.9.0's layout: ids at the top level (the demo as shipped), none, both places
    Layout("spec", speculators_config, served=(0, 3, 16)),
    Layout("spec-no-ids", _spec(eagle_aux_hidden_state_layer_ids=None), served=tuple(DEFAULT_N30), default_ids=True),
    Layout("spec-both", _spec(eagle_config={"eagle_aux_hidden_state_layer_ids": DEFAULT_N30}), served=(0, 3, 16)),
    # norm_before_residual: true (the demo, trained with false, says false); absent is the loader's default, True
    # (algos.py:33-35), which serves the same draft as true: left out for time (measured once on 2026-12-01:
    # live 1.202, simulated 1.199, per position live 0.163 0.036 0.003, simulated 0.160 0.036 0.003, as true)
    Layout("spec-nbr-true", _spec(norm_before_residual=True), served=(0, 3, 16)),
    # SGLang's layout: nested, top level, both places, SGLang's +1 spelled in vLLM's verbatim coordinate
    Layout("sglang-nested", lambda: sglang_config(nested=TRAINED), served=(0, 3, 16)),
    Layout("sglang-top", lambda: sglang_config(top=TRAINED), served=(0, 3, 16)),
    Layout("sglang-both", lambda: sglang_config(nested=DEFAULT_N30, top=TRAINED), served=(0, 3, 16)),
    Layout("sglang-plus1", lambda: sglang_config(nested=[i + 1 for i in TRAINED]), served=(1, 4, 17)),
)

REFUSED = (
    Layout("old-demo-model-type", _old_demo, outcome="refused_at_start"),
    # SGLang's spelling of [B0, B3, B16] ([-1, 2, 15]): the V1 runner takes the ids verbatim and captures 2 states
    Layout("sglang-minus1", lambda: sglang_config(nested=[-1, 2, 15]), outcome="dies_at_first_request"),
)


def find(name: str) -> Layout:
    return next(lay for lay in SERVED + REFUSED if lay.name == name)


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())
