"""Served states from a vLLM 0.33.0 ``extract_hidden_states`` server with ``ExampleHiddenStatesConnector``.

vLLM returns no states in-band. Per request (``POST /v1/completions``, token ids, greedy), when it
finishes, TP rank 0 writes ``{"hidden_states": [T, K, H], "token_ids": [T]}`` as safetensors to
``<shared_storage_path>/<req_id>.safetensors`` on the server's disk
(``distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py:520-559``
``request_finished``, ``:475-518`` ``build_connector_meta`` the path, ``:359-444`` and ``:329-346`` the write); the completion's
``kv_transfer_params.hidden_states_path`` names it (``entrypoints/openai/completion/serving.py:699-709``).
The client reads it from ``hidden_states_dir``, the user's view of that disk:

* path rules: the returned path is used when it lies inside ``hidden_states_dir`` (the same mount), else
  its file name is looked up there (the server's ``shared_storage_path`` mounted elsewhere); a name that is
  not a plain ``*.safetensors`` file name, or a path that leaves the folder, is refused;
* the write is asynchronous: the connector holds ``LOCK_EX`` on ``<path>.lock`` from before the reply
  until the file is written (``:268-289``, ``:329-346``), as ``load_hidden_states`` waits (``:48-66``); the
  client takes ``LOCK_SH`` the same way, polling under the request deadline; no lock file (the connector's
  ``use_synchronization_lock`` false, ``:234-236``) reads the file as it is;
* ``token_ids`` are the prompt, or with ``include_output_tokens`` (sent by the client when it asks for a
  continuation) every token but the last output (``:540-545``): they must equal ours;
* ``hidden_states`` ``[T, K, H]`` (the KV cache's ``LBNHC`` layout, ``:615-635``; K slots ascending):
  T, K and H are checked against the launch. A bad file is one line (exit 2).
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import struct
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import param
from ..http import BadServerReply, Clock, Http, ServerError, ServerTimeout, reply_field
from ..launch import Capture, TargetShape
from ..options import Server, resolve_key
from ..states import BadStates, Progress, ServedStates
from .launch import vllm_reference
from .wire import NEUTRAL

_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
_NUMPY = {"BF16": "<u2", "F16": "<f2", "F32": "<f4"}  # the stored bits, read as numpy dtypes

#: The target's argmax at every position (``next_tokens``, ``fingerprint``'s labels): a completion's
#: ``prompt_logprobs: 1`` (``entrypoints/openai/completion/protocol.py:99``, ``:573-585``), computed from the same
#: forward's final hidden states whatever the speculative method (``v1/worker/gpu_model_runner.py:3554-3558``,
#: ``:5245-5352``; the new runner ``v1/worker/gpu/model_runner.py:2213-2221``); no check refuses them with
#: ``extract_hidden_states``, and asking turns prefix-cache reads off (``sampling_params.py:625-632``). Per prompt
#: position after the first, a dict ``{token id: {logprob, rank, decoded_token}}`` holding the prompt token and
#: the top-1, whose ``rank`` is 1 (``v1/engine/logprobs.py:124-189``, ``logprobs.py:165-205``); position 0 is
#: ``null``. The argmax after the last prompt position and after each decoded token is the greedy output.
NO_NEXT_TOKENS = ("the reply carries no usable choices[0].prompt_logprobs (the request asked for prompt_logprobs 1)")
MAX_HEADER = 1 << 20


def request_body(ids: Sequence[int], max_new_tokens: int, next_tokens: bool = False) -> dict:
    body = {"prompt": [int(t) for t in ids], "max_tokens": int(max_new_tokens), "stream": False,
            "return_token_ids": True, **NEUTRAL}
    if max_new_tokens > 1:  # the continuation's states are saved too (connector :540-545)
        body["kv_transfer_params"] = {"include_output_tokens": True}
    if next_tokens:  # the top-1 at every prompt position (NO_NEXT_TOKENS above)
        body["prompt_logprobs"] = 1
    return body


def prompt_argmax(plp, prompt: Sequence[int], where: str) -> list[int]:
    """The argmax after prompt positions 0..P-2 from ``choices[0].prompt_logprobs`` (the rank-1 entry of each)."""
    if not isinstance(plp, list) or len(plp) != len(prompt) or plp[0] is not None:
        raise BadServerReply(f"{where}: {NO_NEXT_TOKENS}")
    out = []
    for i, d in enumerate(plp[1:], 1):
        top = [k for k, v in d.items() if isinstance(v, dict) and v.get("rank") == 1] if isinstance(d, dict) else []
        if len(top) != 1 or not str(top[0]).isdigit():
            raise BadServerReply(f"{where}: choices[0].prompt_logprobs[{i}] has no single rank-1 token")
        out.append(int(top[0]))
    return out


def read_vllm_states(opts: Server, prompts: Sequence[Sequence[int]], capture: Capture,
                     hidden_states_dir: str | os.PathLike, max_new_tokens: int = 1,
                     progress: Progress | None = None, next_tokens: bool = False,
                     also: Sequence[Capture] = ()) -> tuple[ServedStates, ...]:
    """``capture``: what the server is assumed to capture (the reference line); ``also``: the other launches it
    may run (the serving line of the audited draft): vLLM says nothing of its launch over HTTP, so the first
    file's slot count ``K`` picks the one it runs (:func:`pick_capture`), and every later file is held to it."""
    folder = Path(hidden_states_dir)
    launches = (capture, *also)
    if not folder.is_dir():
        raise ServerError(f"{param('hidden_states_dir', str(folder))}: not a folder")
    key, _ = resolve_key(opts.api_key, "vllm")
    clock = Clock(opts.deadline)
    http_ = Http(opts.url, key, opts.timeout, clock)
    out = []
    for i, ids in enumerate(prompts):
        where = f"server {http_.url}/v1/completions (prompt {i})"
        waits = len(http_.waits)
        r = http_.json("POST", "/v1/completions", request_body(ids, max_new_tokens, next_tokens))
        choices = reply_field(r, "choices", list, where)
        if len(choices) != 1:
            raise BadServerReply(f"{where}: expected 1 choice, got {len(choices)}")
        toks = choices[0].get("token_ids") if isinstance(choices[0], dict) else None
        if not isinstance(toks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in toks):
            raise BadServerReply(f"{where}: choices[0].token_ids is not a list of token ids")
        params = reply_field(r, "kv_transfer_params", dict, where, optional=True)
        if params is None or not isinstance(params.get("hidden_states_path"), str):
            raise BadServerReply(f"{where}: no kv_transfer_params.hidden_states_path: the server does not save "
                                 "hidden states (start it with the extract_hidden_states launch line)")
        path = locate(params["hidden_states_path"], folder)
        wait_unlocked(path, min(opts.timeout, clock.left()))
        prompt = tuple(int(t) for t in ids)
        outs = tuple(int(t) for t in toks)
        expect = prompt + (outs[:-1] if max_new_tokens > 1 else ())
        if len(launches) > 1:
            capture = pick_capture(path, launches)
            launches = (capture,)
        states = load_states(path, capture, expect)
        kept = outs if max_new_tokens > 1 else outs[:1]
        nxt = (tuple(prompt_argmax(choices[0].get("prompt_logprobs"), prompt, where)) + kept) if next_tokens else None
        out.append(ServedStates(f"vllm {path}", prompt, kept, states, capture, choices[0].get("finish_reason"),
                                notes=tuple(http_.waits[waits:]), next_tokens=nxt))
        if progress:
            progress(i, len(prompts), path.stat().st_size)
    return tuple(out)


def locate(returned: str, folder: Path) -> Path:
    """The file the server wrote, in the client's view of its disk (see the module docstring)."""
    name = os.path.basename(returned)
    if not name.endswith(".safetensors") or name in ("", ".safetensors") or "\x00" in returned:
        raise BadServerReply(f"hidden_states_path {returned!r}: not a .safetensors file name")
    root = folder.resolve()
    direct = Path(returned)
    if direct.is_absolute() and direct.resolve().parent == root:
        return direct.resolve()
    candidate = (root / name).resolve()
    if candidate.parent != root:
        raise BadServerReply(f"hidden_states_path {returned!r} leaves {str(folder)!r}")
    return candidate


def wait_unlocked(path: Path, timeout: float) -> None:
    """Wait (at most ``timeout`` s) until the connector has released its write lock on ``<path>.lock``."""
    lock = Path(str(path) + ".lock")
    end = time.monotonic() + max(timeout, 0)
    while True:
        try:
            fd = os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            break  # no lock: written, or written without one
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if time.monotonic() > end:
                        raise ServerTimeout(f"{lock}: the server still writes the hidden states after "
                                            f"{timeout:g} s") from None
                    time.sleep(0.02)
        finally:
            os.close(fd)
    if not path.exists():
        raise BadServerReply(f"{path}: no such file (is hidden_states_dir the server's shared_storage_path?)")


def _header(path: Path) -> tuple[dict, int]:
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise BadStates(f"{path}: not a safetensors file (shorter than its header)")
            n = struct.unpack("<Q", raw)[0]
            if n > MAX_HEADER:
                raise BadStates(f"{path}: not a safetensors file (header of {n} bytes)")
            head = json.loads(f.read(n))
    except (OSError, ValueError) as e:
        raise BadStates(f"{path}: not a readable safetensors file ({type(e).__name__})") from None
    if not isinstance(head, dict):
        raise BadStates(f"{path}: not a safetensors file")
    return head, 8 + n


def pick_capture(path: Path, choices: Sequence[Capture]) -> Capture:
    """The launch whose slot count and width the file's ``hidden_states [T, K, H]`` has (the first that fits);
    none: one line naming each launch's shape."""
    head, _ = _header(path)
    shape = head.get("hidden_states", {}).get("shape") if isinstance(head.get("hidden_states"), dict) else None
    for c in choices:
        if isinstance(shape, list) and len(shape) == 3 and shape[1:] == [c.slots, c.hidden_size]:
            return c
    lines = " or ".join(f"[T, {c.slots}, {c.hidden_size}] ({c.role or 'a'} line: {', '.join(s.label() for s in c.states)})"
                        for c in choices)
    raise BadStates(f"{path}: hidden_states {shape}, expected {lines}: the server runs another launch line "
                    "(`eagle-audit launch` prints this draft's)")


def load_states(path: Path, capture: Capture, token_ids: Sequence[int]) -> np.ndarray:
    """``hidden_states`` of one saved request as ``[T, K, H]`` float32, checked against the launch and
    ``token_ids``. Raises :class:`BadStates` (one line) on a bad file."""
    head, offset = _header(path)
    size = path.stat().st_size
    t = len(token_ids)
    for name in ("hidden_states", "token_ids"):
        if not isinstance(head.get(name), dict):
            raise BadStates(f"{path}: no {name!r} tensor (not written by ExampleHiddenStatesConnector)")
    hs, ti = head["hidden_states"], head["token_ids"]
    try:
        shape, dtype, (b0, b1) = list(hs["shape"]), hs["dtype"], hs["data_offsets"]
        tshape, tdtype, (c0, c1) = list(ti["shape"]), ti["dtype"], ti["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise BadStates(f"{path}: malformed safetensors header") from None
    if dtype not in _DTYPES:
        raise BadStates(f"{path}: hidden_states dtype {dtype}, expected one of {', '.join(_DTYPES)}")
    if tdtype not in ("I64", "I32") or len(tshape) != 1:
        raise BadStates(f"{path}: token_ids is {tdtype} {tshape}, expected a 1-d integer tensor")
    want = [t, capture.slots, capture.hidden_size]
    if len(shape) != 3 or shape[1:] != want[1:]:
        raise BadStates(f"{path}: hidden_states {shape}, expected [T, {capture.slots}, {capture.hidden_size}] "
                        f"({capture.slots} slots x {capture.hidden_size}, as the launch should give)")
    item = 2 if dtype != "F32" else 4
    if b1 - b0 != int(np.prod(shape)) * item or c1 - c0 != tshape[0] * (8 if tdtype == "I64" else 4) \
            or offset + max(b1, c1) > size:
        raise BadStates(f"{path}: truncated or inconsistent tensor data")
    with open(path, "rb") as f:
        f.seek(offset + c0)
        ids = np.frombuffer(f.read(c1 - c0), "<i8" if tdtype == "I64" else "<i4")
        if ids.tolist() != list(token_ids):
            raise BadStates(f"{path}: token_ids ({ids.size}) are not the request's {t} tokens")
        if shape[0] != t:
            raise BadStates(f"{path}: hidden_states holds {shape[0]} positions for {t} tokens")
    return _as_float32(path, offset + b0, shape, dtype)


#: elements converted at a time: the mapped pages of one piece are dropped from the process after it
_PIECE = 1 << 20


def _as_float32(path: Path, start: int, shape: list[int], dtype: str) -> np.ndarray:
    """The tensor at byte ``start`` of the file, ``shape`` of ``dtype`` (little-endian, as safetensors
    stores), as one new float32 array, its values checked finite; BadStates (one line) otherwise.

    The file is mapped, not read: each piece of ``_PIECE`` values is converted from the mapped pages
    straight into the result (bf16: its 16 bits are the high half of the float32 bits, the same values as
    torch's ``.float()``), checked, and its pages dropped from the process (``MADV_DONTNEED``; they stay in
    the page cache), so memory is the result and one piece, where a read copy and a torch conversion held
    the file's bytes and the result, and a whole-array finiteness test another quarter. Assumed: nobody
    truncates the file while it is read (the connector writes it once under its lock, which
    :func:`wait_unlocked` waited for; a file cut shorter after the size check would end the process with
    SIGBUS, as any mapped read would)."""
    out = np.empty(shape, np.float32)  # [T, K, H]
    flat = out.reshape(-1)
    n, item = flat.size, np.dtype(_NUMPY[dtype]).itemsize
    if n == 0:
        return out
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        raise BadStates(f"{path}: not a readable safetensors file ({type(e).__name__})") from None
    src = part = None
    try:
        try:
            src = np.frombuffer(m, dtype=_NUMPY[dtype], count=n, offset=start)
        except ValueError:  # shorter than its header said since the size check
            raise BadStates(f"{path}: truncated or inconsistent tensor data") from None
        dropped = 0
        for i in range(0, n, _PIECE):
            part, dst = src[i:i + _PIECE], flat[i:i + _PIECE]
            if dtype == "BF16":
                np.left_shift(part, 16, out=dst.view(np.uint32), dtype=np.uint32)
            else:
                dst[...] = part
            bad = ~np.isfinite(dst)
            if bad.any():
                raise BadStates(f"{path}: non-finite hidden states (value {i + int(np.flatnonzero(bad)[0])})")
            done = (start + (i + dst.size) * item) // mmap.PAGESIZE * mmap.PAGESIZE
            if done > dropped and hasattr(m, "madvise"):
                m.madvise(mmap.MADV_DONTNEED, dropped, done - dropped)
                dropped = done
    finally:
        src = part = None  # the views into the map go before it closes
        m.close()
    return out


def server_capture(opts: Server, shape: TargetShape, hidden_states_dir: str | None = None) -> Capture:
    """What the running server captures: vLLM says nothing of it over HTTP; the reference line is assumed,
    and the files (which carry ``K`` and their dtype, bf16/fp16: the KV-cache dtypes extract_hidden_states
    accepts) are matched against it when read."""
    return vllm_reference(shape, hidden_states_dir or "DIR").capture
