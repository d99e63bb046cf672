"""A small synthetic SGLang source tree for the probe tests: known rule shapes, and shapes the probe
must refuse to guess. ``write_tree(root)`` writes it and returns the folder to pass as ``--source``."""

from __future__ import annotations

import textwrap
from pathlib import Path

BASE_LM = '''
from torch import nn


class BaseModel(nn.Module):
    def __init__(self, config):
        self.layers = []
        self.layers_to_capture = []

    def forward(self, x):
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                pass
        return x


class FinalModel(BaseModel):
    def forward(self, x):
        x = super().forward(x)
        num_layers = len(self.layers)
        if num_layers in self.layers_to_capture:
            pass
        return x


class BaseForCausalLM(nn.Module):
    def __init__(self, config):
        self.config = config
        self.model = self._init_model(config)

    def _init_model(self, config):
        return BaseModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if not self.pp_group.is_last_rank:
            return
        if layer_ids is None:
            num_layers = len(self.model.layers)
            self.model.layers_to_capture = [1, num_layers - 2]
        else:
            self.model.layers_to_capture = [v - 1 for v in layer_ids]


EntryClass = [BaseForCausalLM]
'''

DERIVED = '''
from torch import nn

from sglang.srt.models import base_lm
from sglang.srt.models.base_lm import BaseForCausalLM, FinalModel


class DerivedForCausalLM(BaseForCausalLM):
    def _init_model(self, config):
        return FinalModel(config)


class Wrapper(nn.Module):
    def __init__(self, config, lm_cls=base_lm.BaseForCausalLM):
        self.language_model = lm_cls(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.language_model.set_eagle3_layers_to_capture(layer_ids)


class WrappedDerived(Wrapper):
    def __init__(self, config):
        super().__init__(config, lm_cls=DerivedForCausalLM)


class Plain(nn.Module):
    pass


class Dynamic(nn.Module):
    def __init__(self, config):
        arch = pick(config)
        self.model = arch(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.set_eagle3_layers_to_capture(layer_ids)


EntryClass = [DerivedForCausalLM, Wrapper, WrappedDerived, Plain, Dynamic]
'''

MOE = '''
from torch import nn


class MoeModel(nn.Module):
    def set_eagle3_layers_to_capture(self, layers_to_capture):
        self.layers_to_capture = layers_to_capture
        for layer_id in self.layers_to_capture:
            setattr(self.layers[layer_id], "_is_layer_to_capture", True)

    def forward(self, x):
        for layer in self.layers:
            if getattr(layer, "_is_layer_to_capture", False):
                pass


class MoeForCausalLM(nn.Module):
    body_cls = MoeModel

    def __init__(self, config):
        self.model = self.body_cls(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.capture_aux_hidden_states = True
        num_layers = self.config.text_config.num_hidden_layers
        if layer_ids is None:
            ids = [2, num_layers // 2, num_layers - 3]
        elif layer_ids and min(layer_ids) == 0:
            ids = list(layer_ids)
        else:
            ids = [val + 1 for val in layer_ids]
        self.model.set_eagle3_layers_to_capture(ids)


EntryClass = MoeForCausalLM
'''

ODD = '''
from torch import nn


class OddForCausalLM(nn.Module):
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            self.model.layers_to_capture = [2, 4]
        else:
            self.model.layers_to_capture = sorted(x * 2 for x in layer_ids)


class ShiftedModel(nn.Module):
    def forward(self, x):
        for i in range(3):
            if i - 1 in self.layers_to_capture:
                pass


class ShiftedForCausalLM(nn.Module):
    def __init__(self, config):
        self.model = ShiftedModel(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if layer_ids is None:
            self.model.layers_to_capture = [0]
        else:
            self.model.layers_to_capture = [v + 1 for v in layer_ids]


EntryClass = [OddForCausalLM, ShiftedForCausalLM]
'''

FILES = {
    "sglang/__init__.py": "",
    "sglang/version.py": '__version__ = "9.9.9"\n',
    "sglang/srt/models/base_lm.py": BASE_LM,
    "sglang/srt/models/derived.py": DERIVED,
    "sglang/srt/models/moe.py": MOE,
    "sglang/srt/models/odd.py": ODD,
    "sglang/srt/model_executor/spec_aux_hidden_state.py": textwrap.dedent('''
        def _resolve_eagle_aux_hidden_state(config, draft):
            layer_ids = getattr(draft.hf_config, "eagle_aux_hidden_state_layer_ids", None)
            if layer_ids is None:
                eagle_config = getattr(draft.hf_config, "eagle_config", None) or {}
                layer_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
            config.eagle_aux_hidden_state_layer_ids = layer_ids
        '''),
}


def write_tree(root: Path, files: dict[str, str] = FILES) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return root


def line_of(rel: str, needle: str, files: dict[str, str] = FILES) -> int:
    """1-based line of the first line containing ``needle`` in a written file."""
    lines = files[rel].lstrip("\n").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)
