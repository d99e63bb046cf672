"""Launch lines for a server that hands out the target's captured states, and what each captures.

Two lines per engine (``sglang==0.5.23``, ``vllm==0.33.0``; docs/server.md cites every rule):

* **serving**: captures exactly what serving this draft feeds it. The ids are read from the draft config
  the way the engine reads them (the engine convention of probes/, :meth:`Convention.read_draft_ids`) and go
  through the same capture setter: SGLang's capture-only mode hands ``--return-aux-hidden-state-layer-ids``
  to ``model.set_eagle3_layers_to_capture`` exactly as serving hands the draft's ids
  (``spec_aux_hidden_state.py:84-110`` / ``:185-196``, ``attention_backend_setup.py:40-72``), so the
  architecture's shift applies to both; vLLM's ``extract_hidden_states`` reads
  ``eagle_aux_hidden_state_layer_ids`` from its draft config (``v1/worker/gpu/spec_decode/extract_hidden_states.py:40-49``)
  through the same ``set_eagle3_aux_hidden_state_layers`` as an EAGLE-3 draft.
* **reference**: captures every boundary the audit needs that the engine can reach (SGLang refuses
  negative ids, ``validation_hook.py:735-740``, so B0 is unreachable on the +1 rule; ids must be
  ``< num_hidden_layers``, ``spec_aux_hidden_state.py:113-129``, so B_N pre-norm only where the setter passes
  index N).

Every line is one the engine's own argument parser accepts (tests/served/test_launch.py runs SGLang's
field declarations, ``add_cli_args_from_dataclass`` and ``handle_aux_hidden_state_capture`` from the wheel).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..states import State



@dataclass(frozen=True)
class Capture:
    """What one launch captures: the states in slot order (= the server's concatenation order), each
    ``hidden_size`` wide. ``ids``: the ids the line passes (None: the engine's default)."""

    engine: str  # "sglang" or "vllm"
    states: tuple[State, ...]
    hidden_size: int
    ids: tuple[int, ...] | None = None
    dtype: str | None = None  # the precision the server computes in, where it says (None: not said)
    role: str | None = None  # the launch line it is assumed from ("serving", "reference"), where it is assumed

    @property
    def slots(self) -> int:
        return len(self.states)

    @property
    def width(self) -> int:
        return self.slots * self.hidden_size

    def to_json(self) -> dict:
        return {"engine": self.engine, "states": [s.label() for s in self.states], "hidden_size": self.hidden_size,
                "ids": None if self.ids is None else list(self.ids), "dtype": self.dtype, "role": self.role}


@dataclass(frozen=True)
class Launch:
    """A launch line (``argv``), what it captures, and notes (what it cannot reach, and how that is had)."""

    role: str  # "serving" or "reference"
    argv: tuple[str, ...]
    capture: Capture | None  # None: no line of this engine captures what serving feeds (notes say why)
    notes: tuple[str, ...] = ()
    unreachable: tuple[State, ...] = ()  # boundaries the audit asked for that this engine cannot capture

    @property
    def line(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict:
        return {"role": self.role, "line": self.line, "argv": list(self.argv),
                "capture": self.capture.to_json() if self.capture else None, "notes": list(self.notes),
                "unreachable": [s.label() for s in self.unreachable]}


@dataclass(frozen=True)
class TargetShape:
    """What the launch lines need of the target: its path as the server sees it, architecture, layers,
    hidden size."""

    path: str
    architecture: str
    num_layers: int
    hidden_size: int
    extra: Mapping[str, Any] = field(default_factory=dict)
