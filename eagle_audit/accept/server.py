"""Read accept length from a running server, for the same prompts (urllib only).

* SGLang (v0.5.23): ``POST /generate`` per prompt (``input_ids``, greedy) -> ``meta_info.spec_accept_length``
  (completion tokens / verifies, prefill token included); then ``GET /server_info`` ->
  ``internal_states[0].avg_spec_accept_length`` (tokens per verify; folded in every
  ``--decode-log-interval`` decode steps, so it lags and may be absent).
* vLLM: Prometheus ``GET /metrics`` before and after ``POST /v1/completions`` per prompt;
  AL = 1 + d(``vllm:spec_decode_num_accepted_tokens_total``) / d(``vllm:spec_decode_num_drafts_total``).

``kind="auto"`` asks ``/server_info`` first (SGLang), then ``/metrics`` (vLLM).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Sequence

from ..errors import AuditError


@dataclass(frozen=True)
class ServerReading:
    url: str
    kind: str  # "sglang" or "vllm"
    accept_length: float | None  # server-level: tokens per verify (bonus included, prefill token excluded)
    request_accept_length: float | None  # SGLang: mean of per-request meta_info.spec_accept_length
    requests: int
    source: str  # which field(s) the figures came from

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise AuditError(f"--server {url}: unreachable ({reason})", hint="is the server running and the URL right?") from None


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise AuditError(f"--server {url}: HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise AuditError(f"--server {url}: unreachable or not JSON ({getattr(e, 'reason', e)})") from None


_METRIC = re.compile(r"^(vllm:spec_decode_num_(?:drafts|accepted_tokens)_total)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$")


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """Sum of each spec-decode counter over its label sets."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _METRIC.match(line.strip())
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def detect(url: str, timeout: float) -> str:
    code, body = _get(url + "/server_info", timeout)
    if code == 200:
        try:
            if "internal_states" in json.loads(body):
                return "sglang"
        except ValueError:
            pass
    code, body = _get(url + "/metrics", timeout)
    if code == 200 and b"vllm:" in body:
        return "vllm"
    raise AuditError(f"--server {url}: neither an SGLang /server_info nor a vLLM /metrics endpoint answered")


def read_server(url: str, prompts: Sequence[Sequence[int]], max_new: int, kind: str = "auto",
                timeout: float = 30.0) -> ServerReading:
    url = url.rstrip("/")
    kind = detect(url, timeout) if kind == "auto" else kind
    if kind == "sglang":
        per = []
        for ids in prompts:
            r = _post(url + "/generate", {"input_ids": list(ids), "sampling_params": {
                "max_new_tokens": max_new, "temperature": 0.0}}, timeout)
            v = (r.get("meta_info") or {}).get("spec_accept_length")
            if v is not None:
                per.append(float(v))
        _, body = _get(url + "/server_info", timeout)
        try:
            states = json.loads(body).get("internal_states") or [{}]
            avg = states[0].get("avg_spec_accept_length")
        except (ValueError, AttributeError):
            avg = None
        return ServerReading(url, "sglang", float(avg) if avg is not None else None,
                             sum(per) / len(per) if per else None, len(prompts),
                             "meta_info.spec_accept_length; /server_info internal_states[0].avg_spec_accept_length")
    if kind == "vllm":
        before = parse_vllm_metrics(_get(url + "/metrics", timeout)[1].decode(errors="replace"))
        for ids in prompts:
            _post(url + "/v1/completions", {"prompt": list(ids), "max_tokens": max_new, "temperature": 0.0}, timeout)
        after = parse_vllm_metrics(_get(url + "/metrics", timeout)[1].decode(errors="replace"))
        d = after.get("vllm:spec_decode_num_drafts_total", 0.0) - before.get("vllm:spec_decode_num_drafts_total", 0.0)
        acc = (after.get("vllm:spec_decode_num_accepted_tokens_total", 0.0)
               - before.get("vllm:spec_decode_num_accepted_tokens_total", 0.0))
        return ServerReading(url, "vllm", 1 + acc / d if d > 0 else None, None, len(prompts),
                             "1 + d(vllm:spec_decode_num_accepted_tokens_total) / d(vllm:spec_decode_num_drafts_total)")
    raise AuditError(f"--server-kind: {kind!r} is not auto, sglang or vllm")
