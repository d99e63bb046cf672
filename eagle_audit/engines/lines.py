"""Every launch line for one target and one draft, per engine: what `eagle-audit launch` prints.

Per engine convention (``sglang``; ``vllm``, the V2 runner; ``vllm-v1``, the V1 runner, which the CPU build runs):

* ``speculative``: the engine serving the draft with EAGLE-3 speculative decoding (`accept-rate --server`);
* ``serving``: capture-only, what serving this draft feeds it, the ids read as that engine reads them
  (`layers --server`: the served slots);
* ``reference``: capture-only, every boundary the engine reaches (`layers --server`: every slot; `fingerprint`
  and `accept-rate --states-server` on a target whose weights are not here).

The lines themselves are :mod:`eagle_audit.engines.sglang.launch` and :mod:`eagle_audit.engines.vllm.launch`
(their rules: :mod:`eagle_audit.engines.launch`); this module only gathers them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from ..conventions import get_convention
from ..errors import BadOption, param, shown
from .launch import Launch, TargetShape

#: the built-in engine conventions that have launch lines (registry.line_variants(): with engines registered later)
LINE_ENGINES = ("sglang", "vllm", "vllm-v1")


@dataclass(frozen=True)
class EngineLines:
    engine: str  # the engine convention's name
    title: str
    speculative: Launch
    serving: Launch
    reference: Launch

    def to_json(self) -> dict:
        return {"engine": self.engine, "title": self.title, "speculative": self.speculative.to_json(),
                "serving": self.serving.to_json(), "reference": self.reference.to_json()}


@dataclass(frozen=True)
class LaunchLines:
    target: str  # as the lines name it (the server's view)
    draft: str
    storage: str  # vLLM's shared_storage_path in the capture lines
    engines: tuple[EngineLines, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"schema": "eagle-audit/launch/1", "target": self.target, "draft": self.draft, "storage": self.storage,
                "engines": [e.to_json() for e in self.engines], "notes": list(self.notes)}


def launch_lines(target: str, draft: str, engines: Sequence[str] = LINE_ENGINES, storage: str = "DIR",
                 num_steps: int = 3) -> LaunchLines:
    """The launch lines for ``target`` (a local directory, a hub id, or a .gguf file: then its converted
    safetensors directory, which an engine can load) and ``draft`` (a draft directory)."""
    from ..draft.read import read_draft
    from ..target import materialise, target_info

    from .registry import for_variant, line_variants

    known = line_variants()
    unknown = [e for e in engines if e.partition("@")[0].lower() not in known]  # NAME@RELEASE: that release's rules
    if unknown or not engines:
        raise BadOption(f"{param('engines')} {shown(list(engines))}: launch lines exist for {', '.join(known)}")
    notes = []
    served_as = target
    if str(target).endswith(".gguf"):
        served_as = str(materialise(target))
        notes.append(f"target {target} is a GGUF file; the lines name its converted safetensors directory "
                     f"{served_as}, which an engine loads")
    info = target_info(str(target))
    spec = read_draft(draft)
    shape = TargetShape(served_as, info.architecture, info.num_layers, info.hidden_size)
    draft_path = os.path.abspath(draft)
    out = []
    for given in engines:
        name = given.partition("@")[0].lower()
        conv = get_convention(given, "engine")
        eng = for_variant(name)
        lines = (eng.speculative(served_as, draft_path, num_steps, name), _serving(eng, spec, shape, storage, conv),
                 eng.reference(shape, None, storage, conv))
        builtin = get_convention(name, "engine")
        if conv.version != builtin.version:  # the captures follow the release's rules; the flags are the built-in's
            notes.append(f"{conv.label()}: the captures follow its rules; the flags are {builtin.title} "
                         f"{builtin.version}'s (read in its wheel), which an older release may spell otherwise")
        out.append(EngineLines(name, conv.label(), *lines))
    return LaunchLines(served_as, draft_path, storage, tuple(out), tuple(notes))


def _serving(eng, spec, shape: TargetShape, storage: str, conv) -> Launch:
    """The serving capture line, with the rules of the pipeline `layers` audits this draft's kind with (a DFlash /
    DSpark draft: that engine's block convention, :func:`eagle_audit.draft.block.convention_for`), so that what it
    says it captures is what `layers` says the engine feeds."""
    from ..draft.block import convention_for
    from ..draft.family import draft_family
    from ..errors import AuditError

    if draft_family(spec.draft_kind).kind_conventions:
        try:
            conv = convention_for(conv, spec.kind)
        except AuditError as e:
            return Launch("serving", (), None, (e.message,))
    return eng.serving(spec.config, shape, storage, conv)
