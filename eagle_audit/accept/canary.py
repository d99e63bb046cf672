"""Train a one-layer EAGLE-3 canary draft on text the target generates itself, under a known wiring.

1. Data: the target's greedy continuations of the prompts (batched, left-padded generation; cut at
   EOS), then one teacher-forced pass per batch capturing the trained boundaries and the target's
   next-token distribution restricted to the draft vocabulary.
2. Draft vocabulary: the ``draft_vocab`` most frequent target ids of that text (ties: lower id), with
   ``d2t`` / ``t2d`` as SpecForge writes them. ``lm_head`` and the final ``norm`` start from the
   target's; everything else is random (seeded).
3. EAGLE-3 training-time test: ``ttt_steps`` unrolled steps per position, each feeding the draft its
   own previous hidden and the next text token (:func:`~eagle_audit.accept.rollout.rollout`); loss =
   cross-entropy to the target distribution at each step (= forward KL up to a constant), step k
   weighted 0.8**k.
4. Written in the SGLang layout (``draft_write``): the trained boundaries as nested
   ``eagle_config.eagle_aux_hidden_state_layer_ids`` under SGLang's +1 rule (boundary b -> id b-1, so
   boundary 0 -> id -1, which SGLang 0.5.23 serves as the embedding), and the true training wiring
   under ``"eagle_audit_canary"``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..draft_write import draft_config, random_weights, vocab_map, write_draft
from ..states import State
from .rollout import rollout
from .runtime import DraftArch, DraftFlags, Eagle3Draft, build_draft
from .targetrun import eos_ids

CANARY_KEY = "eagle_audit_canary"


@dataclass(frozen=True)
class CanaryOptions:
    boundaries: tuple[int, ...]
    ttt_steps: int = 3
    epochs: int = 30
    lr: float = 2e-3
    draft_vocab: int = 4096
    max_new_tokens: int = 256
    batch_size: int = 4
    seed: int = 0
    time_budget_s: float | None = None  # stop training early (the schedule is cut) past this


@dataclass(frozen=True)
class CanaryResult:
    out_dir: str
    boundaries: tuple[int, ...]
    sequences: int
    tokens: int
    draft_vocab: int
    data_seconds: float
    train_seconds: float
    optimizer_steps: int
    final_loss: float
    first_token_accuracy: float  # step-0 argmax == target argmax on the training text, last epoch

    def to_json(self) -> dict:
        return dict(self.__dict__)


@torch.inference_mode()
def greedy_batch(target, prompts: Sequence[Sequence[int]], max_new: int, batch: int = 16) -> list[list[int]]:
    """Greedy continuations, batched with left padding (training data only: padding changes rounding,
    so the simulation generates one prompt at a time)."""
    model, dev, eos = target.model, target.input_device, eos_ids(target)
    pad = min(eos) if eos else 0
    out = []
    for i in range(0, len(prompts), batch):
        chunk = [list(p) for p in prompts[i:i + batch]]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=dev)  # [batch, pos]
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=dev)
        gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             pad_token_id=pad, eos_token_id=sorted(eos) or None)
        for row in gen[:, width:].tolist():
            cont = []
            for t in row:
                cont.append(t)
                if t in eos:
                    break
            out.append(cont)
    return out


def choose_vocab(seqs: Sequence[Sequence[int]], k: int) -> torch.Tensor:
    """The ``k`` most frequent ids of ``seqs`` (ties: lower id first), sorted: [draft_vocab]."""
    counts: dict[int, int] = {}
    for s in seqs:
        for t in s:
            counts[t] = counts.get(t, 0) + 1
    top = sorted(counts, key=lambda t: (-counts[t], t))[:k]
    return torch.tensor(sorted(top))


@torch.no_grad()  # not inference_mode: these tensors enter autograd as training targets
def teacher_batch(target, seqs: Sequence[Sequence[int]], states: tuple[State, ...], used: torch.Tensor):
    """Right-padded teacher pass: aux [batch, L, n*H] (float32, cpu) and target probs over the draft
    vocab [batch, L, draft_vocab]."""
    from ..capture import capture

    width = max(len(s) for s in seqs)
    ids = torch.tensor([list(s) + [0] * (width - len(s)) for s in seqs], device=target.input_device)
    with capture(target.stack, states, stop_early=False) as store:
        logits = target.model(input_ids=ids, use_cache=False).logits  # [batch, L, vocab]
    probs = torch.softmax(logits[..., used.to(logits.device)].float(), dim=-1).cpu()
    aux = torch.cat([store[s].float() for s in states], dim=-1).cpu()
    return aux, probs


def canary_arch(target, vocab: int) -> DraftArch:
    tc = target.model.config
    H = target.info.hidden_size
    heads = int(getattr(tc, "num_attention_heads", max(1, H // 64)))
    params = getattr(tc, "rope_parameters", None) or {}
    theta = float(getattr(tc, "rope_theta", None) or (params.get("rope_theta") if isinstance(params, dict) else None)
                  or 10000.0)
    return DraftArch(hidden_size=H, target_hidden_size=H, num_aux=0, num_layers=1, num_heads=heads,
                     num_kv_heads=int(getattr(tc, "num_key_value_heads", heads) or heads),
                     head_dim=int(getattr(tc, "head_dim", None) or H // heads),
                     intermediate_size=int(getattr(tc, "intermediate_size", 4 * H)), eps=1e-5, rope_theta=theta,
                     vocab_size=target.info.vocab_size, draft_vocab_size=vocab)


def _config(arch: DraftArch, boundaries: tuple[int, ...], record: dict) -> dict:
    return draft_config(hidden_size=arch.hidden_size, target_hidden_size=arch.target_hidden_size,
                        num_aux=arch.num_aux, vocab_size=arch.vocab_size, draft_vocab_size=arch.draft_vocab_size,
                        num_heads=arch.num_heads, num_kv_heads=arch.num_kv_heads,
                        intermediate_size=arch.intermediate_size, nested_ids=[b - 1 for b in boundaries],
                        rope_theta=arch.rope_theta, extra={"head_dim": arch.head_dim, CANARY_KEY: record})


def _sglang_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v.detach().float().cpu()
            for k, v in sd.items()}


def train_canary(target, prompts: Sequence[Sequence[int]], opts: CanaryOptions, out_dir: str | Path,
                 log: Callable[[str], None] | None = None) -> CanaryResult:
    """Train and write a canary draft for ``target`` on its greedy continuations of ``prompts``."""
    log = log or (lambda m: None)
    torch.manual_seed(opts.seed)
    states = tuple(State(b) for b in opts.boundaries)
    t0 = time.perf_counter()
    log(f"generating greedy continuations of {len(prompts)} prompts")
    conts = greedy_batch(target, prompts, opts.max_new_tokens)
    seqs = [list(p) + c for p, c in zip(prompts, conts)]
    used = choose_vocab(seqs, opts.draft_vocab)
    arch = canary_arch(target, int(used.shape[0]))
    arch = DraftArch(**{**arch.__dict__, "num_aux": len(states)})
    data = []
    for i in range(0, len(seqs), opts.batch_size):
        chunk = seqs[i:i + opts.batch_size]
        aux, probs = teacher_batch(target, chunk, states, used)
        lens = torch.tensor([len(s) for s in chunk])
        ids = torch.tensor([s + [0] * (aux.shape[1] - len(s)) for s in chunk])  # [batch, L]
        data.append((ids, aux, probs, lens))
    data_seconds = time.perf_counter() - t0
    n_tokens = sum(len(s) for s in seqs)
    log(f"{len(seqs)} sequences, {n_tokens} tokens, draft vocab {arch.draft_vocab_size} ({data_seconds:.0f}s)")

    model = _init_model(target, arch, used, opts.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=opts.lr, weight_decay=0.0)
    total = max(1, opts.epochs * len(data))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, total // 20)) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    g = torch.Generator().manual_seed(opts.seed)
    t1, step, loss_v, acc = time.perf_counter(), 0, float("nan"), 0.0
    model.train()
    for epoch in range(opts.epochs):
        hits = count = 0
        for bi in torch.randperm(len(data), generator=g).tolist():
            loss, h, c = _ttt_loss(model, *data[bi], opts.ttt_steps)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            loss_v, hits, count = float(loss.detach()), hits + h, count + c
        acc = hits / max(count, 1)
        if epoch % 5 == 0 or epoch == opts.epochs - 1:
            log(f"epoch {epoch + 1}/{opts.epochs}: loss {loss_v:.3f}, step-0 accuracy {acc:.3f}")
        if opts.time_budget_s is not None and time.perf_counter() - t1 > opts.time_budget_s:
            log(f"time budget reached after epoch {epoch + 1}")
            break
    train_seconds = time.perf_counter() - t1
    model.eval()
    record = {"trained_boundaries": list(opts.boundaries), "target": target.info.name,
              "target_num_layers": target.info.num_layers, "ttt_steps": opts.ttt_steps, "epochs": opts.epochs,
              "lr": opts.lr, "seed": opts.seed, "sequences": len(seqs), "tokens": n_tokens,
              "max_new_tokens": opts.max_new_tokens, "loss": "cross-entropy to the target distribution over the "
              "draft vocab, 0.8**k per TTT step", "sglang_ids_rule": "nested id = boundary - 1 (SGLang adds 1)"}
    sd = _sglang_names({k: v for k, v in model.state_dict().items()})
    sd.update(vocab_map(used, arch.vocab_size))
    write_draft(out_dir, _config(arch, opts.boundaries, record), sd)
    return CanaryResult(str(out_dir), opts.boundaries, len(seqs), n_tokens, arch.draft_vocab_size, data_seconds,
                        train_seconds, step, loss_v, acc)


def _init_model(target, arch: DraftArch, used: torch.Tensor, seed: int) -> Eagle3Draft:
    cfg = _config(arch, tuple(range(arch.num_aux)), {})
    sd = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
          for k, v in random_weights(cfg, arch.num_aux, seed=seed, with_d2t=False).items()}
    tm = target.model
    head = tm.get_output_embeddings().weight.detach().float().cpu()
    sd["lm_head.weight"] = head[used].clone()
    norm = getattr(target.stack.final_norm, "weight", None)
    if norm is not None:
        sd["norm.weight"] = norm.detach().float().cpu().clone()
    sd.update(vocab_map(used, arch.vocab_size))
    embed = tm.get_input_embeddings().weight.detach().float().cpu()
    return build_draft(arch, DraftFlags(), sd, embed, None, "canary")


def _ttt_loss(model: Eagle3Draft, ids, aux, probs, lens, steps: int):
    """Training-time test loss of one batch: ids [batch, L], aux [batch, L, n*H], probs [batch, L, V_d]."""
    B, L = ids.shape
    T = L - 1
    teacher = torch.cat([ids[:, 1:], ids.new_zeros(B, steps - 1)], dim=1)  # [batch, T + steps - 1]
    ro = rollout(model, ids[:, 1:], aux[:, :T], steps, teacher=teacher)
    t = torch.arange(T)
    loss, hits, count = 0.0, 0, 0
    for k, logits in enumerate(ro.logits):
        valid = (t[None] + 1 + k) <= (lens[:, None] - 2)  # [batch, T]: the predicted token exists
        tgt = probs[:, 1 + k:1 + k + T]  # [batch, <=T, V_d]
        n = tgt.shape[1]
        v = valid[:, :n]
        if not v.any():
            continue
        logq = F.log_softmax(logits[:, :n].float(), dim=-1)
        ce = -(tgt * logq).sum(-1)  # [batch, n]
        loss = loss + (0.8 ** k) * ce[v].mean()
        if k == 0:
            hits += int((logits[:, :n].argmax(-1) == tgt.argmax(-1))[v].sum())
            count += int(v.sum())
    return loss, hits, count
