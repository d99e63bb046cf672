"""Each served slot against the local capture of every boundary: which boundary it really is.

For a slot expected (by the engine's rules and the launch) to be boundary B_e, and the local states of
every boundary ``B_k`` on the same tokens:

* per token, the cosine of the served state and B_k, and the relative error ``||s - b|| / ||b||``;
* the slot **equals** B_k when the smallest per-token cosine is at least :data:`COS_MIN` and the
  token-mean relative error at most :data:`REL_MAX` (the error catches what cosine cannot: a state
  scaled by 1/R, e.g. a per-rank partial sum of a state whose other ranks' shares are equal);
* verdict ``ok`` (equals B_e), ``shifted`` (equals another boundary: the engine captures elsewhere than
  its rules say) or ``mismatch`` (equals no boundary: partial sums, a wrong gather, zeros, corruption).

Thresholds, and what they were measured on (docs/server.md, "Thresholds, and what they were measured on"): a
served bf16 state against a local capture of the same weights differs by kernel rounding only. :data:`COS_MIN` and
:data:`REL_MAX` sit between that rounding (bf16 vs fp32 and bf16 vs bf16 on other kernels) and the
smallest real fault of the test server (one rank's share of a 2-rank partial sum; one boundary deeper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..layers.result import Finding
from ..states import State

#: (smallest per-token cosine, largest token-mean relative error) for "equals", by the precision of the states
#: compared (the looser of the two sides applies). Measured (docs/server.md, "Thresholds, and what they were
#: measured on"), bf16 against fp32 of the same weights at every boundary: SmolLM2-135M (CPU) per-token cosine
#: >= 0.9944, relative error <= 0.028; a Llama-3.1-8B-shaped random bf16 model (H200) >= 0.9975 and <= 0.054
#: (growing with depth, 0.009 at
#: B1). The faults nearest to "equal" (fp32 states): one rank's share of a 2-rank partial sum >= 0.11 (SmolLM2)
#: and >= 0.088 (8B, at B32) from either neighbouring boundary; one boundary deeper >= 0.18; an 8-rank share
#: 0.022-0.05 from the boundary before (not separable from bf16 rounding: it reads as that boundary,
#: ENGINE_STATE_SHIFTED). bf16's 0.07 sits between 0.054 and 0.088: thin at the depth of an 8B model, which is why
#: a float32 local capture (``dtype="float32"``) is the better reference. float32 on both sides differs by kernel
#: order only.
THRESHOLDS = {"bfloat16": (0.99, 0.07), "float16": (0.99, 0.07), "float32": (0.9999, 0.01)}
#: what a served state's precision is taken to be when the server does not say (SGLang's --dtype auto: the
#: checkpoint's, bf16 for the models this audits)
ASSUMED_SERVED_DTYPE = "bfloat16"
COS_MIN, REL_MAX = THRESHOLDS["bfloat16"]


def thresholds_for(*dtypes: str | None) -> tuple[float, float]:
    """The looser thresholds of the precisions compared (an unknown one counts as bf16)."""
    pairs = [THRESHOLDS.get(str(d).replace("torch.", ""), THRESHOLDS["bfloat16"]) for d in dtypes]
    return min(p[0] for p in pairs), max(p[1] for p in pairs)


@dataclass(frozen=True)
class SlotMatch:
    slot: int
    expected: State
    verdict: str  # "ok", "shifted", "mismatch"
    matched: State | None  # the boundary the slot equals, None when none
    nearest: State  # the boundary with the highest token-mean cosine
    nearest_cosine: float
    cosine: float  # token-mean cosine with the expected boundary
    min_cosine: float  # per-token minimum of that cosine
    rel_error: float  # token-mean relative error against the expected boundary
    tokens: int

    def to_json(self) -> dict:
        return {"slot": self.slot, "expected": self.expected.label(), "verdict": self.verdict,
                "matched": self.matched.label() if self.matched else None, "nearest": self.nearest.label(),
                "nearest_cosine": self.nearest_cosine, "cosine": self.cosine, "min_cosine": self.min_cosine,
                "rel_error": self.rel_error, "tokens": self.tokens}


def _stats(served: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token cosine and relative error of ``served`` [T, H] against ``local`` [T, H] (float64)."""
    s, b = served.astype(np.float64), local.astype(np.float64)
    ns, nb = np.linalg.norm(s, axis=-1), np.linalg.norm(b, axis=-1)
    cos = (s * b).sum(-1) / np.maximum(ns * nb, 1e-30)
    cos = np.where((ns == 0) & (nb == 0), 1.0, cos)
    rel = np.linalg.norm(s - b, axis=-1) / np.maximum(nb, 1e-30)
    return cos, rel


def compare_slots(served: Sequence[np.ndarray], local: Mapping[State, np.ndarray], expected: Sequence[State],
                  cos_min: float = COS_MIN, rel_max: float = REL_MAX) -> tuple[SlotMatch, ...]:
    """``served``: per request ``[T, K, H]``; ``local``: per boundary the same requests' ``[T_total, H]``
    concatenated in request order. Positions are every position of every request."""
    flat = np.concatenate([np.asarray(x) for x in served], axis=0)  # [T_total, K, H]
    out = []
    for i, exp in enumerate(expected):
        s = flat[:, i, :]
        table = {}
        for st, b in local.items():
            if b.shape != s.shape:
                raise ValueError(f"local {st.label()} is {b.shape}, served slot {i} is {s.shape}")
            table[st] = _stats(s, b)
        equal = [st for st, (cos, rel) in table.items() if cos.min() >= cos_min and rel.mean() <= rel_max]
        nearest = max(table, key=lambda st: (table[st][0].mean(), -abs(st.boundary - exp.boundary)))
        if exp in table:
            cos, rel = table[exp]
        else:
            cos, rel = np.full(s.shape[0], np.nan), np.full(s.shape[0], np.nan)
        if exp in equal:
            verdict, matched = "ok", exp
        elif equal:
            verdict = "shifted"
            matched = min(equal, key=lambda st: (-table[st][0].mean(), abs(st.boundary - exp.boundary)))
        else:
            verdict, matched = "mismatch", None
        out.append(SlotMatch(i, exp, verdict, matched, nearest, float(table[nearest][0].mean()), float(cos.mean()),
                             float(cos.min()), float(rel.mean()), int(s.shape[0])))
    return tuple(out)


def served_findings(matches: Sequence[SlotMatch], engine: str, source: str,
                    slots: Sequence[int] | None = None) -> tuple[Finding, ...]:
    """ENGINE_STATE_MISMATCH / ENGINE_STATE_SHIFTED for the slots that are not what the rules say. ``slots``: the
    slot each match is reported as, in order (``layers --server``: the draft's slot that server slot feeds); by
    default the server's own slot index."""
    out = []
    for m, slot in zip(matches, slots if slots is not None else [m.slot for m in matches], strict=True):
        if m.verdict == "shifted":
            out.append(Finding(
                "ENGINE_STATE_SHIFTED", "error", slot,
                f"slot {slot}: {engine} serves {m.matched.label()} where its rules say {m.expected.label()} "
                f"(cosine with {m.expected.label()} {m.cosine:.4f}, with {m.matched.label()} {m.nearest_cosine:.4f}; "
                f"{m.tokens} tokens, {source})",
                "this build captures at another boundary than the engine's source says: the draft is fed another "
                "state than the audit of the rules assumed",
                f"treat slot {slot} as {m.matched.label()}: the fix must target what this server really captures"))
        elif m.verdict == "mismatch":
            out.append(Finding(
                "ENGINE_STATE_MISMATCH", "error", slot,
                f"slot {slot}: the state {engine} serves equals no boundary (expected {m.expected.label()}: "
                f"token-mean cosine {m.cosine:.4f}, min {m.min_cosine:.4f}, relative error {m.rel_error:.3f}; "
                f"nearest {m.nearest.label()} at cosine {m.nearest_cosine:.4f}; {source})",
                "the running engine corrupts the capture (per-rank partial sums, a wrong gather, zeros, other "
                "weights): the draft is fed a state it was never trained on",
                "check the server's parallel settings (all-reduce fusion, DP attention, EP) and kernels against a "
                "tp=1 launch of the same target"))
    return tuple(out)


def local_boundaries(target, served: Sequence, states: Sequence[State]) -> dict[State, np.ndarray]:
    """The local capture (``target``: a loaded target, :func:`eagle_audit.target.load_target`, or a state
    source) of ``states`` on exactly the served requests' tokens, asked of the state source (teacher-forced,
    memoised): per state ``[T_total, H]`` float32, requests concatenated."""
    from ..source import as_source

    got = as_source(target).teacher_forced([list(r.token_ids) for r in served], states)
    return {s: np.concatenate([f.states[s].float().cpu().numpy() for f in got], axis=0) for s in states}
