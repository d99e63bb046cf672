"""The trainers' own code, from the real wheels: SpecForge 0.2.0 and speculators 0.9.0 installed ``--no-deps``
into the test cache (tests/wheels.py ``installed``), plus the SGLang 0.5.14 wheel SpecForge captures through.

Only what their imports need and this environment lacks is stubbed, and only while importing: SpecForge's
``specforge.core.loss`` (a triton kernel of the loss, which a forward pass never calls) and the ``openai``,
``datasets`` and ``hs_connectors`` packages speculators' data modules import at module level. The imported
modules stay loaded for the session; ``sys.path`` and the stubs are restored at once.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import wheels

#: Modules the trainers import at module level that this environment does not have (none is called).
ABSENT = ("openai", "datasets", "hs_connectors")


class _Logger:
    """loguru's ``logger`` for speculators' converter (convert/*.py log through it): messages are dropped."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


class _Absent(types.ModuleType):
    """Stands in for a package an import names but the tested code never calls: any attribute is a new
    empty class, so ``from openai.types.chat import X`` succeeds."""

    __path__: list[str] = []

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


class _AbsentFinder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        return _Absent(spec.name)

    def exec_module(self, module):
        pass


def import_trainers(site: Path, names: tuple[str, ...]) -> dict[str, types.ModuleType]:
    """Import ``names`` from ``site`` with the stubs in place; restore ``sys.path`` and drop the stubs after."""
    if "loguru" not in sys.modules and importlib.util.find_spec("loguru") is None:
        loguru = types.ModuleType("loguru")  # only logging; kept: the converter logs when it runs
        loguru.logger = _Logger()
        sys.modules["loguru"] = loguru
    loss = types.ModuleType("specforge.core.loss")
    loss.LogSoftmaxLoss = None  # triton kernel of the training loss (core/loss.py imports triton)
    finder = _AbsentFinder()
    sys.path.insert(0, str(site))
    sys.meta_path.insert(0, finder)
    sys.modules["specforge.core.loss"] = loss
    try:
        return {n: importlib.import_module(n) for n in names}
    finally:
        sys.path.remove(str(site))
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k.split(".")[0] in ABSENT]:
            del sys.modules[k]


@pytest.fixture(scope="session")
def sglang_0_5_14() -> wheels.WheelSource:
    """The SGLang release SpecForge 0.2.0 pins (its capture rules are SpecForge's)."""
    return wheels.WheelSource(wheels.sglang_wheel(wheels.SPECFORGE_SGLANG_VERSION))


@pytest.fixture(scope="session")
def trainers() -> SimpleNamespace:
    """SpecForge's and speculators' own modules, imported from the installed wheels."""
    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    import torch

    torch._dynamo.config.disable = True  # SpecForge's RMSNorm is @torch.compile: run it eagerly on CPU
    m = import_trainers(site, (
        "specforge.algorithms.model_providers", "specforge.modeling.draft.llama3_eagle",
        "specforge.algorithms.eagle3.model", "speculators.models.utils", "speculators.models.eagle3.core",
        "speculators.models.eagle3", "speculators.config", "speculators.proposals.greedy"))
    return SimpleNamespace(
        resolve_eagle_capture_layers=m["specforge.algorithms.model_providers"].resolve_eagle_capture_layers,
        SpecForgeDraft=m["specforge.modeling.draft.llama3_eagle"].LlamaForCausalLMEagle3,
        OnlineEagle3Model=m["specforge.algorithms.eagle3.model"].OnlineEagle3Model,
        resolve_target_layer_ids=m["speculators.models.utils"].resolve_target_layer_ids,
        Eagle3DraftModel=m["speculators.models.eagle3.core"].Eagle3DraftModel,
        Eagle3SpeculatorConfig=m["speculators.models.eagle3"].Eagle3SpeculatorConfig,
        SpeculatorsConfig=m["speculators.config"].SpeculatorsConfig,
        VerifierConfig=m["speculators.config"].VerifierConfig,
        GreedyTokenProposalConfig=m["speculators.proposals.greedy"].GreedyTokenProposalConfig,
    )


@pytest.fixture(scope="session")
def eagle3_converter():
    """speculators 0.9.0's own EAGLE-3 converter class (convert/eagle/eagle3_converter.py), from the wheel."""
    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    m = import_trainers(site, ("speculators.convert.eagle.eagle3_converter",))
    return m["speculators.convert.eagle.eagle3_converter"].Eagle3Converter
