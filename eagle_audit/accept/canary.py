"""Train a one-layer EAGLE-3 canary draft on text the target generates itself, under a known wiring.

1. Data (:func:`make_data`, asked of the state source: ``StateSource.decode``): the target's greedy
   continuations of the prompts (batched, left-padded, KV-cached decode; cut at EOS), plus optional seeded sampled continuations; the trained boundaries
   and the target's final-norm output are captured on the way at every position, prompt included (no
   separate teacher pass). The teacher distribution at a position is the target's head over the draft
   vocabulary applied to that final-norm output.
2. Draft vocabulary: the ``draft_vocab`` most frequent target ids of that text (ties: lower id), with
   ``d2t`` / ``t2d`` as SpecForge writes them. ``lm_head`` (frozen unless ``head_lr_scale`` > 0) and the
   final ``norm`` start from the target's; with ``init="target"`` the midlayer starts from a target
   decoder layer and ``fc`` passes the deepest trained state through (:func:`_init_model`).
3. EAGLE-3 training-time test: ``ttt_steps`` unrolled steps per position, each feeding the draft its
   own previous hidden and the next text token (:func:`~eagle_audit.runtime.rollout.rollout`); loss =
   cross-entropy to the target distribution at each step (= forward KL up to a constant), step k
   weighted 0.8**k. AdamW (weight decay on matrices), warm-up + cosine schedule fitted to the time
   budget after the first epoch, gradient clipping, optional early stopping on held-out sequences.
   Seeded; ``device`` / ``dtype`` run generation and training on a GPU (bf16 autocast, float32 master
   weights).
4. Written in the SGLang layout (``draft.write``): the trained boundaries as nested
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

from ..resolution import CANARY_KEY
from ..draft.write import draft_config, random_weights, vocab_map, write_canary
from ..source import as_source
from ..states import State
from ..runtime.rollout import rollout
from ..runtime.eagle3 import DraftArch, DraftFlags, Eagle3Draft, build_draft



@dataclass(frozen=True)
class CanaryOptions:
    boundaries: tuple[int, ...]
    final_norm: bool = False  # boundary N stands for the post-final-norm state (BN+norm), not the pre-norm one
    views: tuple[str, ...] = ()  # hyper-connection targets: one view per boundary ("" the mean, "s0", "mix")
    ttt_steps: int = 3
    epochs: int = 30
    lr: float = 2e-3
    draft_vocab: int = 4096
    max_new_tokens: int = 256
    batch_size: int = 1  # sequences per optimizer step (CPU: more, smaller steps train faster per second)
    seed: int = 0
    time_budget_s: float | None = None  # training seconds: the cosine schedule is fitted to it after epoch 1
    total_budget_s: float | None = None  # data + training seconds (training gets what data leaves)
    init: str = "target"  # "target": layer, head and norm from the target (see _init_model); "random"
    init_layer: int = -1  # the target decoder layer the midlayer starts from (init "target")
    head_lr_scale: float = 0.0  # lm_head learning rate = lr * this (0: frozen at the target's rows)
    weight_decay: float = 0.01
    gen_batch: int = 16  # prompts per batched greedy generation
    sampled_copies: int = 0  # extra continuations per prompt, sampled at ``temperature`` (more diverse text)
    temperature: float = 0.8
    val_fraction: float = 0.0  # sequences held out for early stopping (best validation loss is kept)
    device: str | None = None  # training device (None: the target's); generation runs on the target's
    dtype: str = "float32"  # "bfloat16": bf16 autocast on CUDA (float32 master weights)
    intermediate_size: int | None = None  # draft MLP width (None: the target's); smaller = a smaller checkpoint


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
    epochs_run: int = 0
    val_loss: float | None = None  # best validation loss (val_fraction > 0)
    device: str = "cpu"

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Sample:
    """One training sequence: ids (prompt + greedy continuation), the aux states at each position
    [L, n*H] and the target's final-norm output [L, H] (row L-1 is zeros: never used)."""

    ids: list[int]
    aux: torch.Tensor
    final: torch.Tensor


def generate_data(target, prompts: Sequence[Sequence[int]], states: tuple[State, ...], max_new: int,
                  batch: int = 16, store_device: str = "cpu", log: Callable[[str], None] | None = None,
                  temperature: float = 0.0, seed: int = 0) -> list[Sample]:
    """The target's greedy continuations of ``prompts`` (or, with ``temperature`` > 0, seeded sampled
    ones), with the ``states`` and the final-norm output of every position but the last, asked of the
    state source (:meth:`~eagle_audit.source.StateSource.decode`: batched, left padding, KV cache; cut at
    EOS), so no teacher pass is needed. Padding changes rounding, so this is for training data only (the
    simulation generates one prompt at a time).

    The teacher distribution is later ``softmax(final @ lm_head[draft vocab].T)``: exact for targets
    whose logits are the head applied to the final-norm output (Llama family; no soft-capping). The
    final-norm output is the state ``BN+norm`` (:mod:`eagle_audit.capture`: the final norm after the last
    layer)."""
    src = as_source(target)
    final = State(src.info.num_layers, normed=True)
    wanted = tuple(dict.fromkeys(states + (final,)))
    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if log:
            log(f"generated {done}/{total} prompts ({time.perf_counter() - t0:.0f}s)")

    out = []
    for d in src.decode(prompts, wanted, max_new, batch=batch, temperature=temperature, seed=seed,
                        out_device=store_device, progress=progress):
        aux = torch.cat([d.states[s] for s in states], dim=-1)  # [L - 1, n*H]
        fin = d.states[final]  # [L - 1, H]
        out.append(Sample(list(d.ids), torch.cat([aux, aux.new_zeros(1, aux.shape[-1])]),
                          torch.cat([fin, fin.new_zeros(1, fin.shape[-1])])))
    return out


def choose_vocab(seqs: Sequence[Sequence[int]], k: int) -> torch.Tensor:
    """The ``k`` most frequent ids of ``seqs`` (ties: lower id first), sorted: [draft_vocab]."""
    counts: dict[int, int] = {}
    for s in seqs:
        for t in s:
            counts[t] = counts.get(t, 0) + 1
    top = sorted(counts, key=lambda t: (-counts[t], t))[:k]
    return torch.tensor(sorted(top))


def _batches(data: list[Sample], size: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Length-sorted batches: (ids [batch, L], aux [batch, L, n*H], final [batch, L, H], lens [batch])."""
    order = sorted(range(len(data)), key=lambda i: (len(data[i].ids), i))
    out = []
    for b in range(0, len(order), size):
        chunk = [data[i] for i in order[b:b + size]]
        L = max(len(s.ids) for s in chunk)
        ids = torch.tensor([s.ids + [0] * (L - len(s.ids)) for s in chunk])
        aux = torch.stack([F.pad(s.aux, (0, 0, 0, L - s.aux.shape[0])) for s in chunk])
        fin = torch.stack([F.pad(s.final, (0, 0, 0, L - s.final.shape[0])) for s in chunk])
        out.append((ids, aux, fin, torch.tensor([len(s.ids) for s in chunk])))
    return out


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


def _split(n: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, validation) sequence indices; a seeded draw of ``round(n * fraction)`` for validation."""
    k = min(n - 1, max(1, round(n * fraction))) if fraction > 0 and n > 1 else 0
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1)).tolist()
    return sorted(perm[k:]), sorted(perm[:k])


def make_data(target, prompts: Sequence[Sequence[int]], opts: CanaryOptions, states: tuple[State, ...],
              log: Callable[[str], None] | None = None) -> list[Sample]:
    """The training text: greedy continuations of ``prompts``, plus ``opts.sampled_copies`` sampled
    sets, with ``states`` captured (one pass can serve several canaries: :func:`train_canary` ``data``)."""
    log = log or (lambda m: None)
    dev = torch.device(opts.device or target.input_device)
    store = str(dev) if dev.type == "cuda" else "cpu"
    log(f"generating greedy continuations of {len(prompts)} prompts")
    data = generate_data(target, prompts, states, opts.max_new_tokens, opts.gen_batch, store, log)
    for c in range(opts.sampled_copies):
        log(f"sampling continuation set {c + 1}/{opts.sampled_copies} (temperature {opts.temperature})")
        data += generate_data(target, prompts, states, opts.max_new_tokens, opts.gen_batch, store, log,
                              opts.temperature, opts.seed + 1 + c)
    return data


def train_canary(target, prompts: Sequence[Sequence[int]], opts: CanaryOptions, out_dir: str | Path,
                 log: Callable[[str], None] | None = None,
                 data: tuple[list[Sample], tuple[State, ...]] | None = None) -> CanaryResult:
    """Train and write a canary draft for ``target`` on its greedy continuations of ``prompts``
    (or on ``data`` = (samples from :func:`make_data`, the states their aux holds, in order))."""
    log = log or (lambda m: None)
    torch.manual_seed(opts.seed)
    n_layers = target.info.num_layers
    if opts.final_norm and n_layers not in opts.boundaries:
        raise ValueError(f"final_norm: the boundaries must include N = {n_layers} (the state that is normed)")
    views = opts.views or ("",) * len(opts.boundaries)
    if len(views) != len(opts.boundaries):
        raise ValueError(f"views: {len(views)} given for {len(opts.boundaries)} boundaries")
    states = tuple(State(b, normed=opts.final_norm and b == n_layers, stream=v) for b, v in zip(opts.boundaries, views))
    dev = torch.device(opts.device or target.input_device)
    t0 = time.perf_counter()
    if data is None:
        data = make_data(target, prompts, opts, states, log)
    else:
        samples, have = data
        H = target.info.hidden_size
        cols = torch.cat([torch.arange(have.index(s) * H, (have.index(s) + 1) * H) for s in states])
        data = [Sample(d.ids, d.aux[:, cols.to(d.aux.device)], d.final) for d in samples]
    seqs = [d.ids for d in data]
    used = choose_vocab(seqs, opts.draft_vocab)
    arch = canary_arch(target, int(used.shape[0]))
    arch = DraftArch(**{**arch.__dict__, "num_aux": len(states),
                        "intermediate_size": opts.intermediate_size or arch.intermediate_size})
    tr_idx, val_idx = _split(len(data), opts.val_fraction, opts.seed)
    train_b = _batches([data[i] for i in tr_idx], opts.batch_size)
    val_b = _batches([data[i] for i in val_idx], opts.batch_size)
    del data
    teacher_head = target.model.get_output_embeddings().weight.detach()[used.to(target.input_device)].to(dev, torch.float32)
    data_seconds = time.perf_counter() - t0
    n_tokens = sum(len(s) for s in seqs)
    log(f"{len(seqs)} sequences ({len(val_idx)} held out for validation), {n_tokens} tokens, draft vocab "
        f"{arch.draft_vocab_size} ({data_seconds:.0f}s)")

    model = _init_model(target, arch, used, opts).to(dev)
    model.embed = model.embed.to(dev)
    head_params = list(model.lm_head.parameters())
    if opts.head_lr_scale == 0:
        for p in head_params:
            p.requires_grad_(False)
    hp = {id(p) for p in head_params}
    body = [p for p in model.parameters() if p.requires_grad and id(p) not in hp]
    groups = [{"params": [p for p in body if p.dim() >= 2], "weight_decay": opts.weight_decay},
              {"params": [p for p in body if p.dim() < 2], "weight_decay": 0.0}]
    if opts.head_lr_scale > 0:
        groups.append({"params": head_params, "weight_decay": opts.weight_decay, "lr": opts.lr * opts.head_lr_scale})
    params = [p for g in groups for p in g["params"]]
    opt = torch.optim.AdamW(groups, lr=opts.lr)
    total = max(1, opts.epochs * len(train_b))
    plan = [total]  # the schedule length; fitted to the time budget after the first epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, plan[0] // 20)) * 0.5 * (1 + math.cos(math.pi * min(s, plan[0]) / plan[0])))
    budget = opts.time_budget_s
    if opts.total_budget_s is not None:
        left = opts.total_budget_s - data_seconds - 5.0
        budget = left if budget is None else min(budget, left)
    amp = opts.dtype in ("bfloat16", "bf16") and dev.type == "cuda"

    def loss_of(batch):
        ids, aux, fin, lens = (t.to(dev, non_blocking=True) for t in batch)
        with torch.no_grad():
            probs = torch.softmax(fin @ teacher_head.T, dim=-1)  # [batch, L, draft_vocab]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            return _ttt_loss(model, ids, aux, probs, lens, opts.ttt_steps)

    g = torch.Generator().manual_seed(opts.seed)
    t1, step, loss_v, acc, epoch = time.perf_counter(), 0, float("nan"), 0.0, 0
    best, best_state = None, None
    t_prev = 0.0
    for epoch in range(1, opts.epochs + 1):
        model.train()
        hits = count = 0
        for bi in torch.randperm(len(train_b), generator=g).tolist():
            loss, h, c = loss_of(train_b[bi])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            loss_v, hits, count = float(loss.detach()), hits + h, count + c
            if budget is not None and time.perf_counter() - t1 > 1.15 * budget + 5:
                break  # hard stop: the fitted schedule overran
        acc = hits / max(count, 1)
        if epoch <= 2 and budget is not None:  # refitted after epoch 2: epoch 1 carries warm-up (CUDA)
            spent = time.perf_counter() - t1
            fit = max(epoch, min(opts.epochs, epoch + int((budget - spent) / max(spent - t_prev, 1e-6))))
            plan[0] = max(step + 1, fit * len(train_b))
            log(f"time budget {budget:.0f}s: schedule fitted to {fit} epoch(s)")
        t_prev = time.perf_counter() - t1
        msg = f"epoch {epoch}/{opts.epochs}: loss {loss_v:.3f}, step-0 accuracy {acc:.3f}"
        if val_b:
            model.eval()
            with torch.no_grad():
                vals = [loss_of(b) for b in val_b]
            vl = sum(float(v[0]) for v in vals) / len(vals)
            va = sum(v[1] for v in vals) / max(1, sum(v[2] for v in vals))
            msg += f"; validation loss {vl:.3f}, accuracy {va:.3f}"
            if best is None or vl < best:
                best, best_state = vl, {k: v.detach().clone() for k, v in model.state_dict().items()}
        log(msg)
        if step >= plan[0] or (budget is not None and time.perf_counter() - t1 > 1.15 * budget + 5):
            if step < total:
                log(f"time budget reached after epoch {epoch}")
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    train_seconds = time.perf_counter() - t1
    model.eval()
    record = {"trained_boundaries": list(opts.boundaries), "trained_states": [s.label() for s in states],
              "target": target.info.name,
              "target_num_layers": target.info.num_layers, "ttt_steps": opts.ttt_steps, "epochs": opts.epochs,
              "epochs_run": epoch, "lr": opts.lr, "seed": opts.seed, "sequences": len(seqs), "tokens": n_tokens,
              "max_new_tokens": opts.max_new_tokens, "init": opts.init, "init_layer": opts.init_layer,
              "head_lr_scale": opts.head_lr_scale, "weight_decay": opts.weight_decay,
              "validation_sequences": len(val_idx), "sampled_copies": opts.sampled_copies, "device": str(dev), "dtype": opts.dtype,
              "loss": "cross-entropy to the target distribution over the draft vocab, 0.8**k per TTT step",
              "sglang_ids_rule": "nested id = boundary - 1 (SGLang adds 1)"}
    sd = _sglang_names({k: v for k, v in model.state_dict().items()})
    sd.update(vocab_map(used, arch.vocab_size))
    write_canary(out_dir, _config(arch, opts.boundaries, record), sd)
    return CanaryResult(str(out_dir), opts.boundaries, len(seqs), n_tokens, arch.draft_vocab_size, data_seconds,
                        train_seconds, step, loss_v, acc, epoch, best, str(dev))


def _init_model(target, arch: DraftArch, used: torch.Tensor, opts: CanaryOptions) -> Eagle3Draft:
    """Random (seeded) weights; ``lm_head`` = the target's head rows of the draft vocab, ``norm`` = the
    target's final norm. With ``init="target"`` the midlayer also starts from target decoder layer
    ``init_layer``: its attention weights on the hidden half of q/k/v (the embedding half stays random),
    ``o_proj``, the MLP and ``post_attention_layernorm`` copied, ``hidden_norm`` = its input norm; ``fc``
    = identity on the slot of the deepest trained boundary, zeros elsewhere, so the draft starts as
    that target layer applied to the deepest state."""
    cfg = _config(arch, tuple(range(arch.num_aux)), {})
    sd = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
          for k, v in random_weights(cfg, arch.num_aux, seed=opts.seed, with_d2t=False).items()}
    tm = target.model
    head = tm.get_output_embeddings().weight.detach().float().cpu()
    sd["lm_head.weight"] = head[used].clone()
    norm = getattr(target.stack.final_norm, "weight", None)
    if norm is not None:
        sd["norm.weight"] = norm.detach().float().cpu().clone()
    if opts.init == "target":
        H, Ht = arch.hidden_size, arch.target_hidden_size
        tl = {k: v.detach().float().cpu() for k, v in target.stack.layers[opts.init_layer].state_dict().items()}
        for name in ("q_proj", "k_proj", "v_proj"):
            src, dst = tl.get(f"self_attn.{name}.weight"), sd[f"layers.0.self_attn.{name}.weight"]
            if src is not None and src.shape == (dst.shape[0], H):
                dst[:, H:] = src
        keep = _mlp_units(tl, arch.intermediate_size)
        if keep is not None:  # a narrower MLP starts from the target MLP's strongest units
            for name, dim in (("mlp.gate_proj.weight", 0), ("mlp.up_proj.weight", 0), ("mlp.down_proj.weight", 1)):
                tl[name] = tl[name].index_select(dim, keep)
        for name in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                     "post_attention_layernorm", "input_layernorm:hidden_norm"):
            src_name, _, dst_name = name.partition(":")
            src, key = tl.get(src_name + ".weight"), f"layers.0.{dst_name or src_name}.weight"
            if src is not None and src.shape == sd[key].shape:
                sd[key] = src.clone()
        if Ht == H:
            fc = torch.zeros_like(sd["fc.weight"])
            j = max(range(len(opts.boundaries)), key=lambda i: opts.boundaries[i])
            fc[:, j * Ht:(j + 1) * Ht] = torch.eye(H)
            sd["fc.weight"] = fc
    sd.update(vocab_map(used, arch.vocab_size))
    embed = tm.get_input_embeddings().weight.detach().float()
    # trained as every trainer runs it: fc on the target's states even when their width is the draft's
    return build_draft(arch, DraftFlags(fc_skip_at_hidden_width=False), sd, embed, None, "canary")


def _mlp_units(layer: dict[str, torch.Tensor], width: int) -> torch.Tensor | None:
    """The ``width`` intermediate units of a target MLP with the largest |gate row| * |up row| * |down
    column| (sorted), or None when the MLP is not wider than ``width`` or not a gated MLP."""
    g, u, d = (layer.get(f"mlp.{n}_proj.weight") for n in ("gate", "up", "down"))
    if g is None or u is None or d is None or g.shape[0] <= width:
        return None
    score = g.norm(dim=1) * u.norm(dim=1) * d.norm(dim=0)  # [intermediate]
    return score.topk(width).indices.sort().values


def _ttt_loss(model: Eagle3Draft, ids, aux, probs, lens, steps: int):
    """Training-time test loss of one batch: ids [batch, L], aux [batch, L, n*H], probs [batch, L, V_d]."""
    B, L = ids.shape
    T = L - 1
    teacher = torch.cat([ids[:, 1:], ids.new_zeros(B, steps - 1)], dim=1)  # [batch, T + steps - 1]
    ro = rollout(model, ids[:, 1:], aux[:, :T], steps, teacher=teacher)
    t = torch.arange(T, device=ids.device)
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
