"""The second line of evidence: the trained wiring read off ``fc``'s weights, not through the draft's function
(docs/fingerprint.md, "The weights' reading").

Each gradient step on ``fc`` adds a sum of outer products ``delta_t s_t^T``: what training added to slot k's block
``W_k = fc.weight[:, k*H_t:(k+1)*H_t]`` lies in the span of the states that slot was fed. So the top right-singular
subspace of ``W_k`` (``V_k``, K vectors) leans towards the principal subspace of the trained state's tokens more
than towards any other state's. The statistic, per slot k and state j::

    align(k, j) = ||P_j^T V_k||_F^2 / K

``P_j``: the top K eigenvectors of the uncentred second moment of state j over the corpus' tokens (after the
draft's own per-slot norm where it has one). 1 when the two subspaces coincide, ``K / H_t`` on average for a block
unrelated to the states.

Judgement, per slot (:func:`read_weights`):

* **interval**: the prompts are resampled (one unit per prompt and its continuation, as the function's interval);
  ``P_j`` is recomputed per resample inside the top ``RANK`` directions of state j's full-corpus moment (the
  directions outside carry a negligible share of its energy, named here as the approximation), and the paired
  differences ``align(k, best) - align(k, j)`` give a normal interval at ``LEVEL`` from their spread;
* **null**: random blocks of ``W_k``'s shape, drawn as ``nn.Linear`` initialises them (the right-singular subspace of
  an i.i.d. matrix is uniformly distributed whatever its scale, so no init scale from the config changes it), read
  against every state; a slot whose best alignment's interval does not clear the highest of them says nothing in
  its weights (``informed`` false: an untouched fc, a slot the draft does not use);
* the states not separated from the best (their difference interval reaches 0) are named with it.

Assumptions, named: ``K`` = :data:`K` (the subspace's size, chosen on the fixtures, docs/fingerprint.md); the
weights record every training the block saw (a draft fine-tuned from another keeps the old states in ``W_k``), so
this reading never names a slot alone: :func:`combine` names a slot only where it agrees with the function's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Sequence

import torch

from ..states import State
from .intervals import Interval

K = 32  # right-singular vectors of a slot's block, eigenvectors of a state's moment
#: the reading needs the K-vector subspace to be a small share of the state's width: below WIDTH_PER_K * K (256 at
#: K=32) a random K-subspace already covers an eighth of the space and neighbouring states' subspaces differ by little
#: more than the resampling sees (a 32-wide random target: the trained B4 slot read as B5, separated, 0.41 against
#: 0.34, the null 0.33). Measured right on widths of 576 (SmolLM2, 32 slots); assumed to hold on wider targets.
WIDTH_PER_K = 8
RANK = 64  # the resampled moments are taken inside this many top directions of the full-corpus one
RESAMPLES = 50
NULL_DRAWS = 8
LEVEL = 0.99
SEED = 0


@dataclass(frozen=True)
class Statistic:
    """Which alignment is read (docs/fingerprint.md compares them on the fixtures): ``k`` vectors; the states'
    ``centred`` or uncentred second moment; the block's singular vectors ``weighted`` by their squared singular
    values or not; the states through the draft's own input norm (``normed``) where it has one."""

    k: int = K
    centred: bool = False
    weighted: bool = False
    normed: bool = True

    def label(self) -> str:
        return (f"K={self.k} {'centred' if self.centred else 'uncentred'}{' weighted' if self.weighted else ''}"
                f"{'' if self.normed else ' raw'}")


DEFAULT = Statistic()


@dataclass(frozen=True)
class WeightSlot:
    """What slot ``index``'s block of fc says: its alignment with every searched state (``alignment``, in the
    corpus' candidate order), the best, the states not separated from it, and whether it clears the null."""

    index: int
    alignment: tuple[float, ...]
    best: State
    runner_up: State | None
    margin: Interval | None  # align(best) - align(runner-up), prompts resampled
    candidates: tuple[State, ...]  # the best and every state not separated from it, best first
    null: float  # the highest alignment a random block of this shape reached with any state
    informed: bool  # the best alignment's interval clears ``null``
    states: tuple[State, ...] = ()  # the states ``alignment`` is given for

    @property
    def separated(self) -> bool:
        return self.informed and len(self.candidates) == 1

    def text(self) -> str:
        if not self.informed:
            return f"no reading (best {self.best.label()} {self.alignment_of(self.best):.3f}, a random block " \
                   f"reaches {self.null:.3f})"
        return " or ".join(s.label() for s in self.candidates)

    def alignment_of(self, state: State) -> float:
        return dict(zip(self.states, self.alignment)).get(state, math.nan)

    def to_json(self) -> dict:
        return {"slot": self.index, "best": self.best.label(),
                "runner_up": self.runner_up.label() if self.runner_up else None,
                "margin": self.margin.to_json() if self.margin else None,
                "candidates": [s.label() for s in self.candidates], "null": round(self.null, 4),
                "informed": self.informed,
                "alignment": {s.label(): round(a, 4) for s, a in zip(self.states, self.alignment)}}


@dataclass(frozen=True)
class WeightReading:
    slots: tuple[WeightSlot, ...]
    statistic: Statistic
    drift: tuple[float, ...]  # align(P_j, P_j+1) for consecutive states: how alike neighbours' subspaces are
    seconds: float

    def to_json(self) -> dict:
        return {"statistic": self.statistic.label(), "slots": [s.to_json() for s in self.slots],
                "drift": [round(d, 4) for d in self.drift], "seconds": round(self.seconds, 2),
                "formula": "||P_j^T V_k||_F^2 / K (docs/fingerprint.md)",
                "interval": f"{LEVEL:.0%} normal interval from {RESAMPLES} resamples of the prompts"}


def fc_blocks(draft, slots: int) -> list[torch.Tensor]:
    """Slot k's block of fc's weight, ``[H_d, H_t]`` each, in slot order."""
    w = draft.fc.weight.detach().float().cpu()
    ht = w.shape[1] // slots
    return [w[:, k * ht:(k + 1) * ht] for k in range(slots)]


def _slot_norms(draft, slots: int, ht: int) -> list[torch.Tensor | None]:
    """The per-feature scale the draft's own norm puts on slot k's input (``fc_norm.{k}``, or slot k's chunk of
    ``input_norm``'s weight), or None where it has none. Each token is then scaled to unit RMS, as the norm does
    (``input_norm`` divides by the RMS over every slot together: approximated by the slot's own)."""
    per = getattr(draft, "fc_norm", None)
    whole = getattr(draft, "input_norm", None)
    out: list[torch.Tensor | None] = []
    for k in range(slots):
        if per is not None:
            out.append(per[k].weight.detach().float().cpu())
        elif whole is not None:
            out.append(whole.weight.detach().float().cpu()[k * ht:(k + 1) * ht])
        else:
            out.append(None)
    return out


def _tokens(corpus, dev: torch.device) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Per candidate state, its valid tokens ``[N, H_t]`` (float32, on ``dev``), and each token's unit (its
    prompt)."""
    valid = corpus.valid.to(dev)
    unit = torch.arange(valid.shape[0], device=dev)[:, None].expand_as(valid)[valid]
    return [s.detach().to(dev).float()[valid] for s in corpus.states], unit


def _top(m: torch.Tensor, k: int, gen: torch.Generator, iters: int = 3) -> torch.Tensor:
    """The top ``k`` eigenvectors of the symmetric ``m`` (ascending, as ``eigh``): a randomised subspace iteration
    (``iters`` powers of ``m`` on ``k + 16`` random directions), then ``eigh`` of the small projected matrix; a
    full ``eigh`` where ``k`` is most of ``m``'s size."""
    n = m.shape[0]
    if 2 * (k + 16) >= n:
        return torch.linalg.eigh(m)[1][:, -k:]
    q = torch.linalg.qr(m @ torch.randn(n, k + 16, generator=gen).to(m.device))[0]
    for _ in range(iters):
        q = torch.linalg.qr(m @ q)[0]
    vals, vecs = torch.linalg.eigh(q.T @ m @ q)
    return q @ vecs[:, -k:]


def readable(draft, slots: int, stat: Statistic | None = None) -> bool:
    """Whether ``draft``'s fc can be read: it has one, of ``slots`` blocks, each at least ``WIDTH_PER_K * K`` wide."""
    fc = getattr(draft, "fc", None)
    if fc is None or slots < 1:
        return False
    return fc.weight.shape[1] // slots >= WIDTH_PER_K * (stat or DEFAULT).k


def read_weights(draft, corpus, slots: int, stat: Statistic = DEFAULT, resamples: int = RESAMPLES,
                 seed: int = SEED) -> WeightReading:
    """Every slot's alignment with every state of ``corpus`` (:class:`~eagle_audit.fingerprint.score.Corpus`), its
    resampled interval and null (module doc)."""
    import time

    t0 = time.perf_counter()
    cands = corpus.candidates
    # on the corpus' device (the GPU where the states were captured there); the random draws on the CPU, so that a
    # reading is the same draws on either
    dev = corpus.states[0].device if len(corpus.states) else torch.device("cpu")
    blocks = [b.to(dev) for b in fc_blocks(draft, slots)]
    ht = blocks[0].shape[1]
    k = max(1, min(stat.k, ht // 4, blocks[0].shape[0]))
    rank = min(ht, max(RANK, 2 * k))
    norms = [n.to(dev) if n is not None else None for n in _slot_norms(draft, slots, ht)] if stat.normed \
        else [None] * slots
    V = []  # [H_t, K] per slot, scaled by the singular values when weighted (then normalised to total 1 * K)
    for b in blocks:
        _, sv, vh = torch.linalg.svd(b, full_matrices=False)
        v = vh[:k].T
        if stat.weighted:
            w = sv[:k].pow(2)
            v = v * (w / w.sum() * k).sqrt()
        V.append(v)
    xs, unit = _tokens(corpus, dev)
    G = int(unit.max()) + 1 if unit.numel() else 0
    gen = torch.Generator().manual_seed(seed)
    weights = torch.stack([torch.bincount(torch.randint(0, G, (G,), generator=gen), minlength=G)
                           for _ in range(resamples)]).float().to(dev)  # [R, G] prompt counts per resample
    # random blocks: nn.Linear's init (uniform), its right-singular subspace uniform whatever its scale
    nulls = [_top(r.T @ r, k, gen) for r in (torch.empty(blocks[0].shape).uniform_(-1, 1, generator=gen).to(dev)
                                             for _ in range(NULL_DRAWS))]
    full = torch.zeros(slots, len(cands), device=dev)
    boot = torch.zeros(resamples, slots, len(cands), device=dev)
    null_hi = [0.0] * slots
    tops: list[torch.Tensor] = []
    groups = {tuple(n.tolist()) if n is not None else None: n for n in norms}
    first = next(iter(groups))
    for j in range(len(cands)):
        for key, scale in groups.items():
            x = xs[j]
            if scale is not None:
                x = x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * scale
            if stat.centred:
                x = x - x.mean(0)
            m = x.T @ x
            U = _top(m, rank, gen)  # [H_t, R]
            P = U[:, -k:]
            y = x @ U  # [N, R]
            per = torch.stack([y[unit == g].T @ y[unit == g] for g in range(G)])  # [G, R, R]: each prompt's moment
            Mb = torch.einsum("rg,gab->rab", weights, per)
            # [R, rank, K]; small batched eigh is faster on the CPU than on a GPU
            Eb = torch.linalg.eigh(Mb.cpu())[1][:, :, -k:].to(dev)
            for s in range(slots):
                if (tuple(norms[s].tolist()) if norms[s] is not None else None) != key:
                    continue
                full[s, j] = (P.T @ V[s]).pow(2).sum() / k
                uv = U.T @ V[s]  # [rank, K]
                boot[:, s, j] = torch.einsum("rak,al->rkl", Eb, uv).pow(2).sum((1, 2)) / k
                null_hi[s] = max(null_hi[s], max(float((P.T @ v).pow(2).sum() / k) for v in nulls))
            if key == first:
                tops.append(P)
    full, boot = full.cpu(), boot.cpu()
    drift = []
    if len(tops) >= 2:
        drift = [float((a.T @ b).pow(2).sum() / k) for a, b in zip(tops, tops[1:])]
    z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
    out = []
    for s in range(slots):
        row = full[s]
        order = sorted(range(len(cands)), key=lambda j: -float(row[j]))
        b = order[0]
        def iv(j):
            d = boot[:, s, b] - boot[:, s, j]
            mean, sd = float(row[b] - row[j]), float(d.std()) if resamples > 1 else 0.0
            return Interval(mean, mean - z * sd, mean + z * sd)
        ivs = {j: iv(j) for j in order[1:]}
        close = (b,) + tuple(j for j in order[1:] if ivs[j].low <= 0)
        best_sd = float(boot[:, s, b].std()) if resamples > 1 else 0.0
        informed = float(row[b]) - z * best_sd > null_hi[s]
        runner = order[1] if len(order) > 1 else None
        out.append(WeightSlot(s, tuple(float(a) for a in row), cands[b], cands[runner] if runner is not None else None,
                              ivs.get(runner) if runner is not None else None, tuple(cands[j] for j in close),
                              null_hi[s], informed, cands))
    return WeightReading(tuple(out), stat, tuple(drift), time.perf_counter() - t0)


def wiring_of(reading: WeightReading, best: Sequence[State]) -> tuple[State, ...]:
    """The weights' whole wiring: per slot the state fc's weights separate, else ``best``'s (the function's)."""
    return tuple(w.best if w.separated else b for w, b in zip(reading.slots, best))


def combine(slots: Sequence, reading: WeightReading | None, joint_admits: bool = False) -> tuple:
    """One verdict per slot from the two lines (module doc): the function's slots
    (:class:`~eagle_audit.fingerprint.result.SlotInference`) with the weights' reading joined.

    * no reading from the weights (below the null, or not read): the function's slot as it is;
    * the two agree (the function's named states and the weights' share one): the function's slot, narrowed to the
      weights' state where the weights separate it and the function's interval contains it;
    * the function names nothing (undetermined, or it does not use the slot's information) and the weights separate
      a state its interval contains (not separated from its best; where the draft does not use the slot's
      information, ``uninformed``, the function excludes no state): that state, ``lines`` "weights";
    * they exclude each other (no state in common): undetermined, both readings in the slot's one line; unless
      ``joint_admits``: the function does not separate the weights' whole wiring (:func:`wiring_of`) from its own
      best (their paired interval reaches 0), so its per-slot intervals, each taken with the other slots at its
      best, exclude the weights' state only where those slots are the function's; then a state the weights
      separate is named (``lines`` "weights"). Seen on a speculators 0.9.0 fixture trained on [B4, B11, B24]
      (tests/trainers): the function's best [B21, B11, B13], each slot's interval excluding the truth. Never a
      slot named on the weights against the function's interval.
    """
    if reading is None:
        return tuple(slots)
    out = []
    for sl, w in zip(slots, reading.slots):
        if not w.informed:
            out.append(replace(sl, weights=w.text()))
            continue
        said = sl.text()
        sl = replace(sl, weights=w.text(), weights_state=w.best if w.separated else None)
        F = tuple(sl.candidates)
        # a slot whose information the draft does not use (uninformed: its best scores as well shuffled over the
        # positions) has no interval: the function excludes no state there
        anything = sl.uninformed
        common = list(w.candidates) if anything else [s for s in F if s in w.candidates]
        named = not sl.undetermined and not sl.uninformed
        if not common and not sl.unsearched and joint_admits and w.separated:
            out.append(replace(sl, best=w.best, candidates=(w.best,), ambiguous=False, undetermined=False,
                               uninformed=False, equivalent=(), lines="weights",
                               function=f"{said}, its best wiring not separated from the weights' whole wiring"))
        elif not common and not sl.unsearched:
            out.append(replace(sl, lines="disagree", function=said, undetermined=True,
                               ambiguous=True))
        elif w.separated and (anything or w.best in F) and (len(F) > 1 or not named):
            out.append(replace(sl, best=w.best, candidates=(w.best,), ambiguous=bool(sl.unsearched),
                               undetermined=False, uninformed=False, equivalent=(), function=said, lines="weights" if not named else "both"))
        elif named and common:
            out.append(replace(sl, lines="both"))
        else:  # the function undetermined, the weights not separating one state of its interval
            out.append(sl)
    return tuple(out)
