"""A local HTTP server that answers ``POST /generate`` with ``return_hidden_states`` as an SGLang 0.5.23
capture-only server does, built from the wheel's own pieces (tests/served/sglang_pieces.py):

1. start-up: the launch line is parsed by the wheel's argument parser and checked by its capture-only
   validation (a line SGLang refuses never starts this server); the ids then go through the
   architecture's ``set_eagle3_layers_to_capture`` and capture loop (tests/engine_wheels/sglang_engine.py), which
   name the boundaries each slot holds;
2. per request: the prompt is prefilled in chunks of ``--chunked-prefill-size`` (-1: one) and the greedy
   continuation decoded one token per forward; each forward's captures (the boundaries of a tiny
   transformers model, float32, on exactly those positions) are packed by ``pack_aux_hidden_states``
   and appended by ``_append_prefill_hidden_states`` (``store`` by the scheduler's middle-chunk rule) /
   ``_append_decode_hidden_states``; ``_GenerationStreamAccumulator.accept`` cuts them at ``finished_len``;
3. the radix cache is keyed by ``(extra_key, tokens)`` (``radix_cache.py:223-247``): a request sharing a
   cached prefix under the same key prefills only the suffix and reports ``cached_tokens``; the match is
   capped by the wheel's ``Req._compute_max_prefix_len`` (a logprob request from position 0: no match);
4. ``return_logprob`` (``logprob_start_len``, ``top_logprobs_num``): the tiny model's log-softmax at every
   position goes through the wheel's ``get_top_logprobs_raw``, the scheduler's logprob processor per prefill
   chunk and decode step, the accumulator and the tokenizer manager's ``convert_logprob_style``, which writes
   ``meta_info.input_top_logprobs`` / ``output_top_logprobs`` (tests/served/sglang_pieces.py).

Faults (:class:`Faults`) are injected into the captures before packing, or into the reply.
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import torch

from tests.engine_wheels.sglang_engine import EngineRun
from tests.served.sglang_pieces import SGLangPieces
from tests.served.http_serving import http_serving


@dataclass(frozen=True)
class Faults:
    partial: tuple[int, int] | None = None  # (slot, ranks): the slot is one rank's partial sum of its last layer
    swap: tuple[int, int] | None = None  # two slots exchanged
    deeper: int | None = None  # this slot holds the next boundary
    zero: int | None = None  # this slot is zeros
    ignore_extra_key: bool = False  # the radix cache shares prefixes across extra_keys (a broken namespace)
    hide_cached: bool = False  # ... and reports cached_tokens 0
    cut_at: float | None = None  # the connection closes after this share of the reply
    busy: int = 0  # the first this many /generate requests answer 503 with Retry-After: 1 (a busy server)
    drop_decode: int = 0  # the last decoded-token states are lost
    extra_slot: bool = False  # one more slot than the launch gives (wrong width)


class Target:
    """The tiny transformers model the server 'runs': every boundary at every position of a sequence."""

    def __init__(self, path, device: str = "cpu", dtype=torch.float32):
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map={"": device}).eval()
        self.device = device
        self.n = self.model.config.num_hidden_layers

    @torch.no_grad()
    def boundaries(self, ids: list[int]) -> torch.Tensor:
        """``[N+1, T, H]``: B_0..B_{N-1} from HF ``hidden_states[k]``; B_N the last layer's output before the
        final norm (hooked: HF's last entry is post-norm)."""
        last = {}
        layers = self.model.model.layers
        h = layers[-1].register_forward_hook(lambda m, a, o: last.setdefault("x", o[0] if isinstance(o, tuple) else o))
        try:
            out = self.model(torch.tensor([ids], device=self.device), output_hidden_states=True)
        finally:
            h.remove()
        hs = [x[0] for x in out.hidden_states[: self.n]] + [last["x"][0]]
        return torch.stack(hs).float().cpu()

    @torch.no_grad()
    def logprobs(self, ids: list[int]) -> torch.Tensor:
        """``[T, vocab]`` float32: the log-softmax of the logits after each position."""
        out = self.model(torch.tensor([ids], device=self.device))
        return torch.log_softmax(out.logits[0].float(), -1).cpu()

    @torch.no_grad()
    def greedy(self, ids: list[int], n: int) -> list[int]:
        seq = list(ids)
        for _ in range(n):
            seq.append(int(self.model(torch.tensor([seq], device=self.device)).logits[0, -1].argmax()))
        return seq[len(ids):]


class FakeSGLang:
    def __init__(self, pieces: SGLangPieces, engine: EngineRun, argv: list[str], target_path, architecture: str,
                 faults: Faults = Faults(), target: "Target | None" = None, parsed=None):
        """``parsed``: the launch line already parsed (bench/evidence/served_gpu.py on a machine without msgspec, which
        SGLang's parser needs; the tests always parse here)."""
        self.pieces, self.faults = pieces, faults
        self.version = pieces.version
        self.target = target or Target(target_path)
        ns = parsed if parsed is not None else pieces.parse(argv)
        if parsed is None:
            pieces.validate_capture(ns, self.target.n)  # SGLang's refusal raises here, as the server exits
        if not ns.enable_return_aux_hidden_states:
            raise ValueError("this test server answers capture-only launches")
        out = engine.run(architecture, self.target.n, ns.return_aux_hidden_state_layer_ids)
        if out.failed_at:
            raise RuntimeError(f"{out.failed_at}: {out.error}: {out.message}")
        self.boundaries = [int(lab[1:]) for lab in out.captured]  # "B<k>" per slot, in capture order
        self.args = ns
        self.chunk = ns.chunked_prefill_size if ns.chunked_prefill_size not in (None, -1) else None
        self.tree: dict = {}  # radix cache: (namespace, prefix tuple) -> True
        self.requests = 0

    # ------------------------------------------------------------------ one request

    def _captures(self, b: torch.Tensor, a: int, z: int) -> list[torch.Tensor]:
        f = self.faults
        aux = [b[k, a:z].clone() for k in self.boundaries]
        if f.partial is not None:
            s, ranks = f.partial
            k = self.boundaries[s]
            aux[s] = b[k - 1, a:z] + (b[k, a:z] - b[k - 1, a:z]) / ranks
        if f.swap is not None:
            i, j = f.swap
            aux[i], aux[j] = aux[j], aux[i]
        if f.deeper is not None:
            aux[f.deeper] = b[self.boundaries[f.deeper] + 1, a:z].clone()
        if f.zero is not None:
            aux[f.zero] = torch.zeros_like(aux[f.zero])
        if f.extra_slot:
            aux.append(aux[-1].clone())
        return aux

    def generate(self, body: dict) -> dict:
        ids = [int(t) for t in body["input_ids"]]
        n = int(body["sampling_params"]["max_new_tokens"])
        key = None if self.faults.ignore_extra_key else body.get("extra_key")
        # GenerateReqInput's defaults (io_struct.py:565-570)
        want_lp = bool(body.get("return_logprob") or False)
        lp_start = -1 if body.get("logprob_start_len") is None else int(body["logprob_start_len"])
        top_k = int(body.get("top_logprobs_num") or 0)
        cap = self.pieces.max_prefix_len()(types.SimpleNamespace(
            dllm_config=None, return_logprob=want_lp, logprob_start_len=lp_start, is_dllm=lambda: False), len(ids))
        cached = 0
        for m in range(cap, 0, -1):  # the longest cached prefix the request may reuse
            if (key, tuple(ids[:m])) in self.tree:
                cached = m
                break
        for m in range(1, len(ids) + 1):
            self.tree[(key, tuple(ids[:m]))] = True
        out_ids = self.target.greedy(ids, n)
        b = self.target.boundaries(ids + out_ids[:-1])  # [N+1, T, H]
        pack = self.pieces.pack()
        req = types.SimpleNamespace(hidden_states=[], return_hidden_states=bool(body.get("return_hidden_states")),
                                    finished_len=None, output_ids=[])
        full = types.SimpleNamespace(is_full=lambda: True, is_last=lambda: False)
        append_prefill, append_decode = self.pieces.append_prefill(), self.pieces.append_decode()
        lp = _Logprobs(self.pieces, self.target, ids, out_ids, lp_start, top_k, cached) if want_lp else None
        # prefill: the uncached suffix, in chunks; a middle chunk is not stored (batch_result_processor.py:305-309)
        starts = list(range(cached, len(ids), self.chunk or len(ids)))
        for c, a in enumerate(starts):
            z = min(a + (self.chunk or len(ids)), len(ids))
            packed = pack(self._captures(b, a, z))
            middle = c < len(starts) - 1
            append_prefill(None, req=req, logits_output=types.SimpleNamespace(hidden_states=packed),
                           hidden_state_offset=0, capture_hidden_mode=full, extend_input_len=z - a, store=not middle)
            if lp:
                lp.prefill(a, z, last=not middle)
        req.output_ids.append(out_ids[0])
        for j in range(1, n):  # decode: the forward of output token j-1 (position P + j - 1)
            p = len(ids) + j - 1
            packed = pack(self._captures(b, p, p + 1))
            req.output_ids.append(out_ids[j])
            if j <= n - 1 - self.faults.drop_decode:
                append_decode(req=req, hidden_states=packed, start=0, accept_len=1)
            if lp:
                lp.decode(p, out_ids[j])
        req.finished_len = n  # FINISH_LENGTH at max_new_tokens (schedule_batch.py:2037-2042)
        acc = self._accept(req, ids, cached, lp)
        hidden = acc.output_hidden_states[0] if acc.output_hidden_states else None
        meta = {"id": f"req-{self.requests}", "finish_reason": {"type": "length", "length": n},
                "prompt_tokens": len(ids), "weight_version": "default", "num_retractions": 0}
        if lp:  # tokenizer_manager.py:2520-2530, before the token counts and the states
            lp.meta_info(acc, meta)
        meta.update({"reasoning_tokens": 0, "completion_tokens": n,
                     "cached_tokens": 0 if self.faults.hide_cached else cached})
        if hidden is not None:
            meta["hidden_states"] = hidden
        self.requests += 1
        return {"text": "", "output_ids": out_ids, "meta_info": meta}

    def _accept(self, req, ids: list[int], cached: int, lp: "_Logprobs | None" = None):
        """The wheel's ``_GenerationStreamAccumulator.accept`` on the finished request: the accumulator."""
        acc_cls = self.pieces.accumulator()
        acc = acc_cls()
        for name in ("rids", "output_reqs", "finished_reasons", "output_ids", "prompt_tokens", "reasoning_tokens",
                     "cached_tokens", "beam_search_output", "image_tokens", "audio_tokens", "video_tokens",
                     "retraction_counts", "weight_versions", "time_stats"):
            setattr(acc, name, [])
        acc.current_weight_version = None
        acc.customized_info = {}
        acc.rust_server_mode = True  # skips the detokenizer bookkeeping, which takes no part in the states
        acc.spec_algorithm = types.SimpleNamespace(is_none=lambda: True)
        acc.return_sampling_mask = acc.return_routed_experts = acc.return_indexer_topk = False
        acc.return_logprob = lp is not None
        acc.return_hidden_states = True
        acc.disaggregation_mode = None
        acc.has_input_top_logprobs_flat = False  # a dataclass default (output_streamer.py:397)
        acc.__post_init__()  # the lists its flags need
        through = self.pieces.through_stop()
        full = types.SimpleNamespace(
            beam_group=None, finished=lambda: True, finished_output=False, finished_len=req.finished_len,
            output_ids=req.output_ids, send_token_offset=0, send_output_token_logprobs_offset=0, rid="r",
            finished_reason=types.SimpleNamespace(to_json=lambda: {"type": "length"}), origin_input_ids=ids,
            reasoning_tokens=0, cached_tokens=cached, get_mm_token_counts=lambda: (0, 0, 0), retraction_count=0,
            weight_version_events=[], time_stats=None, stream=False, return_hidden_states=req.return_hidden_states,
            hidden_states=req.hidden_states, customized_info=None, is_retracted=False,
            return_logprob=lp is not None, input_logprob_sent=False, logprob=lp.req.logprob if lp else None)
        full.output_ids_through_stop = through(full)
        acc.accept(req=full)
        return acc


class _Logprobs:
    """One request's logprob path through the wheel's pieces (module docstring, 4.)."""

    def __init__(self, pieces: SGLangPieces, target: Target, ids: list[int], out_ids: list[int], start: int,
                 top_k: int, cached: int):
        self.pieces, self.k = pieces, top_k
        self.seq = ids + out_ids  # the token after position t is seq[t + 1]
        self.lp = target.logprobs(ids + out_ids[:-1])  # [T, vocab]
        self.top, self.stage = pieces.top_logprobs()
        self.proc = pieces.logprob_processor()()
        self.proc.model_config = types.SimpleNamespace(vocab_size=self.lp.shape[1])
        self.start = len(ids) if start == -1 else max(start, cached)  # compute_extend_logprob_start_len
        none = dict.fromkeys(("input_token_logprobs_val", "input_token_logprobs_idx", "input_top_logprobs_val",
                              "input_top_logprobs_idx", "input_token_ids_logprobs_val",
                              "input_token_ids_logprobs_idx", "input_top_logprobs_val_flat",
                              "input_top_logprobs_idx_flat", "input_top_logprobs_flat_null_prefix"))
        lists = {f"output_{n}": [] for n in ("token_logprobs_val", "token_logprobs_idx", "top_logprobs_val",
                                             "top_logprobs_idx", "token_ids_logprobs_val", "token_ids_logprobs_idx")}
        self.req = types.SimpleNamespace(
            logprob=types.SimpleNamespace(**none, **lists, top_logprobs_num=top_k, token_ids_logprob=None),
            input_token_logprobs=None, temp_input_top_logprobs_val=None, temp_input_top_logprobs_idx=None,
            temp_input_token_ids_logprobs_val=None, temp_input_token_ids_logprobs_idx=None, is_prefill_only=False,
            token_indices_to_pool=None, origin_input_ids=ids, logprob_start_len=start, return_logprob=True,
            return_flat_raw_top_logprobs=False)

    def _output(self, rows: range, stage, sampled_at: int | None) -> types.SimpleNamespace:
        """A LogitsProcessorOutput of one forward: input logprobs over ``rows`` (token logprobs as the tuple
        the processor asserts), top-k by ``get_top_logprobs_raw``; the sampled token's at ``sampled_at``."""
        out = types.SimpleNamespace(input_token_logprobs=tuple(float(self.lp[t, self.seq[t + 1]]) for t in rows),
                                    input_top_logprobs_val=None, input_top_logprobs_idx=None,
                                    next_token_logprobs=None, next_token_top_logprobs_val=None,
                                    next_token_top_logprobs_idx=None, next_token_token_ids_logprobs_val=None)
        if self.k > 0 and len(rows):
            out.input_top_logprobs_val, out.input_top_logprobs_idx = self.top(
                self.lp[rows.start:rows.stop], [self.k], stage.PREFILL, extend_logprob_pruned_lens_cpu=[len(rows)])
        if sampled_at is not None:
            out.next_token_logprobs = [float(self.lp[sampled_at, self.seq[sampled_at + 1]])]
            if self.k > 0:
                out.next_token_top_logprobs_val, out.next_token_top_logprobs_idx = self.top(
                    self.lp[sampled_at:sampled_at + 1], [self.k], stage.DECODE)
        return out

    def prefill(self, a: int, z: int, last: bool) -> None:
        rows = range(max(self.start, a), z)
        if not last:
            if len(rows):
                self.proc.add_input_logprob_return_values(0, self.req, self._output(rows, self.stage, None), 0,
                                                          len(rows), last_prefill_chunk=False)
            return
        self.proc.add_logprob_return_values(0, self.req, 0, [self.seq[z]], len(rows),
                                            self._output(rows, self.stage, z - 1))

    def decode(self, p: int, token: int) -> None:
        self.proc.add_logprob_return_values(0, self.req, 0, [token], 0, self._output(range(0), self.stage, p))

    def meta_info(self, acc, meta: dict) -> None:
        """``TokenizerManager.convert_logprob_style`` on the accumulator's batch (its fields as
        ``output_streamer.py:754-770`` hands them on: the flat lists only when one is set)."""
        tm = self.pieces.tokenizer_logprobs()()
        tm.tokenizer = None
        names = ("input_token_logprobs", "output_token_logprobs", "input_top_logprobs", "output_top_logprobs",
                 "input_token_ids_logprobs", "output_token_ids_logprobs")
        state = types.SimpleNamespace(
            obj=types.SimpleNamespace(top_logprobs_num=self.k, token_ids_logprob=None,
                                      return_flat_raw_top_logprobs=False, return_flat_raw_output_top_logprobs=False),
            input_top_logprobs_flat_fields=None, input_top_logprobs_flat_num_rows=-1,
            input_top_logprobs_scheduler_flat=None,
            **{f"{n}_{x}": [] for n in names for x in ("val", "idx")}, **{n: [] for n in names})
        recv = types.SimpleNamespace(**{f"{n}_{x}": getattr(acc, f"{n}_{x}") for n in names for x in ("val", "idx")})
        flat = acc.has_input_top_logprobs_flat
        recv.input_top_logprobs_val_flat = acc.input_top_logprobs_val_flat if flat else None
        recv.input_top_logprobs_idx_flat = acc.input_top_logprobs_idx_flat if flat else None
        recv.input_top_logprobs_flat_null_prefix = acc.input_top_logprobs_flat_null_prefix if flat else None
        tm.convert_logprob_style(meta, state, self.k, None, False, recv, 0, finished=True)


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-sglang"

    def log_message(self, *a):
        pass

    def _send(self, code: int, data: bytes, cut: float | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if cut is not None:
            self.wfile.write(data[: int(len(data) * cut)])
            self.wfile.flush()
            self.close_connection = True
            return
        step = 1 << 16
        for i in range(0, len(data), step):  # in pieces, as a large reply arrives
            self.wfile.write(data[i:i + step])

    def do_GET(self):
        fake: FakeSGLang = self.server.fake
        if self.path == "/server_info":
            # build_server_info: the resolved arguments (srt/utils/common.py:3584-3592), a few of them here
            a = fake.args
            info = {"internal_states": [{}], "chunked_prefill_size": a.chunked_prefill_size,
                    "enable_return_aux_hidden_states": a.enable_return_aux_hidden_states,
                    "return_aux_hidden_state_layer_ids": a.return_aux_hidden_state_layer_ids,
                    "speculative_algorithm": None, "model_path": a.model_path,
                    "dtype": str(next(fake.target.model.parameters()).dtype).replace("torch.", ""),
                    # sglang.version.__version__ (http_server.py:888): the release of the wheel whose pieces run here
                    "version": fake.version}
            self._send(200, json.dumps(info).encode())
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self):
        fake: FakeSGLang = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/generate":
            return self._send(404, b'{"error": "not found"}')
        fake.busy_answered = getattr(fake, "busy_answered", 0)
        if fake.busy_answered < fake.faults.busy:
            fake.busy_answered += 1
            data = b'{"error": "Service Unavailable: the server is overloaded"}'
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Retry-After", "1")
            self.end_headers()
            return self.wfile.write(data)
        reply = fake.generate(body)
        self._send(200, json.dumps(reply).encode(), fake.faults.cut_at)


def serving(fake: FakeSGLang):
    """The fake on a loopback port (a context manager yielding its URL)."""
    return http_serving(_Handler, fake)
