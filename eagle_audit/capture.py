"""Scoped forward hooks that capture canonical states of a target's residual stream.

``with capture(stack, states) as store: model(input_ids)`` registers hooks only for the requested
states, removes them in ``finally``, and stops the forward (by an internal exception) right after
the deepest module whose output is needed, so capturing up to boundary b costs about b/N of a full
forward.

Store layout (``CaptureStore.tensors``):

  =====================  =============================  ===================================
  key                    hook                           tensor
  =====================  =============================  ===================================
  ``State(0)``           pre-hook on ``layers[0]``      [batch, pos, hidden] embedding output
  ``State(k)``, 0<k<=N   hook on ``layers[k-1]``        [batch, pos, hidden] residual stream
  ``State(N, normed)``   hook on the final norm         [batch, pos, hidden] post-norm state
  =====================  =============================  ===================================

A hyper-connection target (``stack.streams`` > 1) gives the same hooks [batch, pos, streams, hidden]; the store
keeps the requested view (docs/coordinate.md), still [batch, pos, hidden]:

  ``State(k)``           the mean over the streams (``.mean(dim=2)`` in the model's dtype: vLLM 0.34.0's
                         ``aux_recon.mean(dim=1)``, SGLang 0.5.23's ``mhc_stream_mean``)
  ``State(k, stream="s<i>")``  stream i
  ``State(k, stream="mix")``   hook on ``layers[k].attn_hc``: its last output, the collapsed input of layer k

Tensors are detached and kept in the model's dtype on its device; callers move or upcast them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch

from .errors import UnknownArchitecture
from .states import MIX, State, forward_order, stream_index
from .target import LayerStack, LoadedTarget


class _StopForward(Exception):
    """Raised by the last needed hook to skip the rest of the forward."""


@dataclass
class CaptureStore:
    tensors: dict[State, torch.Tensor] = field(default_factory=dict)

    def __getitem__(self, state: State) -> torch.Tensor:
        return self.tensors[state]

    def __contains__(self, state: State) -> bool:
        return state in self.tensors


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


@contextmanager
def capture(stack: LayerStack, states: Iterable[State], stop_early: bool = True) -> Iterator[CaptureStore]:
    """Hooks for ``states`` on ``stack``; use around one forward call wrapped by :func:`run_forward`."""
    wanted = sorted(set(states), key=forward_order)  # Bk, Bk.s<i>, Bk.mix, then B(k+1)
    n = len(stack)
    streams = getattr(stack, "streams", 1)
    for s in wanted:
        if s.boundary > n or (s.normed and s.boundary != n) or (s.stream == MIX and s.boundary >= n):
            raise ValueError(f"{s.label()} does not exist in a target of {n} layers")
        if s.stream and streams == 1:
            raise UnknownArchitecture(f"{stack.path}: {s.label()} names a hyper-connection view; this target has a "
                                      f"single residual stream (use B{s.boundary})")
        i = stream_index(s.stream)
        if i is not None and i >= streams:
            raise UnknownArchitecture(f"{stack.path}: {s.label()}: this target has {streams} hyper-connection "
                                      f"streams (s0..s{streams - 1})")
    store = CaptureStore()
    handles = []
    # the deepest module whose output is needed: the final norm, else layer max(k)-1, else layer 0's input
    deepest = wanted[-1] if wanted else None

    def save(state: State, tensor: torch.Tensor, last: bool) -> None:
        if isinstance(tensor, torch.Tensor) and streams > 1 and not state.normed and state.stream != MIX:
            if tensor.dim() != 4 or tensor.shape[2] != streams:
                raise UnknownArchitecture(f"{stack.path}: {state.label()} is {list(tensor.shape)}, not [batch, "
                                          f"tokens, {streams} streams, hidden]")
            i = stream_index(state.stream)
            tensor = tensor.mean(dim=2) if i is None else tensor[:, :, i]  # [batch, pos, hidden]
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 3:
            shape = list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise UnknownArchitecture(f"{stack.path}: {state.label()} is {shape}, not [batch, tokens, hidden]: no "
                                      "single residual stream to audit")
        store.tensors[state] = tensor.detach()
        if last and stop_early:
            raise _StopForward

    layers_done = [False]  # the final norm counts only after the last layer (NanoChat also runs it before layer 0)

    def done(m, a, out) -> None:
        layers_done[0] = True

    try:
        if any(s.normed for s in wanted):
            handles.append(stack.layers[n - 1].register_forward_hook(done))
        for s in wanted:
            last = s == deepest
            if s.stream == MIX:  # the attention hyper-connection's collapse: (..., collapsed) in every mHC family
                handles.append(stack.layers[s.boundary].attn_hc.register_forward_hook(
                    lambda m, a, out, s=s, last=last: save(s, out[-1], last)))
            elif s.normed:
                handles.append(stack.final_norm.register_forward_hook(
                    lambda m, a, out, s=s, last=last: save(s, _first(out), last) if layers_done[0] else None))
            elif s.boundary == 0:
                def pre(m, args, kwargs, s=s, last=last):
                    save(s, args[0] if args else kwargs["hidden_states"], last)
                handles.append(stack.layers[0].register_forward_pre_hook(pre, with_kwargs=True))
            else:
                handles.append(stack.layers[s.boundary - 1].register_forward_hook(
                    lambda m, a, out, s=s, last=last: save(s, _first(out), last)))
        yield store
    finally:
        for h in handles:
            h.remove()


def run_forward(model, **inputs) -> None:
    """Run a forward, treating the early stop as normal completion."""
    try:
        model(**inputs)
    except _StopForward:
        pass


@torch.inference_mode()
def capture_states(target: LoadedTarget, input_ids: torch.Tensor, states: Iterable[State],
                   stop_early: bool = True) -> dict[State, torch.Tensor]:
    """Capture ``states`` for ``input_ids`` [batch, pos]: returns State -> [batch, pos, hidden]."""
    ids = input_ids.to(target.input_device)
    with capture(target.stack, states, stop_early) as store:
        run_forward(target.model, input_ids=ids, use_cache=False)
    return dict(store.tensors)


def hooks_left(model) -> int:
    """Forward hooks and pre-hooks still registered anywhere on ``model`` (for tests)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


from . import api_module as _api_module  # noqa: E402

_api_module(__name__)  # callable as eagle_audit.api.capture
