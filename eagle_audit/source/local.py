"""The transformers backends: a target loaded on one device (``local``) or split over devices by
accelerate (``device-map``). Both are :class:`LocalSource` over a :class:`eagle_audit.target.LoadedTarget`;
they differ only in how the target is loaded and what :attr:`SourceSpec.backend` says.

The forwards are the ones the analyses ran before the seam existed (same hooks, same early stop, same
dtypes), so every figure is unchanged: :func:`eagle_audit.capture.capture_states` (early stop after the
deepest state asked for) where no next tokens are wanted, a full forward with the hooks on otherwise;
greedy generation, the live loop's cached forwards and the decode that captures states
(``train-canary``'s data) are :mod:`eagle_audit.source.forwards`.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..states import State, all_states, stream_states
from .memo import Memo
from .spec import Counts, Decoded, Forced, SourceRequest, SourceSpec


class LiveForward:
    """KV-cached forwards of one target for the live loop (:mod:`eagle_audit.accept.live`)."""

    def __init__(self, loaded):
        self._t = loaded

    def new_cache(self):
        from .forwards import new_cache

        return new_cache(self._t.model)

    def forward(self, ids, cache, states: Iterable[State] = ()):
        """Forward ``ids`` after what ``cache`` holds: (logits [pos, vocab], {state: [pos, hidden]})."""
        from .forwards import cached_forward

        return cached_forward(self._t, ids, cache, states)

    def crop(self, cache, keep: int) -> None:
        from .forwards import crop

        crop(cache, keep)


class LocalSource:
    """A :class:`~eagle_audit.source.protocol.StateSource` over a loaded transformers target."""

    def __init__(self, loaded, backend: str = "local", counts: Counts | None = None):
        self.loaded = loaded
        self.info = loaded.info
        self.tokenizer = loaded.tokenizer
        self.device, self.dtype = loaded.device, loaded.dtype
        self.counts = counts or Counts()
        self._memo = Memo(self.counts)
        origin = (f"transformers, {loaded.device}" if loaded.device.startswith("device_map=")
                  else f"transformers on {loaded.device}")
        self.spec = SourceSpec(name=loaded.info.name, backend=backend, origin=origin,
                               num_layers=loaded.info.num_layers, hidden_size=loaded.info.hidden_size,
                               states=all_states(loaded.info.num_layers) + stream_states(loaded.info.num_layers, loaded.info.streams),
                               dtype=loaded.dtype, device=loaded.device)

    @property
    def input_device(self):
        return self.loaded.input_device

    def eos_ids(self) -> set[int]:
        from .forwards import eos_ids

        return eos_ids(self.loaded)

    # ------------------------------------------------------------------ teacher-forced states
    def _forward_one(self, ids: tuple[int, ...], states: tuple[State, ...], next_tokens: bool):
        import torch

        from ..capture import capture, capture_states

        x = torch.tensor([list(ids)])  # [1, L]
        with torch.inference_mode():
            if not next_tokens:
                caps = capture_states(self.loaded, x, states)
                return {s: t[0] for s, t in caps.items()}, None
            x = x.to(self.input_device)
            box: dict = {}
            with capture(self.loaded.stack, states, stop_early=False) as store:
                box["out"] = self.loaded.model(input_ids=x, use_cache=False)
            nxt = box.pop("out").logits[0].argmax(-1)  # [L]
            return {s: t[0] for s, t in store.tensors.items()}, nxt

    def teacher_forced(self, sequences: Sequence[Sequence[int]], states: Iterable[State], *,
                       next_tokens: bool = False, progress=None) -> list[Forced]:
        n = self.info.num_layers
        wanted = tuple(states)
        for s in wanted:
            if s.boundary > n or (s.normed and s.boundary != n):
                raise ValueError(f"{s.label()} does not exist in a target of {n} layers")
        return self._memo.forced(self._forward_one, sequences, wanted, next_tokens, progress)

    def reserve(self, states: Iterable[State], next_tokens: bool = False) -> None:
        self._memo.reserve(states, next_tokens)

    # ------------------------------------------------------------------ greedy continuations
    def _generate(self, prompts: list[tuple[int, ...]], max_new: int, batch: int, progress):
        """``accept-rate``'s generation: prompts of similar length share a batch (batch > 1)."""
        import time

        from .forwards import greedy_generate, greedy_generate_batch

        eos = self.eos_ids()
        conts: dict[int, list[int]] = {}
        seconds = 0.0
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i)) if batch > 1 else list(range(len(prompts)))
        for b in range(0, len(order), max(1, batch)):
            idx = order[b:b + max(1, batch)]
            t0 = time.perf_counter()
            if len(idx) == 1:
                outs = [greedy_generate(self.loaded, list(prompts[idx[0]]), max_new, eos)]
            else:
                outs = greedy_generate_batch(self.loaded, [prompts[i] for i in idx], max_new, eos)
            seconds += time.perf_counter() - t0
            conts.update(zip(idx, outs))
            if progress:
                progress(len(conts), len(prompts))
        return [conts[i] for i in range(len(prompts))], seconds

    def continuations(self, prompts: Sequence[Sequence[int]], max_new: int, *, batch: int = 16,
                      progress=None) -> tuple[list[tuple[int, ...]], float]:
        return self._memo.continuations(self._generate, prompts, max_new, batch, progress)

    # ------------------------------------------------------------------ decoded text with its states
    def decode(self, prompts: Sequence[Sequence[int]], states: Iterable[State], max_new: int, *, batch: int = 16,
               temperature: float = 0.0, seed: int = 0, out_device: str = "cpu", progress=None) -> list[Decoded]:
        from .forwards import decode_states

        wanted = tuple(dict.fromkeys(states))
        out = decode_states(self.loaded, prompts, wanted, max_new, batch, temperature, seed, out_device, progress)
        self.counts.decodes += len(prompts)
        return out

    # ------------------------------------------------------------------ what the draft runtime borrows
    def embedding(self):
        return self.loaded.model.get_input_embeddings().weight.detach()

    def lm_head(self):
        head = self.loaded.model.get_output_embeddings()
        return head.weight.detach() if head is not None else self.embedding()

    def live(self) -> LiveForward:
        return LiveForward(self.loaded)

    def weights(self):
        return self.loaded

    def forget(self) -> None:
        self._memo.forget()


def open_local(request: SourceRequest, status=None) -> LocalSource:
    """``local``: the target loaded on ``request.device`` (``device-map``: split by ``request.device_map``)."""
    from ..target import load_target

    loaded = load_target(request.target, request.device, request.dtype, request.device_map, progress=status)
    src = LocalSource(loaded, "device-map" if request.device_map else "local")
    src.counts.loads += 1
    return src
