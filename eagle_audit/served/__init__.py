"""States read from a running engine: what SGLang or vLLM really captures for the draft.

* :mod:`.launch`: the launch lines (serving this draft, and a reference server of every boundary) and the
  :class:`Capture` each gives;
* :mod:`.sglang`: ``POST /generate`` with ``return_hidden_states`` (capture-only server), read as it streams
  (:mod:`.stream`);
* :mod:`.vllm`: ``extract_hidden_states`` + ``ExampleHiddenStatesConnector`` safetensors files;
* :mod:`.compare`: each served slot against the local capture of every boundary, and the findings
  ``ENGINE_STATE_MISMATCH`` / ``ENGINE_STATE_SHIFTED``.

docs/server.md cites every engine fact with its file:line in the ``sglang==0.5.23`` / ``vllm==0.33.0`` wheels.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..accept.server import ServerOptions
from .compare import COS_MIN, REL_MAX, SlotMatch, compare_slots, served_findings
from .launch import Capture, Launch, TargetShape, sglang_reference, sglang_serving, vllm_reference, vllm_serving
from .sglang import ServedStates, read_sglang_states
from .stream import BadStates, StatesReader
from .vllm import read_vllm_states

__all__ = ["BadStates", "COS_MIN", "Capture", "Launch", "REL_MAX", "ServedStates", "ServerOptions", "SlotMatch",
           "StatesReader", "TargetShape", "compare_slots", "read_served_states", "read_sglang_states",
           "read_vllm_states", "served_findings", "sglang_reference", "sglang_serving", "vllm_reference",
           "vllm_serving"]


def read_served_states(opts: ServerOptions, prompts: Sequence[Sequence[int]], capture: Capture, *,
                       max_new_tokens: int = 1, hidden_states_dir: str | None = None,
                       progress: Callable[[int, int, int], None] | None = None,
                       next_tokens: bool = False) -> tuple[ServedStates, ...]:
    """Every prompt's served states, from the server kind ``capture.engine`` names (SGLang in-band; vLLM
    from ``hidden_states_dir``, the server's ``shared_storage_path`` as this machine sees it); with
    ``next_tokens`` the target's argmax after every position too (SGLang ``input_top_logprobs``, vLLM
    ``prompt_logprobs``)."""
    if capture.engine == "vllm":
        if hidden_states_dir is None:
            from ..errors import BadOption, param

            raise BadOption(f"a vLLM server writes the states to its disk: name that folder ({param('hidden_states_dir')})")
        return read_vllm_states(opts, prompts, capture, hidden_states_dir, max_new_tokens, progress, next_tokens)
    return read_sglang_states(opts, prompts, capture, max_new_tokens, progress, next_tokens)
