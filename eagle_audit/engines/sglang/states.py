"""Served states from an SGLang 0.5.23 capture-only server (``--enable-return-aux-hidden-states``).

One ``POST /generate`` per prompt: ``input_ids``, greedy neutral sampling (the same keys as the
``--server`` acceptance client), ``return_hidden_states: true`` and a unique ``extra_key``. The radix cache
namespaces its tree by ``extra_key`` (``srt/mem_cache/radix_cache.py:223-247``, ``:365-380``), so no
request of ours shares a prefix with any other: a prefix hit would return states only for the uncached
suffix. The reply is read as it streams (:mod:`eagle_audit.engines.sglang.stream`), no size cap, under the same two
deadlines and one-line errors as the acceptance client (:class:`eagle_audit.engines.http.Http`).

What the reply holds (``meta_info.hidden_states``, ``tokenizer_manager.py:2598-2601``), and the checks:

* one element per prefill forward that was *stored*: a middle chunk of a chunked prefill is not
  (``batch_result_processor.py:305-309``: ``should_commit_output`` needs ``inflight_middle_chunks <= 0``,
  and ``store=`` it at ``:333-341``; ``scheduler.py:4329-4330`` counts the chunk in flight), so with
  chunked prefill only the final chunk's prompt states come back. Several prefill elements are joined in
  order (what an engine that stores every chunk would send); fewer prompt rows than prompt tokens is a
  prefix-cache hit (``meta_info.cached_tokens`` > 0) or a chunked prefill, both refused: the first rows
  are missing and would be misread as other positions;
* one row per decode forward (``:676-700``), the state of the token fed at that step; the list is cut at
  ``finished_len`` elements (``output_streamer.py:661-677``). The last output token is never fed, so a
  request with ``c`` output tokens carries ``P + c - 1`` rows; fewer is a reply that ends early;
* each row is ``K*H`` floats, the K captures concatenated in capture-loop order
  (``logits_processor.py:853-869``, ``pack_aux_hidden_states`` ``layers/aux_hidden_states.py:97-102``).

The target's argmax at every position (``next_tokens``: what ``fingerprint`` scores the draft against) comes
with the same request when asked: ``return_logprob: true, logprob_start_len: 0, top_logprobs_num: 1``
(``managers/io_struct.py:229-247``, defaults ``:565-570``: ``logprob_start_len`` -1 = output tokens only).

* ``meta_info.input_top_logprobs`` holds one entry per prompt token: the first is ``null`` (no prediction
  for it) and entry i the top-1 ``[logprob, token id, null]`` of the logits at position i - 1; the last
  prompt position's top-1 is popped there (``managers/scheduler_components/logprob_result_processor.py:58-85``)
  and is the first entry of ``meta_info.output_top_logprobs``, one per output token
  (``:330-347``; ``managers/tokenizer_manager.py:2840-2960`` writes both, ``:3118-3136`` the ``null``);
* they are taken from the final-norm logits of the same forward whose aux states are returned: the stored
  states are the full capture, not the logprob-pruned rows (``layers/logits_processor.py:853-872`` vs
  ``:632-660``), so the two compose;
* ``logprob_start_len: 0`` caps the radix-cache match at 0 tokens (``managers/schedule_batch.py:1766-1775``):
  no prefix is reused, on top of the ``extra_key``; input logprobs are summed over prefill chunks
  (``logprob_result_processor.py:218-300``), the states are not (above: the launch line keeps one chunk);
* the argmax after a decoded token is that step's top-1 (``output_top_logprobs``), which a greedy request
  samples: it must equal ``output_ids`` (checked).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Mapping, Sequence

from ...errors import param
from ..http import BadServerReply, Clock, Http, ServerError, reply_field, short
from ..launch import Capture, TargetShape
from ..options import Server, resolve_key
from ..states import BadStates, Progress, ServedStates
from .stream import Element, StatesReader
from .launch import sglang_reference
from .wire import NEUTRAL

#: the ``extra_key`` prefix of our requests (the rest is a fresh uuid4 per request)
EXTRA_KEY_PREFIX = "eagle-audit-"

def request_body(ids: Sequence[int], max_new_tokens: int, extra_key: str | None = None,
                 next_tokens: bool = False) -> dict:
    body = {"input_ids": [int(t) for t in ids],
            "sampling_params": {**NEUTRAL, "max_new_tokens": int(max_new_tokens)},
            "return_hidden_states": True, "stream": False,
            "extra_key": extra_key or EXTRA_KEY_PREFIX + uuid.uuid4().hex}
    if next_tokens:  # the top-1 at every prompt position and every output token (module docstring)
        body.update(return_logprob=True, logprob_start_len=0, top_logprobs_num=1, return_text_in_logprobs=False)
    return body


def read_sglang_states(opts: Server, prompts: Sequence[Sequence[int]], capture: Capture,
                       max_new_tokens: int = 1, progress: Progress | None = None,
                       next_tokens: bool = False) -> tuple[ServedStates, ...]:
    """Every prompt's states from an SGLang capture-only server launched as ``capture`` says (its width
    ``capture.slots * capture.hidden_size`` is enforced per row). ``max_new_tokens`` > 1 also returns the
    greedy continuation and the states of its tokens; ``next_tokens`` the target's argmax after every
    position (:attr:`ServedStates.next_tokens`)."""
    if max_new_tokens < 1:
        raise ServerError(f"{param('max_new_tokens')} must be >= 1 (the prefill samples one token)")
    key, _ = resolve_key(opts.api_key, "sglang")
    http_ = Http(opts.url, key, opts.timeout, Clock(opts.deadline))
    out = []
    for i, ids in enumerate(prompts):
        waits = len(http_.waits)  # a 503's Retry-After waits (engines.http), said beside the prompt's states
        st = _one(http_, i, ids, capture, max_new_tokens, len(prompts), progress, next_tokens)
        out.append(replace(st, notes=st.notes + tuple(http_.waits[waits:])) if len(http_.waits) > waits else st)
    return tuple(out)


def _one(http_: Http, i: int, ids: Sequence[int], capture: Capture, max_new: int, total: int,
         progress: Progress | None, next_tokens: bool = False) -> ServedStates:
    where = f"server {http_.url}/generate (prompt {i})"
    prompt = tuple(int(t) for t in ids)
    reader = StatesReader(len(prompt) + max_new - 1, capture.width, where,
                          width_note=f"{capture.slots} slots x {capture.hidden_size}")

    def sink(chunk: bytes) -> None:
        reader.feed(chunk)
        if progress:
            progress(i, total, reader.received)

    try:
        reply = http_.request("POST", "/generate", request_body(prompt, max_new, next_tokens=next_tokens), sink=sink)
        http_.check(reply, "/generate")
        rest, rows, elements = reader.finish()
    except BadStates as e:
        raise BadServerReply(e.message) from None
    meta = reply_field(rest, "meta_info", dict, where)
    if not reader.saw_states:
        raise BadServerReply(f"{where}: the reply carries no meta_info.hidden_states: the server returns none "
                             "(start it with --enable-return-aux-hidden-states, see `eagle-audit layers --help`)")
    out = tuple(_int_list(rest.get("output_ids"), "output_ids", where))
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, Mapping) else None
    if kind == "abort":
        raise ServerError(f"{where}: the server aborted the request: {short(finish.get('message', finish), 120)}")
    completion = reply_field(meta, "completion_tokens", int, where + " meta_info")
    if completion != len(out):
        raise BadServerReply(f"{where}: meta_info.completion_tokens {completion} but {len(out)} output_ids")
    if not out:
        raise BadServerReply(f"{where}: no output token (the prefill samples one)")
    prompt_rows, decode_rows, order_ok = _layout(elements)
    if not order_ok:
        raise BadServerReply(f"{where}: meta_info.hidden_states holds a prefill element after a decode one")
    notes = []
    if prompt_rows != len(prompt):
        cached = meta.get("cached_tokens")
        if prompt_rows < len(prompt):
            lost = len(prompt) - prompt_rows
            if isinstance(cached, int) and cached > 0:
                why = (f"a radix-cache prefix hit of {cached} tokens (meta_info.cached_tokens) although the request "
                       "had its own extra_key: restart the server with --disable-radix-cache")
            else:
                why = ("chunked prefill: SGLang 0.5.23 returns only the final chunk's states; restart the server "
                       "with --chunked-prefill-size -1 (or a chunk larger than the longest prompt)")
            raise BadServerReply(f"{where}: {prompt_rows} prompt states for {len(prompt)} prompt tokens: the first "
                                 f"{lost} are missing ({why})")
        raise BadServerReply(f"{where}: {prompt_rows} prompt states for {len(prompt)} prompt tokens")
    if len([e for e in elements if e.kind == "prefill"]) > 1:
        notes.append(f"prompt states joined from {sum(e.kind == 'prefill' for e in elements)} prefill chunks")
    want = len(out) - 1
    if decode_rows < want:
        raise BadServerReply(f"{where}: the reply ends early: {decode_rows} decoded-token states for {len(out)} "
                             f"output tokens (expected {want}: every output token but the last is fed)")
    if decode_rows > want:
        raise BadServerReply(f"{where}: {decode_rows} decoded-token states for {len(out)} output tokens "
                             f"(at most {want})")
    states = rows.reshape(rows.shape[0], capture.slots, capture.hidden_size)
    nxt = argmax_after(meta, prompt, out, where) if next_tokens else None
    return ServedStates(f"sglang {http_.url}", prompt, out, states, capture, kind, tuple(notes), nxt)


def _top1(entry, what: str, where: str) -> int:
    """The token id of a top-logprobs entry ``[[logprob, id, text], ...]`` (its first, the top-1)."""
    if (isinstance(entry, list) and entry and isinstance(entry[0], list) and len(entry[0]) >= 2
            and isinstance(entry[0][1], int) and not isinstance(entry[0][1], bool) and entry[0][1] >= 0):
        return entry[0][1]
    raise BadServerReply(f"{where}: meta_info.{what} is not a list of [logprob, token id, text] lists")


def argmax_after(meta: Mapping, prompt: Sequence[int], out: Sequence[int], where: str) -> tuple[int, ...]:
    """The target's argmax after each of the ``len(prompt) + len(out) - 1`` fed positions, from the reply's
    ``input_top_logprobs`` (prompt positions 1..P-1 predicted from 0..P-2) and ``output_top_logprobs`` (the
    rest); see the module docstring for the layout."""
    itl, otl = meta.get("input_top_logprobs"), meta.get("output_top_logprobs")
    if not isinstance(itl, list):
        raise BadServerReply(f"{where}: the reply carries no meta_info.input_top_logprobs (the request asked for "
                             "return_logprob with top_logprobs_num 1 from position 0)")
    if len(itl) != len(prompt):
        raise BadServerReply(f"{where}: meta_info.input_top_logprobs has {len(itl)} entries for {len(prompt)} prompt "
                             "tokens (a prefix-cache hit or another logprob_start_len)")
    if itl[0] is not None:
        raise BadServerReply(f"{where}: meta_info.input_top_logprobs[0] is not null (the first prompt token has no "
                             "prediction in SGLang 0.5.23's layout)")
    inp = [_top1(e, "input_top_logprobs", where) for e in itl[1:]]
    if not isinstance(otl, list) or len(otl) != len(out):
        raise BadServerReply(f"{where}: meta_info.output_top_logprobs does not hold one entry per output token")
    dec = [_top1(e, "output_top_logprobs", where) for e in otl]
    if dec != list(out):
        j = next(k for k, (a, b) in enumerate(zip(dec, out)) if a != b)
        raise BadServerReply(f"{where}: output token {j} is {out[j]} but the top-1 there is {dec[j]}: the server did "
                             "not decode greedily")
    return tuple(inp + dec)  # [P - 1 + c] = one per fed position


def _layout(elements: Sequence[Element]) -> tuple[int, int, bool]:
    """(prompt rows, decode rows, prefill elements all come first)."""
    prompt = decode = 0
    seen_decode = False
    ok = True
    for e in elements:
        if e.kind == "prefill":
            ok = ok and not seen_decode
            prompt += e.rows
        else:
            seen_decode = True
            decode += e.rows
    return prompt, decode, ok


def _int_list(v, name: str, where: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise BadServerReply(f"{where}: {name!r} is not a list of token ids")
    return v


def server_capture(opts: Server, shape: TargetShape, hidden_states_dir: str | None = None) -> Capture:
    """What the running server captures, read from it: ``/server_info`` carries the resolved arguments
    (``server_args.resolved_dict()``, with ``return_aux_hidden_state_layer_ids``: ``srt/utils/common.py:3584-3592``,
    ``entrypoints/http_server.py:864-890``), put through the engine convention's capture rule; a server whose
    ``/server_info`` lacks them is assumed to run the reference line."""
    from ...conventions import get_convention

    key, _ = resolve_key(opts.api_key, "sglang")
    http_ = Http(opts.url, key, min(opts.timeout, 30.0), Clock(min(opts.deadline, 60.0)))
    try:
        info = http_.json("GET", "/server_info")
    except ServerError:
        info = {}
    ids = info.get("return_aux_hidden_state_layer_ids") if isinstance(info, Mapping) else None
    if isinstance(info, Mapping) and "return_aux_hidden_state_layer_ids" in info:
        if info.get("enable_return_aux_hidden_states") is False:
            raise ServerError(f"server {opts.url}: it does not capture aux hidden states (started without "
                              "--enable-return-aux-hidden-states)")
        conv = get_convention("sglang", "engine")
        draft = {} if ids is None else {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids)}}
        w = conv.resolve(draft, shape.architecture, shape.num_layers)
        dtype = info.get("dtype") if info.get("dtype") in ("bfloat16", "float16", "float32") else None
        return Capture("sglang", tuple(w.states), shape.hidden_size, None if ids is None else tuple(ids), dtype)
    return sglang_reference(shape).capture  # /server_info without its arguments: the reference line assumed
