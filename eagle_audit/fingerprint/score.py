"""Score a candidate wiring: the draft's step-0 prediction, fed those states, against the target's next token.

Text (:func:`capture_corpus`): the prompts and the target's own greedy continuations, one teacher-forced
target pass per case capturing every state (``B0``..``BN``, ``BN+norm``) and the target's argmax at
every position. Draft position t reads ``embed(x[t+1])`` and the states at t (as in ``accept-rate``'s
draft-extend step) and is scored on the target's next token after x[t+1], ``argmax logits[t+1]``:

* ``hit``: the draft's top-1 (mapped to target ids through ``d2t``) equals it;
* ``logprob``: the draft's log-probability of it (over the draft vocabulary).

Positions whose target token is outside the draft vocabulary are left out (no wiring can predict them).

Later training-time-test steps (``steps`` > 1): step k at position t reads ``embed(x[t+1+k])`` and the draft's
own step k-1 hidden, attends to the step-0 keys of positions 0..t and its own keys of steps 1..k, and is scored
on the target's token after x[t+1+k] (``argmax logits[t+1+k]``): the unrolled forward SpecForge 0.2.0 and
speculators 0.9.0 train (:func:`eagle_audit.runtime.rollout.rollout` with the text as teacher tokens; equal to
both trainers' own loops within 1e-4 over 3 steps, ``tests/trainers/test_trainer_draft_forward.py``). The
wiring enters only through step 0 (fc of the states at t, and the step-0 keys), so every later step is more
evidence about the same states, correlated with step 0 at the same position: the interval's unit stays the
prompt. A score holds every step's tokens; ``Score.step`` says which.

Why it is cheap (:class:`Scorer`): ``fc`` is linear in the concatenated slots, ``fc(cat(s_1..s_n)) =
sum_i W_i s_i + b``, so each slot's product with each state is computed once and a wiring's fc output is a
sum of n precomputed tensors; only the one decoder layer and the head run per wiring. ``fc_norm`` (one
RMSNorm per chunk) stays inside the per-slot product. ``norm_before_fc`` (one RMSNorm over the whole
concatenation) scales every slot by the same per-token factor ``rsqrt(sum_i |s_i|^2 / (n H_t) + eps)``,
computed from per-state squared norms; its weight goes into the per-slot product. Both together (a chunk
norm after the global one), and an fc the engine skips (``n * H_t == H``), run the exact path instead:
the draft's own ``project`` on the concatenation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..kinds import FamilyRegistry
from ..runtime.eagle3 import Eagle3Draft
from ..states import State
from .intervals import units_of


@dataclass
class Corpus:
    """Teacher-forced text, right-padded into one batch (B cases, T = longest case - 1 positions).

    ============  =====================  ==============================================
    field         shape                  meaning
    ============  =====================  ==============================================
    ``states``    S x [B, T, H_t]        every candidate state at positions 0..T-1
    ``next_ids``  [B, T]                 x[t+1], the token the draft reads at t
    ``labels``    [B, T]                 the target's argmax at t+1 (its next token)
    ``valid``     [B, T] bool            t+1 exists in the case
    ============  =====================  ==============================================
    """

    candidates: tuple[State, ...]
    states: list[torch.Tensor]
    next_ids: torch.Tensor
    labels: torch.Tensor
    valid: torch.Tensor
    tokens: int  # text tokens (all cases, prompt + continuation)


@torch.inference_mode()
def capture_corpus(target, sequences: Sequence[Sequence[int]], candidates: tuple[State, ...], dtype=torch.float32,
                   progress: Callable[[int, int], None] | None = None) -> Corpus:
    """One teacher-forced target pass per sequence (through the target's state source: none for a sequence
    it has run before), capturing ``candidates`` and the target's next token at every position."""
    from ..source import as_source

    source = as_source(target)
    dev = source.input_device
    T = max(len(s) for s in sequences) - 1
    B = len(sequences)
    states = [torch.zeros(B, T, target.info.hidden_size, dtype=dtype, device=dev) for _ in candidates]
    next_ids = torch.zeros(B, T, dtype=torch.long, device=dev)
    labels = torch.zeros(B, T, dtype=torch.long, device=dev)
    valid = torch.zeros(B, T, dtype=torch.bool, device=dev)
    for b, seq in enumerate(sequences):
        forced = source.teacher_forced([seq], candidates, next_tokens=True)[0]
        ids = torch.tensor(list(seq), device=dev)  # [L]
        n = len(seq) - 1
        argmax = forced.next_tokens.to(dev)  # [L]
        for j, s in enumerate(candidates):
            states[j][b, :n] = forced.states[s][:n].to(dev, dtype)
        next_ids[b, :n] = ids[1:]
        labels[b, :n] = argmax[1:]
        valid[b, :n] = True
        if progress:
            progress(b + 1, B)
    return Corpus(candidates, states, next_ids, labels, valid, sum(len(s) for s in sequences))


def merge_corpora(a: Corpus, b: Corpus) -> Corpus:
    """``a``'s cases then ``b``'s (same candidates), right-padded to the longer of the two."""
    if a.candidates != b.candidates:
        raise ValueError("corpora of different candidate states")
    T = max(a.next_ids.shape[1], b.next_ids.shape[1])

    def pad(x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == T:
            return x
        return torch.cat([x, x.new_zeros(x.shape[0], T - x.shape[1], *x.shape[2:])], 1)

    cat = lambda x, y: torch.cat([pad(x), pad(y)], 0)  # noqa: E731
    return Corpus(a.candidates, [cat(x, y) for x, y in zip(a.states, b.states)], cat(a.next_ids, b.next_ids),
                  cat(a.labels, b.labels), cat(a.valid, b.valid), a.tokens + b.tokens)


@dataclass(frozen=True)
class Score:
    """Per scored token (draft-vocabulary targets only; with later training-time-test steps, one entry per
    position and step): top-1 agreement and log-probability."""

    hit: torch.Tensor  # [M] float 0/1, on the CPU
    logprob: torch.Tensor  # [M] float
    step: torch.Tensor | None = None  # [M] the training-time-test step of each entry (None: all step 0)

    @property
    def top1(self) -> float:
        """Step-0 top-1 agreement (the first draft token's, what the thresholds and ``accept-rate`` read)."""
        return self.top1_at(0)

    def top1_at(self, k: int) -> float:
        h = self.hit if self.step is None else self.hit[self.step == k]
        return float(h.mean()) if h.numel() else 0.0

    def mean_logprob_at(self, k: int) -> float:
        lp = self.logprob if self.step is None else self.logprob[self.step == k]
        return float(lp.mean()) if lp.numel() else float("-inf")

    @property
    def mean_logprob(self) -> float:
        return float(self.logprob.mean()) if self.logprob.numel() else float("-inf")


class Scorer:
    """Scores wirings (tuples of indices into ``corpus.candidates``) for one draft, caching each result."""

    def __init__(self, draft: Eagle3Draft, corpus: Corpus, chunk_tokens: int = 4096, steps: int = 1,
                 shared: "Scorer | None" = None):
        """``steps``: training-time-test steps scored per position (1: the first draft token only);
        ``shared``: a scorer of the same draft and corpus whose per-slot fc products are reused."""
        self.draft, self.corpus = draft, corpus
        self.steps = max(1, int(steps))
        a = draft.arch
        self.n, self.Ht = a.num_aux, a.target_hidden_size
        w = draft.fc.weight  # [H, n*H_t]
        self.dtype, self.dev = w.dtype, w.device
        # the runtime (SGLang) never applies an EAGLE-3 fc then; a DFlash draft's fc always runs (``fc_always``)
        self.skip_fc = self.n * self.Ht == a.hidden_size and not getattr(draft, "fc_always", False)
        self.linear = not self.skip_fc and not (draft.input_norm is not None and draft.fc_norm is not None)
        V = draft.embed.shape[0]
        hot = draft.hot_ids.to(self.dev)
        t2d = torch.full((max(V, int(hot.max()) + 1),), -1, dtype=torch.long, device=self.dev)
        t2d[hot] = torch.arange(hot.shape[0], device=self.dev)
        labels = corpus.labels.to(self.dev)
        self.label_d = t2d[labels.clamp(max=t2d.shape[0] - 1)]  # [B, T] draft index or -1
        self.mask = corpus.valid.to(self.dev) & (self.label_d >= 0)  # [B, T]
        # step k at t is scored on the label of t + k: masks and labels shifted by k (padding past the end)
        self.masks = [self._shift(self.mask, k, False) for k in range(self.steps)]  # per step [B, T]
        self.labels = [self._shift(self.label_d, k, -1) for k in range(self.steps)]
        self.teacher = torch.cat([corpus.next_ids.to(self.dev),  # [B, T + steps - 1]: step k reads x[t+1+k]
                                  corpus.next_ids.new_zeros(corpus.next_ids.shape[0], self.steps - 1).to(self.dev)], 1)
        self.scored, self.coverage = int(self.mask.sum()), float(self.mask.sum() / corpus.valid.sum().clamp(min=1))
        self.batch = max(1, chunk_tokens // max(1, corpus.next_ids.shape[1]))  # cases per draft forward
        seq, pos, step = [], [], []  # in the order _run concatenates: chunk, step, position
        B = corpus.next_ids.shape[0]
        for b0 in range(0, B, self.batch):
            for k, m in enumerate(self.masks):
                nz = m[b0:b0 + self.batch].nonzero().cpu()
                seq.append(nz[:, 0] + b0)
                pos.append(nz[:, 1] + k)
                step.append(torch.full((nz.shape[0],), k, dtype=torch.long))
        self.step = torch.cat(step)  # [M]
        # [M]: each scored entry's unit (its sequence; every step of a sequence is in the same unit)
        self.units = units_of(torch.cat(seq), torch.cat(pos))
        self.cache: dict[tuple[int, ...], Score] = {}
        self.evaluations = 0
        self._products: list[list[torch.Tensor]] | None = None
        self._sq: list[torch.Tensor] | None = None
        if shared is not None and shared.draft is draft and shared.corpus is corpus:
            self._products, self._sq = shared._products, shared._sq
        elif self.linear:
            self._precompute()

    @torch.inference_mode()
    def _precompute(self) -> None:
        """``products[i][j]`` = slot i's fc block applied to candidate j (after fc_norm / the input-norm
        weight): [B, T, H]; ``sq[j]`` = per-token squared norm of candidate j (for norm_before_fc)."""
        d, Ht = self.draft, self.Ht
        W = d.fc.weight  # [H, n*H_t]
        self._products = []
        for i in range(self.n):
            Wi = W[:, i * Ht:(i + 1) * Ht]
            row = []
            for s in self.corpus.states:
                x = s.to(self.dev, self.dtype)
                if d.input_norm is not None:
                    x = x * d.input_norm.weight[i * Ht:(i + 1) * Ht].to(self.dtype)
                if d.fc_norm is not None:
                    x = d.fc_norm[i](x)
                row.append(x @ Wi.T)
            self._products.append(row)
        if d.input_norm is not None:
            self._sq = [s.to(self.dev, torch.float32).pow(2).sum(-1) for s in self.corpus.states]  # [B, T]

    def _shuffle_index(self) -> torch.Tensor:
        """[B, T]: for each sequence, a fixed permutation of its own positions (padding stays in place)."""
        if getattr(self, "_perm", None) is None:
            g = torch.Generator().manual_seed(0)
            valid = self.corpus.valid.cpu()
            B, T = valid.shape
            idx = torch.arange(T).repeat(B, 1)
            for b in range(B):
                n = int(valid[b].sum())
                idx[b, :n] = torch.randperm(n, generator=g)
            self._perm = idx.to(self.dev)
        return self._perm

    @staticmethod
    def _shift(x: torch.Tensor, k: int, fill) -> torch.Tensor:
        """``x[:, t + k]`` at t ([B, T]), ``fill`` past the end."""
        if k == 0:
            return x
        return torch.cat([x[:, k:], torch.full_like(x[:, :k], fill)], dim=1)

    @staticmethod
    def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return x.gather(1, idx[..., None].expand(-1, -1, x.shape[-1])) if x.dim() == 3 else x.gather(1, idx)

    def _projected(self, wiring: tuple[int, ...], rows: slice, shuffled: int | None = None) -> torch.Tensor:
        """fc's output for ``wiring``; ``shuffled``: that slot is fed its state from other positions of the same
        sequence (same statistics, no information about the token at hand)."""
        d = self.draft
        perm = self._shuffle_index()[rows] if shuffled is not None else None
        pick = lambda x, i: self._gather(x, perm) if i == shuffled else x  # noqa: E731
        if not self.linear:
            cat = torch.cat([pick(self.corpus.states[j][rows].to(self.dev, self.dtype), i)
                             for i, j in enumerate(wiring)], dim=-1)
            return d.project(cat)
        h = sum(pick(self._products[i][j][rows], i) for i, j in enumerate(wiring))  # [b, T, H]
        if d.input_norm is not None:
            ms = sum(pick(self._sq[j][rows], i) for i, j in enumerate(wiring)) / (self.n * self.Ht)  # [b, T]
            h = h * torch.rsqrt(ms + d.input_norm.eps).to(h.dtype)[..., None]
        if d.fc.bias is not None:
            h = h + d.fc.bias
        return h

    def _masked_logits(self, rows: slice, hidden: torch.Tensor | None) -> torch.Tensor:
        """The draft's step-0 logits at the scored positions of cases ``rows`` (row-major order) [M, V_d]."""
        c = self.corpus
        pos = torch.arange(c.next_ids.shape[1], device=self.dev)
        out = self.draft(c.next_ids[rows].to(self.dev), hidden, pos, projected=True)
        return out.logits[self.mask[rows]]

    @torch.inference_mode()
    def _run(self, projected_of: Callable[[slice], torch.Tensor]) -> Score:
        d, c = self.draft, self.corpus
        B = c.next_ids.shape[0]
        hits, lps = [], []
        for b0 in range(0, B, self.batch):
            rows = slice(b0, min(B, b0 + self.batch))
            if self.steps == 1:  # the draft's step-0 logits at the scored positions (a block draft: its own forward)
                logp = F.log_softmax(self._masked_logits(rows, projected_of(rows)).float(), dim=-1)  # [M, V_d]
                lab = self.label_d[rows][self.mask[rows]]
                lps.append(logp.gather(-1, lab[:, None])[:, 0])
                hits.append((logp.argmax(-1) == lab).float())
                continue
            from ..runtime.rollout import rollout

            per_step = rollout(d, c.next_ids[rows].to(self.dev), projected_of(rows), self.steps,
                               teacher=self.teacher[rows], projected=True).logits
            for k, logits in enumerate(per_step):
                logp = F.log_softmax(logits.float(), dim=-1)  # [b, T, V_d]
                m = self.masks[k][rows]
                lab = self.labels[k][rows].clamp(min=0)
                lps.append(logp.gather(-1, lab[..., None])[..., 0][m])
                hits.append((logp.argmax(-1) == lab)[m].float())
        self.evaluations += 1
        return Score(torch.cat(hits).cpu(), torch.cat(lps).cpu(), self.step if self.steps > 1 else None)

    def score(self, wiring: tuple[int, ...]) -> Score:
        wiring = tuple(wiring)
        if wiring not in self.cache:
            self.cache[wiring] = self._run(lambda rows: self._projected(wiring, rows))
        return self.cache[wiring]

    def shuffled(self, wiring: tuple[int, ...], slot: int) -> Score:
        """``wiring`` with slot ``slot`` fed its state shuffled over the positions of each sequence: what the
        draft makes of that slot's statistics alone, without the information it carries about the token."""
        key = ("shuffled", slot, tuple(wiring))
        if key not in self.cache:
            self.cache[key] = self._run(lambda rows: self._projected(tuple(wiring), rows, shuffled=slot))
        return self.cache[key]

    def baseline(self) -> Score:
        """The draft given no target information (fc output = its bias, or zeros): what the token
        embedding alone predicts. A wiring that does not beat it carries nothing the draft can use."""
        H = self.draft.arch.hidden_size
        B, T = self.corpus.next_ids.shape

        def zeros(rows: slice) -> torch.Tensor:
            z = torch.zeros(len(range(*rows.indices(B))), T, H, dtype=self.dtype, device=self.dev)
            return z + self.draft.fc.bias if self.draft.fc.bias is not None else z

        return self._run(zeros)


class BlockScorer(Scorer):
    """The same scoring for a DFlash draft (:class:`eagle_audit.runtime.block.DFlashDraft`), position for
    position: at position t, the block anchored at t+1 (its tokens ``[x[t+1], mask, ...]``, its context the
    wiring's states at positions 0..t, as at inference after the target verified x[t+1]) and the draft's
    first drafted token, scored on the target's next token after x[t+1] (``labels[t]``), as the EAGLE-3 step 0
    is. The draft's vocabulary is the target's (its head is the target's lm_head), so coverage is 1.

    Assumption, named: only the block's first drafted token is scored. The later ones read the same context;
    their labels would be the target's own continuation from the anchor, which teacher forcing on the prompt
    text does not give (the greedy continuation gives it only after the prompt).

    ``fc`` (no bias, no norm before it) is linear in the slots, so the per-slot products are computed once as
    for EAGLE-3; ``hidden_norm`` and the layers run per wiring. The baseline (fed no target information) is the
    block with no context at all.

    The ``uninformed`` guard's null differs in one respect: a block attends to *every* context position, so the
    EAGLE-3 null (the slot's states permuted over the positions of their text) would put states of positions
    after the anchor into its context: the future it predicts (B2 of x[t+2], the label itself, among them), which
    makes the shuffled slot score better than "no information" and the guard call used slots unused. Here each
    position t >= 1 takes the slot's state of a random *earlier* position of the same text (same text, same
    statistics, never its own state, never a later one); position 0 keeps its own."""

    def __init__(self, draft, corpus: Corpus, chunk_tokens: int = 1024):
        super().__init__(draft, corpus, chunk_tokens)

    def _shuffle_index(self) -> torch.Tensor:
        """[B, T]: for each position t >= 1 of a case, a fixed random position in 0..t-1 of the same case."""
        if getattr(self, "_perm", None) is None:
            g = torch.Generator().manual_seed(0)
            B, T = self.corpus.valid.shape
            t = torch.arange(T).repeat(B, 1)
            earlier = (torch.rand(B, T, generator=g) * t).floor().long()  # uniform in 0..t-1 (0 at t = 0)
            self._perm = earlier.to(self.dev)
        return self._perm

    def _masked_logits(self, rows: slice, hidden: torch.Tensor | None) -> torch.Tensor:
        """The head (the target's lm_head, the full vocabulary) runs on the scored positions only."""
        ids = self.corpus.next_ids[rows].to(self.dev)
        m = self.mask[rows]
        first = self.draft.first_hidden(ids, hidden)  # [b, T, H]
        return self.draft.logits(first[m], ids[m])  # the anchors: a DSpark Markov head's previous token

    def baseline(self) -> Score:
        return self._run(lambda rows: None)


@dataclass(frozen=True)
class Scoring:
    """The fingerprint floor's entry per draft family (:class:`eagle_audit.kinds.FamilyRegistry` ``SCORERS``)."""

    #: (draft network, corpus) -> its scorer
    scorer: Callable[..., Scorer]
    #: the judgement may read the training-time test's later steps (:func:`~.infer.later_steps`: EAGLE-3 drafts are
    #: unrolled on their own predictions in training); False: the first drafted token only
    later_steps: bool
    #: (kind, flags as trained) -> the run's note on how the draft is scored
    note: Callable[..., str]


SCORERS = FamilyRegistry("fingerprint", "scorer")
SCORERS.register("eagle3", Scoring(Scorer, True, lambda kind, flags: f"draft flags as trained: {flags.to_json()}"))
SCORERS.register("block", Scoring(BlockScorer, False, lambda kind, flags: (
    f"{kind.name} draft: its block forward (eagle_audit/runtime/block.py), the block's first drafted token scored")))


def scoring(draft) -> Scoring:
    """The fingerprint entry of a draft network's family (or of a :class:`~eagle_audit.kinds.DraftKind`)."""
    return SCORERS.of(draft.family)


def scorer_for(draft, corpus: Corpus) -> Scorer:
    """The one choice of scorer, by the draft network's family: the EAGLE-3 step-0 scorer, a block draft's own
    forward (:class:`BlockScorer`), or a registered family's."""
    return scoring(draft).scorer(draft, corpus)
