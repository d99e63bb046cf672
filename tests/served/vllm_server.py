"""A local ``POST /v1/completions`` server that saves hidden states as vLLM 0.33.0's
``ExampleHiddenStatesConnector`` does, running the connector's own code from the wheel
(``distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py``, executed whole with
:meth:`WheelSource.module`, its imports supplied):

* scheduler side: ``build_connector_meta`` (the save path: ``<shared_storage_path>/<req_id>.safetensors``,
  a client path only with ``allow_custom_save_path``) and ``request_finished`` (the ``token_ids`` rule:
  the prompt, or with ``include_output_tokens`` every token but the last; it returns
  ``{"hidden_states_path": ...}``);
* worker side: ``wait_for_save`` (the ``.lock`` file taken ``LOCK_EX`` before the reply), the read
  ``extract_from_kv_cache`` and ``_write_tensors`` (``save_file``, then the lock released), in a thread as
  the connector's pool does, after a delay so the client must wait on the lock.

With ``prompt_logprobs`` in the request: the worker's ``Sampler.gather_logprobs`` (``v1/sample/sampler.py:373-420``,
the prompt token then the top-k, and the prompt token's rank) on the tiny model's log-softmax, its
``batched_count_greater_than`` (a compiled kernel) as ``(logprobs >= token_logprob).sum(-1)``; the front end's
``LogprobsProcessor._update_prompt_logprobs`` (``v1/engine/logprobs.py:124-189``) with ``create_prompt_logprobs``,
``append_logprobs_for_next_position`` and ``Logprob`` (``logprobs.py:12-205``) and ``clamp_prompt_logprobs``
(``entrypoints/generate/base/serving.py:381-393``), all from the wheel; the response model's JSON (pydantic:
``dict[int, Logprob]`` keys as strings, ``completion/protocol.py:689``) is written as that.

What cannot run here, cited: ``_submit_async_write`` (``:359-444``) copies through a CUDA stream and pinned
memory: the test server does its CPU equivalent (slot mapping from the block ids, ``extract_from_kv_cache``,
the same ``{"hidden_states", "token_ids"}`` dict); the cache write of ``CacheOnlyAttentionLayer``
(``model_executor/models/extract_hidden_states.py:216-300``, a KV-cache update kernel) is done by indexing the
same ``[num_blocks, K, block_size, H]`` layout that ``extract_from_kv_cache`` reads; the states are stored in
bfloat16, a KV-cache dtype the layer accepts (``:238-246``: auto, bfloat16, float16).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import threading
import time
import types
import typing
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tests.served.http_serving import http_serving

from tests.served.sglang_server import Target
from tests.wheels import WheelSource

CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py"
BLOCK = 4
_MODULE = "vllm_example_hidden_states_connector_under_test"


def connector_module(wheel) -> dict:
    ns = {"fcntl": fcntl, "os": os, "Future": Future, "ThreadPoolExecutor": None, "dataclass": dataclass,
          "field": field, "partial": partial, "version": None, "TYPE_CHECKING": False, "Any": Any, "torch": torch,
          "Version": None, "load_file": load_file, "save_file": save_file, "VllmConfig": object,
          "get_layers_from_vllm_config": None, "KVConnectorBase_V1": type("KVConnectorBase_V1", (), {}),
          "KVConnectorMetadata": object, "KVConnectorRole": object, "SupportsHMA": type("SupportsHMA", (), {}), "get_tensor_model_parallel_rank": lambda: 0,
          "init_logger": logging.getLogger, "gpu_sync_allowed": None, "AttentionMetadata": object,
          "SchedulerOutput": object, "__name__": _MODULE}
    # dataclasses look the defining module up in sys.modules for string annotations
    sys.modules.setdefault(_MODULE, types.ModuleType(_MODULE))
    return WheelSource(wheel).module(CONNECTOR, ns)


@dataclass(frozen=True)
class VFaults:
    truncate: bool = False  # the file is cut short
    extra_slot: bool = False  # one more slot than the launch gives
    other_tokens: bool = False  # token_ids of another request
    escape_path: bool = False  # the reply names a path outside the storage folder
    delay: float = 0.3  # seconds the write keeps the lock


class FakeVLLM:
    def __init__(self, wheel, target_path, boundaries: list[int], storage: Path, faults: VFaults = VFaults()):
        self.mod = connector_module(wheel)
        self.wheel = wheel
        self.version = Path(getattr(wheel, "path", wheel)).name.split("-")[1]  # the release GET /version answers
        self.target = Target(target_path)
        self.boundaries, self.storage, self.faults = boundaries, storage, faults
        C = self.mod["ExampleHiddenStatesConnector"]
        c = object.__new__(C)  # __init__ needs a VllmConfig: its state is set as it sets it (:161-251)
        c._storage_path, c._pending_saves, c._request_filenames = str(storage), {}, {}
        c.allow_custom_save_path, c.use_lock, c._lock_fds, c._is_tp_rank_zero = False, True, {}, True
        c._block_size = BLOCK
        self.c = c
        self.n = 0
        self.threads: list[threading.Thread] = []

    def complete(self, body: dict) -> dict:
        ids = [int(t) for t in body["prompt"]]
        n = int(body["max_tokens"])
        params = body.get("kv_transfer_params") or {}
        rid = f"cmpl-{self.n}-0"
        self.n += 1
        new = types.SimpleNamespace(req_id=rid, sampling_params=types.SimpleNamespace(
            extra_args={"kv_transfer_params": params} if params else None))
        meta = self.c.build_connector_meta(types.SimpleNamespace(scheduled_new_reqs=[new]))
        self.c.has_connector_metadata = lambda: True
        self.c._get_connector_metadata = lambda: meta
        self.c.wait_for_save()  # the lock exists, held, before the reply
        out = self.target.greedy(ids, n)
        seq = ids + out[:-1]
        b = self.target.boundaries(seq)
        slots = [b[k] for k in self.boundaries] + ([b[self.boundaries[-1]]] if self.faults.extra_slot else [])
        states = torch.stack(slots, dim=1).to(torch.bfloat16)  # [T, K, H]
        blocks = list(range(7, 7 + (len(seq) + BLOCK - 1) // BLOCK))  # any free blocks
        cache = torch.zeros(max(blocks) + 1, len(slots), BLOCK, states.shape[-1], dtype=torch.bfloat16)
        for t in range(len(seq)):  # what CacheOnlyAttentionLayer's cache update writes, token t at its slot
            cache[blocks[t // BLOCK], :, t % BLOCK] = states[t]
        request = types.SimpleNamespace(request_id=rid, kv_transfer_params=params, prompt_token_ids=ids,
                                        all_token_ids=ids + out)
        delay, saved = self.c.request_finished(request, blocks)
        pending = self.c._pending_saves.pop(rid)
        slot_mapping = (torch.arange(BLOCK).reshape(1, BLOCK) + torch.tensor(blocks).reshape(-1, 1) * BLOCK).flatten()
        hs = self.mod["extract_from_kv_cache"](cache, slot_mapping, pending.token_ids.shape[0])
        tensors = {"hidden_states": hs.clone(), "token_ids": pending.token_ids.clone()}
        if self.faults.other_tokens:
            tensors["token_ids"] = tensors["token_ids"] + 1
        lock_fd = self.c._lock_fds.pop(rid)

        def write():
            time.sleep(self.faults.delay)
            self.mod["ExampleHiddenStatesConnector"]._write_tensors(
                tensors, types.SimpleNamespace(synchronize=lambda: None), pending.filename, lock_fd)
            if self.faults.truncate:
                data = Path(pending.filename).read_bytes()
                Path(pending.filename).write_bytes(data[: len(data) // 2])

        t = threading.Thread(target=write)
        t.start()
        self.threads.append(t)
        path = saved["hidden_states_path"]
        if self.faults.escape_path:
            path = "/etc/../etc/passwd.safetensors"
        choice = {"index": 0, "text": "", "token_ids": out, "finish_reason": "length"}
        if body.get("prompt_logprobs") is not None:
            choice["prompt_logprobs"] = self.prompt_logprobs(ids, int(body["prompt_logprobs"]))
        return {"id": rid, "object": "text_completion", "choices": [choice],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": n}, "kv_transfer_params": {
                "hidden_states_path": path}}


    def prompt_logprobs(self, ids: list[int], k: int) -> list:
        """The wheel's worker gather, front-end processor and clamp on the tiny model's log-softmax (module
        docstring); the response's JSON form."""
        if not hasattr(self, "_lp"):
            import dataclasses
            import itertools

            src = WheelSource(self.wheel)
            lp_ns = src.definitions("vllm/logprobs.py", ("Logprob", "create_prompt_logprobs",
                                                         "append_logprobs_for_next_position"),
                                    {"dataclass": dataclass, "itertools": itertools, "Iterable": typing.Iterable,
                                     "FlatLogprobs": type("FlatLogprobs", (), {}), "PromptLogprobs": list,
                                     "SampleLogprobs": list, "LogprobsOnePosition": dict})
            gather = src.function("vllm/v1/sample/sampler.py", "Sampler.gather_logprobs", {
                "torch": torch, "gpu_sync_allowed": lambda **kw: contextlib.nullcontext(),
                "batched_count_greater_than": lambda x, v: (x >= v).sum(-1),
                "LogprobsTensors": lambda *a: a})
            proc = src.cls("vllm/v1/engine/logprobs.py", "LogprobsProcessor", ("_update_prompt_logprobs",),
                           (object,), {"convert_ids_list_to_tokens": None, "NONES": itertools.repeat(None),
                                       "append_logprobs_for_next_position": lp_ns["append_logprobs_for_next_position"]})
            clamp = src.function("vllm/entrypoints/generate/base/serving.py", "clamp_prompt_logprobs", {})
            self._lp = (lp_ns, gather, proc, clamp, dataclasses.asdict)
        lp_ns, gather, proc, clamp, asdict = self._lp
        with torch.no_grad():
            logp = torch.log_softmax(self.target.model(torch.tensor([ids])).logits[0, :-1].float(), -1)  # [P-1, V]
        tensors = gather(logp, k, torch.tensor(ids[1:], dtype=torch.int64))
        p = proc()
        p.tokenizer, p.num_prompt_logprobs, p.prompt_logprobs = None, k, lp_ns["create_prompt_logprobs"](False)
        p._update_prompt_logprobs(tensors)
        return [None if d is None else {str(t): asdict(v) for t, v in d.items()} for d in clamp(p.prompt_logprobs)]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        # GET /version: {"version": VLLM_VERSION} (entrypoints/serve/instrumentator/basic.py:53-56), the release read
        # from the wheel this server runs the connector of
        if self.path != "/version":
            return self._send(404, b'{"detail": "Not Found"}')
        self._send(200, json.dumps({"version": self.server.fake.version}).encode())

    def _send(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps(self.server.fake.complete(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serving(fake: FakeVLLM):
    """The fake on a loopback port (a context manager yielding its URL); its writer threads joined on exit."""
    return http_serving(_Handler, fake, on_close=lambda: [w.join() for w in fake.threads])
