"""The ``server`` state source: every target state from a running SGLang or vLLM server (the no-weights mode).

The target directory holds ``config.json`` and the tokenizer (and, optionally, ``embed_tokens.safetensors``:
the input embedding and output head alone, which the local draft runtime borrows, see :meth:`embedding`);
the server was started with the reference launch line (:func:`eagle_audit.engines.sglang.launch.sglang_reference`),
so it captures every boundary it can reach. What it captures is read from the server, not assumed: SGLang's
``/server_info`` carries its resolved arguments (``server_args.resolved_dict()``, with
``return_aux_hidden_state_layer_ids``: ``srt/utils/common.py:3584-3592``, ``entrypoints/http_server.py:864-890``), put through the engine convention's capture rule; vLLM's files carry ``K``,
matched against the reference and serving lines.

* ``teacher_forced``: one ``/generate`` (1 new token) per sequence not memoised; a state the server does not
  capture is refused (:class:`CannotGive`) with the reference launch line; ``next_tokens`` (the argmax at
  every position, ``fingerprint``'s labels) come with the same request: SGLang's ``input_top_logprobs``
  (:mod:`eagle_audit.engines.sglang.states`), vLLM's ``prompt_logprobs`` (:data:`eagle_audit.engines.vllm.states.NO_NEXT_TOKENS`).
* ``continuations``: the server's greedy continuation of ``max_new`` tokens, asked for ``max_new + 1``: the
  last output token is never fed, so the states of every kept token come with the one request and are
  memoised for ``prompt + continuation`` (what ``accept-rate`` and ``fingerprint`` teacher-force next: no
  second request), with the argmax at every position when reserved (:meth:`reserve`). A continuation the
  server ends at an EOS token is memoised as ``prompt + continuation[:-1]`` (the EOS token is never fed);
  teacher-forcing it whole is then one more request. Assumed: the first ``max_new`` greedy tokens of a
  ``max_new + 1`` request are those of a ``max_new`` one (one request at a time, same server).
* ``embedding`` / ``lm_head``: from ``embed_tokens.safetensors`` in the target directory
  (``model.embed_tokens.weight``, ``lm_head.weight``), else refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..engines.http import DEFAULT_DEADLINE, DEFAULT_TIMEOUT
from ..engines.launch import Capture, TargetShape
from ..engines.options import STATES_FROM, Server, detect  # noqa: F401 (STATES_FROM: the earlier import path)
from ..engines.registry import engine
from ..errors import BadOption, param
from .memo import Memo
from .spec import (EMBEDDING, GENERATE, LM_HEAD, NEXT_TOKENS, TEACHER_FORCED, CannotGive, Counts, Forced,
                           SourceRequest, SourceSpec)
from ..states import State

#: the file of a weights-free target directory that holds only the embedding (and head) the draft borrows
EMBED_FILE = "embed_tokens.safetensors"
#: the earlier name of :class:`eagle_audit.engines.options.Server` (deprecated: one release)
StatesServer = Server


def server_capture(server: Server, shape: TargetShape) -> Capture:
    """What the running server captures: asked of the server where its engine says (SGLang ``/server_info``),
    else the reference line assumed (vLLM: its files carry ``K``, matched against the lines when read)."""
    return engine(detect(server)).server_capture(server, shape, server.hidden_states_dir)


class ServedSource:
    """A :class:`~eagle_audit.source.protocol.StateSource` whose states come from a server."""

    def __init__(self, request: SourceRequest, server: Server, status=None):
        from ..target import target_info

        self.request, self.server = request, server
        self.info = target_info(os.fspath(request.target))
        self.tokenizer = _tokenizer(request.target)
        self.device, self.dtype = "cpu", "float32"
        self.counts = Counts()
        self._memo = Memo(self.counts)
        shape = TargetShape(os.fspath(request.target), self.info.architecture, self.info.num_layers,
                            self.info.hidden_size)
        if status:
            status(f"asking {server.url} what it captures")
        self.capture = server_capture(server, shape)
        self.counts.loads += 1
        self._embed_file = Path(request.target) / EMBED_FILE
        gives = {TEACHER_FORCED, NEXT_TOKENS, GENERATE} | ({EMBEDDING, LM_HEAD} if self._embed_file.exists() else set())
        labels = ", ".join(s.label() for s in self.capture.states)
        self.spec = SourceSpec(name=self.info.name, backend="server",
                               origin=f"{self.capture.engine} server {server.url} (states {labels})"
                                      + (f"; embedding from {EMBED_FILE}" if EMBEDDING in gives else "")
                                      + (f"; {request.options['why']}" if request.options.get("why") else ""),
                               num_layers=self.info.num_layers, hidden_size=self.info.hidden_size,
                               states=tuple(self.capture.states), dtype="float32 (as served)", device="cpu",
                               gives=frozenset(gives))
        self._reference = shape

    @property
    def input_device(self):
        import torch

        return torch.device(self.request.device)

    def eos_ids(self) -> set[int]:
        ids = getattr(self.tokenizer, "eos_token_id", None) if self.tokenizer is not None else None
        return {ids} if isinstance(ids, int) else set(ids or ())

    # ------------------------------------------------------------------ states
    def _read(self, prompts: Sequence[Sequence[int]], max_new: int, next_tokens: bool = False):
        from ..engines.registry import read_served_states

        return read_served_states(self.server.options(), prompts, self.capture, max_new_tokens=max_new,
                                  hidden_states_dir=self.server.hidden_states_dir, next_tokens=next_tokens)

    def _to_states(self, served, states: Iterable[State]) -> dict:
        import torch

        index = {s: i for i, s in enumerate(self.capture.states)}
        return {s: torch.from_numpy(served.states[:, index[s], :].copy()) for s in states}

    def _forward_one(self, ids: tuple[int, ...], states: tuple[State, ...], next_tokens: bool):
        import torch

        got = self._read([ids], 1, next_tokens)[0]
        nxt = torch.tensor(got.next_tokens, dtype=torch.long) if got.next_tokens is not None else None  # [L]
        return self._to_states(got, self.capture.states), nxt  # every served state: a later ask is a memo hit

    def teacher_forced(self, sequences: Sequence[Sequence[int]], states: Iterable[State], *,
                       next_tokens: bool = False, progress=None) -> list[Forced]:
        wanted = tuple(states)
        missing = [s for s in wanted if s not in self.capture.states]
        if missing:
            ref = engine(self.capture.engine).reference(self._reference, wanted, self.server.hidden_states_dir)
            raise CannotGive(self.spec, ", ".join(s.label() for s in missing),
                             "the server does not capture " + ("them" if len(missing) > 1 else "it"),
                             hint=f"start the server with: {ref.line}" if ref and ref.capture else None)
        if next_tokens:
            self._need_next()
        return self._memo.forced(self._forward_one, sequences, wanted, next_tokens, progress)

    def _need_next(self) -> None:
        if not self.spec.can(NEXT_TOKENS):
            raise CannotGive(self.spec, "the target's argmax at every position", "its server does not hand it out")

    def reserve(self, states: Iterable[State], next_tokens: bool = False) -> None:
        if next_tokens:
            self._need_next()
        self._memo.reserve([s for s in states if s in self.capture.states], next_tokens)

    def _generate(self, prompts, max_new: int, batch: int, progress):
        import time

        import torch

        t0 = time.perf_counter()
        eos = self.eos_ids()
        nxt = self._memo._reserved_next
        outs = []
        for i, p in enumerate(prompts):
            got = self._read([p], max_new + 1, nxt)[0]
            out = got.output_ids[:max_new]
            stop = next((j for j, t in enumerate(out) if t in eos), None)
            out = out[:stop + 1] if stop is not None else out
            outs.append(out)
            # the states of the kept tokens came with it: every fed position up to prompt + out
            n = min(len(p) + len(out), len(got.token_ids))
            key = tuple(got.token_ids[:n])
            if key not in self._memo._forced:
                states = {s: t[:n] for s, t in self._to_states(got, self.capture.states).items()}
                labels = torch.tensor(got.next_tokens[:n], dtype=torch.long) if got.next_tokens is not None else None
                self._memo._keep(key, Forced(key, states, labels))
            if progress:
                progress(i + 1, len(prompts))
        return outs, time.perf_counter() - t0

    def continuations(self, prompts: Sequence[Sequence[int]], max_new: int, *, batch: int = 16,
                      progress=None) -> tuple[list[tuple[int, ...]], float]:
        return self._memo.continuations(self._generate, prompts, max_new, batch, progress)

    # ------------------------------------------------------------------ borrowed by the draft runtime
    def _tensor(self, *names: str):
        if not self._embed_file.exists():
            raise CannotGive(self.spec, "the target's embedding", "the server does not hand out weights",
                             hint=f"put the embedding alone (model.embed_tokens.weight) in {self._embed_file}")
        from safetensors import safe_open

        with safe_open(str(self._embed_file), "pt") as f:
            for n in names:
                if n in f.keys():
                    return f.get_tensor(n).float().to(self.request.device)
        return None

    def embedding(self):
        t = self._tensor("model.embed_tokens.weight", "embed_tokens.weight")
        if t is None:
            raise CannotGive(self.spec, "the target's embedding", f"{self._embed_file} has no model.embed_tokens.weight")
        return t

    def lm_head(self):
        t = self._tensor("lm_head.weight")
        return t if t is not None else self.embedding()

    def live(self):
        raise CannotGive(self.spec, f"incremental forwards ({param('live', True)})", "a server hands out states, not a KV cache")

    def weights(self):
        raise CannotGive(self.spec, "the target's weights", "they are on the server")

    def decode(self, prompts, states, max_new: int, **_):
        raise CannotGive(self.spec, "decoded text with its states (train-canary's data)",
                         "a server's states come from its own scheduler, not a seeded batched decode")

    def forget(self) -> None:
        self._memo.forget()


def _tokenizer(target):
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(os.fspath(target))
    except Exception:  # noqa: BLE001 - no tokenizer: ids only
        return None


def open_served(request: SourceRequest, status=None) -> ServedSource:
    server = request.options.get("states_server")
    if not isinstance(server, Server):  # a bare URL: the default kind, key and deadlines
        server = Server(request.server)
    return ServedSource(request, server, status)
