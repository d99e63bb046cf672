"""Served accept length over exactly the audited prompts, from a running SGLang server. Every fact below was
read in the ``sglang==0.5.23`` wheel; docs/server.md cites file:line and how to start the engine so that the
figures exist.

SGLang (``POST /generate`` per prompt, ``input_ids``): each finished reply's ``meta_info`` carries
``completion_tokens`` (output tokens, the prefill token included) and, when the server runs speculative
decoding, ``spec_verify_ct`` (verify passes), ``spec_accept_length`` (= completion_tokens / spec_verify_ct),
``spec_num_correct_drafts`` and ``spec_correct_drafts_histogram`` (``[n]`` = verifies that accepted n drafts;
omitted when empty). The served accept length is ``sum(completion_tokens - 1) / sum(spec_verify_ct)`` over
our requests only: tokens gained per verify, the prefill token excluded, the last verify cut at the end of
the output, which is exactly the simulation's ``accept_length``. ``GET /server_info``
``internal_states[r].avg_spec_accept_length`` is kept as context only: it is the server's lifetime figure
(since start or the last ``/flush_cache``; warm-up request and every other client included; folded only
every ``decode_log_interval`` decode batches, absent before the first fold), one per DP rank.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ..http import BadServerReply, Http, ServerAuthError, ServerError, ServerTimeout, int_list, reply_field, short
from ..reading import ServerReading
from .wire import BLOCK_ALGORITHMS, NEUTRAL



def positions(hist: Sequence[int], steps: int | None) -> tuple[float, ...]:
    n = sum(hist)
    width = max(len(hist) - 1, steps or 0)
    return tuple(sum(hist[i + 1:]) / n for i in range(width)) if n else ()


def read_acceptance(http_: Http, prompts: Sequence[Sequence[int]], max_new: int,
            expected: Sequence[Sequence[int]] | None, progress) -> ServerReading:
    tokens = verifies = 0
    per_request, hist, equal = [], [], 0
    no_spec = 0
    for i, ids in enumerate(prompts):
        where = f"server {http_.url}/generate (prompt {i})"
        body = {"input_ids": [int(t) for t in ids], "sampling_params": {"max_new_tokens": int(max_new), **NEUTRAL}}
        r = http_.json("POST", "/generate", body, generation=True)
        if isinstance(r, list) and len(r) == 1:
            r = r[0]
        meta = reply_field(r, "meta_info", dict, where)
        finish = meta.get("finish_reason")
        if isinstance(finish, Mapping) and finish.get("type") == "abort":
            raise ServerError(f"{where}: the server aborted the request ({short(finish.get('message', finish))})")
        completion = reply_field(meta, "completion_tokens", int, where + " meta_info")
        verify = reply_field(meta, "spec_verify_ct", int, where + " meta_info", optional=True)
        if verify is None:
            # tokenizer_manager.py:3150: the spec keys are set only when the request was verified at least
            # once; a request that ends at its prefill token (EOS, max_new_tokens 1) has none
            if completion > 1:
                no_spec += 1
            verify = 0
        elif completion > 1 and verify == 0:
            no_spec += 1
        tokens += max(completion - 1, 0)
        verifies += verify
        sal = reply_field(meta, "spec_accept_length", (int, float), where + " meta_info", optional=True)
        if sal is not None:
            per_request.append(float(sal))
        h = meta.get("spec_correct_drafts_histogram")
        if h is not None:
            h = int_list(h, "spec_correct_drafts_histogram", where + " meta_info")
            hist += [0] * (len(h) - len(hist))
            for n, c in enumerate(h):
                hist[n] += c
        if expected is not None:
            out = r.get("output_ids") if isinstance(r, Mapping) else None
            if out is not None:
                equal += int(int_list(out, "output_ids", where) == list(expected[i]))
        if progress:
            progress(i + 1, len(prompts))
    if no_spec:
        said = f"server {http_.url}: SGLang generated {no_spec} of {len(prompts)} replies without meta_info.spec_verify_ct"
        info = _server_info(http_)
        algorithm, frontend = info.get("speculative_algorithm"), info.get("frontend")
        if algorithm:  # spec decoding on, yet no per-request figures: e.g. a frontend other than the Python one
            raise ServerError(f"{said}, although it runs {short(algorithm, 40)} ({short(frontend, 20)} frontend): "
                              "it reports no per-request acceptance")
        raise ServerError(f"{said}: speculative decoding is off on this server",
                          hint="start it with the speculative line `eagle-audit launch` prints (--speculative-algorithm "
                               "EAGLE3, DFLASH or DSPARK by the draft's kind)")
    info = _server_info(http_)
    lifetime = _sglang_lifetime(info)
    drafting = {k: info[f"speculative_{k}"] for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")
                if isinstance(info.get(f"speculative_{k}"), (str, int)) and not isinstance(info.get(f"speculative_{k}"), bool)}
    # the histogram reaches only the most drafts a request accepted (schedule_batch.py:1566-1572): the positions run
    # to the drafts a verify where the server says them (a chain or a block: num_draft_tokens - 1)
    ndt = drafting.get("num_draft_tokens")
    width = ndt - 1 if isinstance(ndt, int) and drafting.get("eagle_topk") == 1 and ndt > 1 else None
    notes = []
    if lifetime:
        notes.append("lifetime: /server_info internal_states[].avg_spec_accept_length, one per DP rank, since start "
                     "or the last /flush_cache, warm-up request and all other traffic included; context only")
    return ServerReading(
        http_.url, "sglang", tokens / verifies if verifies else None,
        sum(per_request) / len(per_request) if per_request else None, len(prompts),
        "sum(meta_info.completion_tokens - 1) / sum(meta_info.spec_verify_ct) over the audited requests",
        per_position=positions(hist, width), histogram=tuple(hist), verify_steps=verifies, tokens=tokens,
        continuations_equal=equal if expected is not None else None, lifetime_accept_length=lifetime,
        drafting=drafting, notes=tuple(notes))


def _server_info(http_: Http) -> Mapping:
    """``/server_info`` when it is a JSON object, else ``{}`` (context only: never fails the reading)."""
    try:
        info = http_.json("GET", "/server_info")
    except (BadServerReply, ServerAuthError):
        return {}
    except ServerError as e:
        if isinstance(e, ServerTimeout):
            raise
        return {}
    return info if isinstance(info, Mapping) else {}


def _sglang_lifetime(info: Mapping) -> tuple[float | None, ...]:
    """``avg_spec_accept_length`` of every DP rank (None where the rank has not folded a figure yet)."""
    states = info.get("internal_states")
    if not isinstance(states, list):
        return ()
    out = []
    for s in states:
        v = s.get("avg_spec_accept_length") if isinstance(s, Mapping) else None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        out.append(float(v) if ok else None)
    return tuple(out)


def drafting_differs(drafting, num_steps: int, topk: int, num_draft_tokens: int, block: bool = False) -> str | None:
    """A note when the server drafts otherwise than the simulation (None where it does not say, or drafts alike):
    its ``/server_info`` algorithm (a block one, :data:`~.wire.BLOCK_ALGORITHMS`, for a block draft, ``block``; an
    EAGLE-style one else), then its steps, topk and draft tokens; for a block draft its verify window alone
    (``num_draft_tokens``: the simulation's drafts a verify + 1; SGLang reports num_steps and topk 1 for it)."""
    algorithm = drafting.get("algorithm")
    if isinstance(algorithm, str) and (algorithm.upper() in BLOCK_ALGORITHMS) != block:
        what = "a block draft (DFlash, DSpark)" if block else "a chain or tree draft (EAGLE-3)"
        return (f"the server runs --speculative-algorithm {algorithm}; the audited draft is {what}: the server "
                "serves another kind of draft than the one audited")
    if block:
        theirs = drafting.get("num_draft_tokens")
        if theirs is None or theirs == num_draft_tokens:
            return None
        return (f"the server verifies blocks of {theirs} tokens ({theirs - 1} drafts a verify); the simulation ran the "
                f"draft's own block, {num_draft_tokens} ({num_steps} drafts): another block is not simulated (start the "
                "server without --speculative-num-draft-tokens / --speculative-*-block-size: SGLang then takes the "
                "draft's)")
    theirs = (drafting.get("num_steps"), drafting.get("eagle_topk"), drafting.get("num_draft_tokens"))
    if None in theirs or theirs == (num_steps, topk, num_draft_tokens):
        return None
    return (f"the server drafts num_steps {theirs[0]}, topk {theirs[1]}, num_draft_tokens {theirs[2]}; the "
            f"simulation ran {num_steps}, {topk}, {num_draft_tokens}: rerun it with the server's settings "
            "to compare the two")
