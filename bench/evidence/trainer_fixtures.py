"""Drafts trained by a real trainer's own training loop, and the fingerprint on them (issue 18, part 3).

Trains SmolLM2-135M-Instruct drafts with speculators 0.9.0 (tests/trainers/real_drafts.py) and SpecForge 0.2.0
(tests/trainers/specforge_drafts.py: its data preparation, ``specforge train`` and ``specforge export``); each
module says exactly what runs from the wheel and what is swapped. Known wirings: each trainer's default ids
and an explicit set (``--wirings``: speculators-default, speculators-4-11-24, specforge-default,
specforge-5-12-21). Then,
for each draft, on held-out prompts of the training kind (chat prompts not trained on, the target's own
chat-templated continuations):

* its step-0 accuracy under the true wiring (the fingerprint's top-1 agreement) and speculators' own
  validation accuracies;
* the fingerprint on the whole held-out set (per slot: the answer, how sure, what would determine it) and the
  claims and findings against the declared wiring (the config the trainer wrote);
* decisions on disjoint groups of ``--group`` prompts: slots exact / ambiguous with the truth / undetermined /
  *wrong* (a named set that misses the truth), false ``TRAINED_WIRING_DIFFERS``, any error finding;
* coverage of the 99% interval on those groups: for the truth against each neighbour state in each slot, the
  share of group intervals that cover the margin measured on all held-out prompts (and, for comparison, the
  8-token moving-block bootstrap it replaced).

Those are the search's own judgement (``infer_wiring`` + ``compare``, on the held-out prompts alone). Each is
also judged by the fingerprint as a user runs it (``as_run``: ``run_fingerprint``, issue 27): the same held-out
prompts (the whole set, then each group) as the search's, a second round's reserve and the confirmation after
them in one prompts file, as ``--max-prompts``, ``--more-prompts`` and ``--confirm-prompts`` take them. Both come
from ``bench/data/heldout_prompts.jsonl`` (written as held-out text: none equal to, or sharing half its content
words with, a prompt of ``bench/data/canary_prompts.jsonl``; checked here to be disjoint from the training and
held-out prompts): its first ``--more-prompts`` (8) are the second round's, the next ``--confirm-prompts`` (8)
the confirmation's, the same for the whole set and every group. Per slot: exact / ambiguous with the truth (how
many states) / undetermined / *wrong* (what the slot names misses the truth), the findings, the fix, and the
simulated accept length of the declared, measured and served wirings on the confirmation's prompts (a fix whose
measured wiring accepts less than the declared one is counted: ``fix_below_declared``).

    python -m bench.evidence.trainer_fixtures --target DIR --device cuda --out results.json     # GPU
    python -m bench.evidence.trainer_fixtures --target DIR --device cuda --evaluate NAME=DRAFT --out r.json  # re-judge
    python -m bench.evidence.trainer_fixtures --target DIR --tiny --out tiny.json                # CPU smoke
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

from bench import _support
from tests.trainers import real_drafts, specforge_drafts

ALL_WIRINGS = {**real_drafts.WIRINGS, **specforge_drafts.WIRINGS}
#: the engine each trainer's drafts are served by (the served side of the claims and the fix)
SERVED_BY = {"speculators": "vllm", "specforge": "sglang"}


def log(m: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)


def block_bootstrap(d: torch.Tensor, block: int = 8, resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The 99% moving-block bootstrap the fingerprint used before (for comparison only)."""
    m = d.numel()
    g = torch.Generator().manual_seed(seed)
    block = max(1, min(block, m))
    starts = torch.randint(0, m - block + 1, (resamples, math.ceil(m / block)), generator=g)
    means = d[(starts[..., None] + torch.arange(block)).reshape(resamples, -1)].mean(-1)
    q = torch.quantile(means, torch.tensor([0.005, 0.995], dtype=torch.float64))
    return float(q[0]), float(q[1])


def sub_corpus(c, rows):
    from eagle_audit.fingerprint.score import Corpus

    return Corpus(c.candidates, [s[rows] for s in c.states], c.next_ids[rows], c.labels[rows], c.valid[rows],
                  int(c.valid[rows].sum()))


def outcome_of(sl, t) -> str:
    """A slot against its truth, as a user reads it: undetermined, *wrong* (what it names misses the truth),
    exact (the truth alone) or ambiguous (the truth among the states named)."""
    if sl.undetermined:
        return "undetermined"
    if not sl.admits(t):
        return "wrong"
    return "exact" if tuple(sl.admitted) == (t,) else "ambiguous"


def judge_as_run(target, ckpt: str, truth, engine_name: str, run: dict, lines: list[str]) -> dict:
    """The fingerprint as a user runs it (``run_fingerprint``: search on ``lines``, a second round on
    ``run["reserve"]``, the confirmation on ``run["confirm"]``, in that order in one prompts file), against
    ``truth``."""
    import tempfile

    from eagle_audit.fingerprint.options import FingerprintOptions
    from eagle_audit.fingerprint.run import run_fingerprint

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "prompts.jsonl"
        f.write_text("".join(x.rstrip("\n") + "\n" for x in [*lines, *run["reserve"], *run["confirm"]]))
        opts = FingerprintOptions(target=run["target"], draft=ckpt, engine=engine_name, prompts=str(f),
                                  max_prompts=len(lines), more_prompts=len(run["reserve"]),
                                  confirm_prompts=len(run["confirm"]), max_new_tokens=run["max_new"],
                                  device=run["device"], ttt_steps=run["ttt_steps"], use_installed_engine=False)
        res = run_fingerprint(opts, source=target)
    slots = []
    for sl, t in zip(res.slots, truth):
        slots.append({"text": sl.text(), "truth": t.label(), "outcome": outcome_of(sl, t), "states": len(sl.admitted),
                      "needs": sl.needs(), "confirmed": sl.confirmed,
                      "confirm_added": [s.label() for s in sl.confirm_added],
                      "accept_admitted": [s.label() for s in sl.accept_admitted]})
    conf = res.confirmation
    acc = {k: w.accept_length for k, w in conf.wirings.items()} if conf is not None else {}
    fix = res.fix is not None and res.fix.possible
    return {"slots": slots, "confidence": res.confidence, "best": [s.label() for s in res.best],
            "top1": res.top1, "baseline_top1": res.baseline_top1, "scored_tokens": res.scored_tokens,
            "claims": [c.to_json() for c in res.claims], "findings": [f.code for f in res.findings],
            "errors": [f.code for f in res.errors], "fix": fix,
            "second_round": res.search.get("second_round"),
            "confirmation": conf.to_json() if conf is not None else None, "accept_length": acc,
            "stands": conf.stands if conf is not None else None,
            "fix_below_declared": bool(fix and "measured" in acc and "declared" in acc
                                       and acc["measured"] < acc["declared"]),
            "seconds": round(time.perf_counter() - t0, 1)}


def evaluate(target, ckpt: str, truth, corpus, group: int, engine_name: str = "vllm", ttt_steps: int | None = None,
             run: dict | None = None) -> dict:
    """The search's judgement (``infer_wiring`` + ``compare``) on the whole held-out set and on groups of ``group``
    prompts, and, with ``run`` (the prompts as raw lines: ``search``, ``reserve``, ``confirm``; ``target``,
    ``max_new``, ``device``, ``ttt_steps``), the fingerprint as a user runs it on the same text (``as_run``)."""
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.claims import compare
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.fingerprint.score import Scorer
    from eagle_audit.fingerprint.intervals import paired_interval, units_of
    from eagle_audit.resolution import resolve_trained, side_of

    info = target.info
    spec = read_draft(ckpt)
    notes: list[str] = []
    declared, trainer = resolve_trained(spec, info, notes)
    engine = get_convention(engine_name, "engine")
    served = side_of(engine, spec.config, info.architecture, info.num_layers)
    starts = starting_points(spec, info, declared.wiring, engine)

    def judge(c) -> dict:
        t0 = time.perf_counter()
        inf = infer_wiring(target, spec, c, starts, declared.flags, ttt_steps=ttt_steps)
        claims, findings, fix = compare(inf, spec, info, declared, trainer, served)
        slots = []
        for sl, t in zip(inf.slots, truth):
            kind = ("undetermined" if sl.undetermined else "wrong" if t not in sl.candidates else
                    "exact" if not sl.ambiguous else "ambiguous")
            slots.append({"text": sl.text(), "truth": t.label(), "outcome": kind, "states": len(sl.candidates),
                          "needs": sl.needs(),
                          "separate_tokens": sl.separate_tokens, "name_tokens": sl.name_tokens, "unused": sl.unused})
        return {"slots": slots, "confidence": inf.confidence, "top1": inf.top1, "baseline_top1": inf.baseline_top1,
                "scored_tokens": inf.scored_tokens, "declared": [s.label() for s in declared.states],
                "claims": [c_.to_json() for c_ in claims], "findings": [f.code for f in findings],
                "errors": [f.code for f in findings if f.severity == "error"], "fix": fix is not None and fix.possible,
                "seconds": round(time.perf_counter() - t0, 1)}

    whole = judge(corpus)
    print(f"  whole held-out set: {[s['text'] for s in whole['slots']]}; findings {whole['findings']}; "
          f"fix {whole['fix']} ({whole['seconds']} s)", flush=True)
    draft = load_draft_model(spec, target, declared.flags)
    scorer = Scorer(draft, corpus)
    idx = {s: j for j, s in enumerate(corpus.candidates)}
    tw = tuple(idx[s] for s in truth)
    top = scorer.score(tw)
    whole["truth_top1"] = top.top1
    B = corpus.next_ids.shape[0]
    groups = [list(range(g0, g0 + group)) for g0 in range(0, B - group + 1, group)]
    decisions = [judge(sub_corpus(corpus, torch.tensor(g))) for g in groups]
    # coverage: truth against each neighbour (+-1, +-2 boundaries), per slot
    seq = scorer.mask.nonzero()[:, 0].cpu()
    cover = {"cluster": [0, 0], "block8": [0, 0]}
    for i, s in enumerate(truth):
        for off in (-2, -1, 1, 2):
            from eagle_audit.states import State

            if s.normed or not 0 <= s.boundary + off <= info.num_layers:
                continue
            j = idx[State(s.boundary + off)]
            d = (top.logprob - scorer.score(tw[:i] + (j,) + tw[i + 1:]).logprob).double()
            pooled = float(d.mean())
            for g in groups:
                sel = torch.isin(seq, torch.tensor(g))
                iv = paired_interval(d[sel], torch.zeros_like(d[sel]), units_of(seq[sel]))
                cover["cluster"][0] += iv.low <= pooled <= iv.high
                lo, hi = block_bootstrap(d[sel])
                cover["block8"][0] += lo <= pooled <= hi
                cover["cluster"][1] += 1
                cover["block8"][1] += 1
    kinds = ("exact", "ambiguous", "undetermined", "wrong")
    outcome = {k: sum(sl["outcome"] == k for dd in decisions for sl in dd["slots"]) for k in kinds}
    out = {"whole": whole, "groups": decisions, "group_prompts": group, "outcomes": outcome,
           "false_differs": sum("TRAINED_WIRING_DIFFERS" in dd["findings"] for dd in decisions)
           + ("TRAINED_WIRING_DIFFERS" in whole["findings"]),
           "any_error": sum(bool(dd["errors"]) for dd in decisions) + bool(whole["errors"]),
           "coverage": {k: {"covered": v[0], "intervals": v[1], "share": v[0] / max(1, v[1])} for k, v in cover.items()}}
    if run is not None:  # the same text judged as a user's fingerprint judges it (issue 27)
        lines = run["search"]
        w = judge_as_run(target, ckpt, truth, engine_name, run, lines)
        print(f"  as run (search + second round + confirmation): {[s['text'] for s in w['slots']]}; findings "
              f"{w['findings']}; fix {w['fix']}; accept length {w['accept_length']} ({w['seconds']} s)", flush=True)
        gs = [judge_as_run(target, ckpt, truth, engine_name, run, [lines[i] for i in g]) for g in groups]
        every = [w, *gs]
        out["as_run"] = {
            "whole": w, "groups": gs, "outcomes": {k: sum(sl["outcome"] == k for dd in gs for sl in dd["slots"])
                                                   for k in kinds},
            "false_differs": sum("TRAINED_WIRING_DIFFERS" in dd["findings"] for dd in every),
            "any_finding": sum(bool(dd["findings"]) for dd in every),
            "any_error": sum(bool(dd["errors"]) for dd in every),
            "fixes": sum(dd["fix"] for dd in every),
            "fix_below_declared": sum(dd["fix_below_declared"] for dd in every),
            "prompts": {"search": len(lines), "reserve": len(run["reserve"]), "confirm": len(run["confirm"])}}
    return out


def capture_shared(target, train_text, ids_of: dict, dtype, log) -> dict:
    """One capture for several speculators wirings (``ids_of``: name -> its layer ids): the union of their states in
    one teacher-forced pass per sequence, each wiring's ``aux`` the columns of its own ids, in its order (the same
    values its own capture gives: the states of a sequence do not depend on which others are read)."""
    union = list(dict.fromkeys(k for ids in ids_of.values() for k in ids))
    t1 = time.perf_counter()
    whole = real_drafts.capture(target, train_text, union, dtype)
    log(f"speculators: captured ids {union} + B{target.info.num_layers} once for {list(ids_of)} "
        f"({time.perf_counter() - t1:.1f}s)")
    H = whole.aux[0].shape[-1] // len(union)
    out = {}
    for name, ids in ids_of.items():
        pos = [union.index(k) for k in ids]
        if pos == list(range(pos[0], pos[0] + len(pos))):
            aux = [a[:, pos[0] * H:(pos[-1] + 1) * H] for a in whole.aux]
        else:
            aux = [torch.cat([a[:, j * H:(j + 1) * H] for j in pos], -1) for a in whole.aux]
        out[name] = real_drafts.Samples(whole.ids, aux, whole.last, whole.mask)
    return out


def run_speculators(sp, target, verifier, train_text, ids_arg, ids, truth, save, args, dtype, log,
                    samples=None) -> dict:
    t1 = time.perf_counter()
    if samples is None:
        samples = real_drafts.capture(target, train_text, ids, dtype)
        log(f"speculators: captured {[s.label() for s in truth]} + B{target.info.num_layers} "
            f"({time.perf_counter() - t1:.1f}s)")
    train = lambda attn: real_drafts.train_speculators(  # noqa: E731
        sp, target, verifier, samples, ids_arg, save, epochs=args.epochs, lr=args.lr, dtype=dtype,
        attn=attn, total_seq_len=args.total_seq_len, draft_vocab=args.draft_vocab, log=log)
    try:
        rec = train(args.attn)
        rec["attn"] = args.attn
    except Exception as e:  # flex attention compiles; if it cannot here, the trainer's eager path
        if args.attn == "eager":
            raise
        log(f"speculators: {args.attn} failed ({type(e).__name__}: {e}); again with eager attention")
        rec = train("eager")
        rec["attn"] = f"eager ({args.attn} failed: {type(e).__name__})"
    rec["trainer"] = "speculators 0.9.0"
    return rec


def run_specforge(sf, target, verifier, convs, ids_arg, save, args, log) -> dict:
    """SpecForge 0.2.0: prepare (its data, vocab mapping, capture plan; hooks + SGLang 0.5.14's setter),
    ``specforge train``, ``specforge export --to sglang``."""
    import shutil

    shutil.rmtree(save, ignore_errors=True)
    t1 = time.perf_counter()
    prep = specforge_drafts.prepare(sf, target, verifier, convs, save, ids_arg, draft_vocab=args.draft_vocab,
                                    max_length=args.sf_max_length, log=log)
    prep["prepare_seconds"] = round(time.perf_counter() - t1, 1)
    attn = args.sf_attn or ("flex_attention" if args.device.startswith("cuda") else "sdpa")
    rec = specforge_drafts.train(sf, verifier, prep, save, epochs=args.sf_epochs or args.epochs,
                                 lr=args.sf_lr or args.lr, max_length=args.sf_max_length, attention=attn,
                                 batch_size=args.sf_batch, log=log)
    shutil.rmtree(prep["hidden_states"], ignore_errors=True)  # the features are large; the export stays
    shutil.rmtree(prep["eval_hidden_states"], ignore_errors=True)
    rec.update(prep)
    rec["attn"] = attn
    rec["trainer"] = "specforge 0.2.0"
    return rec


def judge_child(args, name: str, ckpt: str):
    """``--evaluate name=ckpt`` in a child process with this run's prompts and judgement options (its record next
    to ``--out``, its log beside it)."""
    import subprocess

    out = Path(args.out).with_name(f"{Path(args.out).stem}_{name}.json")
    cmd = [sys.executable, "-m", "bench.evidence.trainer_fixtures", "--target", args.target, "--device", args.device,
           "--evaluate", f"{name}={ckpt}", "--out", str(out), "--train-prompts", str(args.train_prompts),
           "--eval-prompts", str(args.eval_prompts), "--composed-prompts", str(args.composed_prompts),
           "--eval-max-new", str(args.eval_max_new), "--group", str(args.group), "--draft-vocab", str(args.draft_vocab),
           "--more-prompts", str(args.more_prompts), "--confirm-prompts", str(args.confirm_prompts)]
    for opt, v in (("--ttt-steps", args.ttt_steps), ("--site", args.site), ("--sglang-wheel", args.sglang_wheel)):
        if v is not None:
            cmd += [opt, str(v)]
    log(f"{name}: judging in a child process -> {out}")
    return subprocess.Popen(cmd, stdout=open(out.with_suffix(".log"), "w"), stderr=subprocess.STDOUT), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="SmolLM2 model directory (or .gguf)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--save", default=None, help="where the checkpoints go (default: next to --out)")
    ap.add_argument("--site", default=None, help="folder with speculators 0.9.0 installed --no-deps")
    ap.add_argument("--train-prompts", type=int, default=160)
    ap.add_argument("--eval-prompts", type=int, default=40)
    ap.add_argument("--composed-prompts", type=int, default=0,
                    help="training prompts composed from templates (bench/trainer_prompts.py), added to the "
                         "--train-prompts hand-written ones (the held-out prompts are never composed)")
    ap.add_argument("--text-cache", default=None,
                    help="file: the generated training text is saved there, and read back by a later run with the "
                         "same prompts and generation arguments (two GPU calls, one generation)")
    ap.add_argument("--samples", type=int, default=4, help="responses per training prompt (1 greedy + sampled)")
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--eval-max-new", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--draft-vocab", type=int, default=4096, help="draft vocabulary (4096: a bf16 draft < 16 MiB)")
    ap.add_argument("--total-seq-len", type=int, default=8192, help="speculators' packed batch length (its default)")
    ap.add_argument("--attn", default="eager", help="speculators draft attention (simple_flex_attention compiled for over 100 s on torch 2.11, H200)")
    ap.add_argument("--wirings", default=",".join(ALL_WIRINGS))
    ap.add_argument("--sf-epochs", type=int, default=None, help="SpecForge epochs (default: --epochs)")
    ap.add_argument("--sf-lr", type=float, default=None, help="SpecForge learning rate (default: --lr)")
    ap.add_argument("--sf-attn", default=None, help="SpecForge attention backend (default: sdpa; flex_attention on cuda)")
    ap.add_argument("--sf-max-length", type=int, default=2048)
    ap.add_argument("--sglang-wheel", default=None,
                    help="the SGLang 0.5.14 wheel (or a zip of its sglang/srt/models/llama.py) SpecForge's setter is read from")
    ap.add_argument("--deadline", type=float, default=None, help="seconds: start no further fixture after this")
    ap.add_argument("--keep", default=None, help="folder: copy each SpecForge export (config + weights) there")
    ap.add_argument("--sf-batch", type=int, default=1, help="SpecForge training.batch_size (its default 1)")
    ap.add_argument("--ttt-steps", type=int, default=None,
                    help="training-time-test steps the fingerprint scores (default: the device's, 3 on CUDA, 1 on CPU)")
    ap.add_argument("--evaluate", default=None, metavar="NAME=DIR",
                    help="no training: fingerprint an existing draft of fixture NAME (its truth from NAME) saved in DIR, "
                         "on the held-out prompts (re-judging a GPU-trained draft with changed code, on any device)")
    ap.add_argument("--more-prompts", type=int, default=8,
                    help="as a user runs it: the second round's reserve, the first N of bench/data/heldout_prompts.jsonl")
    ap.add_argument("--confirm-prompts", type=int, default=8,
                    help="as a user runs it: the confirmation's prompts, the N after the reserve in "
                         "bench/data/heldout_prompts.jsonl (0: the search's judgement alone, as before)")
    ap.add_argument("--fixture-epochs", default=None, metavar="NAME=E,...",
                    help="epochs per fixture (its trainer's --epochs / --sf-epochs for that fixture alone)")
    ap.add_argument("--judge-async", action="store_true",
                    help="judge each trained draft in a child process (--evaluate) while the next one trains")
    ap.add_argument("--text-only", action="store_true", help="generate the training text into --text-cache and stop")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke: few prompts, 1 epoch, eager attention")
    args = ap.parse_args()
    if args.evaluate and ("=" not in args.evaluate or args.evaluate.split("=", 1)[0] not in ALL_WIRINGS):
        ap.error(f"--evaluate {args.evaluate}: expected NAME=DIR with NAME one of {', '.join(ALL_WIRINGS)}")
    if args.evaluate and not (Path(args.evaluate.split("=", 1)[1]) / "config.json").is_file():
        ap.error(f"--evaluate {args.evaluate}: no config.json in that draft directory")
    if args.tiny:
        args.train_prompts, args.eval_prompts, args.samples, args.max_new, args.eval_max_new = 6, 4, 1, 24, 16
        args.epochs, args.group, args.attn, args.total_seq_len, args.draft_vocab = 1, 2, "eager", 256, 2048
        args.sf_max_length = 256
    torch.manual_seed(0)
    if args.device == "cpu":
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from eagle_audit.prompts import load_prompts
    from eagle_audit.target import load_target

    t0 = time.perf_counter()
    target = load_target(args.target, args.device, "float32" if args.device == "cpu" else "bfloat16")
    verifier = str(Path(target.info.path) if getattr(target.info, "path", None) else args.target)
    if not (Path(verifier) / "config.json").is_file():
        from eagle_audit.target import _gguf_cache

        verifier = str(_gguf_cache(Path(args.target)))
    log(f"target loaded ({time.perf_counter() - t0:.1f}s); verifier dir {verifier}")
    site = Path(args.site) if args.site else None
    from tests import wheels

    if site is None:
        site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    wirings = args.wirings.split(",")
    sp = real_drafts.import_speculators(site) if any(w.startswith("speculators") for w in wirings) else None
    sf = (specforge_drafts.import_specforge(site, Path(args.sglang_wheel) if args.sglang_wheel
                                            else wheels.sglang_wheel(wheels.SPECFORGE_SGLANG_VERSION))
          if any(w.startswith("specforge") for w in wirings) else None)
    from eagle_audit.prompts import encode

    prompts = load_prompts(str(_support.CANARY_PROMPTS))  # chat messages, templated by encode
    train_texts = prompts[:args.train_prompts]
    eval_texts = prompts[-args.eval_prompts:]
    if args.composed_prompts:
        from bench.tools import trainer_prompts
        from eagle_audit.prompts import Prompt

        taken = {c for p in prompts for _, c in (p.messages or ())}
        train_texts = train_texts + tuple(Prompt(messages=(("user", t),))
                                          for t in trainer_prompts.composed(args.composed_prompts, taken))
    assert not set(train_texts) & set(eval_texts), "held-out prompts overlap the training prompts"
    run = None
    if args.confirm_prompts > 0:  # the fingerprint as a user runs it: the same prompts as lines of one file
        canary_lines = [x for x in _support.CANARY_PROMPTS.read_text().splitlines() if x.strip()]
        extra_lines = [x for x in _support.HELDOUT_PROMPTS.read_text().splitlines() if x.strip()]
        assert len(canary_lines) == len(prompts)
        extra = load_prompts(str(_support.HELDOUT_PROMPTS))
        assert len(extra_lines) == len(extra) >= args.more_prompts + args.confirm_prompts
        others = extra[:args.more_prompts + args.confirm_prompts]
        assert not set(others) & (set(train_texts) | set(eval_texts)), "a reserve/confirmation prompt is trained or held out"
        run = {"target": args.target, "max_new": args.eval_max_new, "device": args.device, "ttt_steps": args.ttt_steps,
               "search": canary_lines[-args.eval_prompts:], "reserve": extra_lines[:args.more_prompts],
               "confirm": extra_lines[args.more_prompts:args.more_prompts + args.confirm_prompts]}
    epochs_of = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in args.fixture_epochs.split(",")) \
        if args.fixture_epochs else {}
    tok = target.tokenizer
    if args.evaluate:
        name, ckpt = args.evaluate.split("=", 1)
        from eagle_audit.fingerprint.corpus import prepare_corpus

        ids_arg = ALL_WIRINGS[name]
        trainer = name.split("-", 1)[0]
        if trainer == "speculators":
            truth = tuple(real_drafts.state_of_id(k) for k in sp.resolve_target_layer_ids(ids_arg, verifier))
        else:  # SpecForge's own config and capture plan for the fixture's ids, through SGLang 0.5.14's setter
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                _, _, capture = specforge_drafts.capture_plan(sf, target, verifier, Path(tmp), ids_arg,
                                                              args.draft_vocab)
                truth = tuple(capture._backend.states)
        t1 = time.perf_counter()
        corpus = prepare_corpus(target, encode(eval_texts, tok), args.eval_max_new)
        log(f"held-out corpus: {len(eval_texts)} prompts ({time.perf_counter() - t1:.1f}s)")
        ev = evaluate(target, ckpt, truth, corpus, args.group, SERVED_BY[trainer], args.ttt_steps, run)
        w = ev["whole"]
        log(f"{name} (evaluated, {ckpt}): held-out step-0 accuracy {w['truth_top1']:.3f}; fingerprint "
            f"{[s['text'] for s in w['slots']]}; findings {w['findings']}; outcomes {ev['outcomes']}; "
            f"false differs {ev['false_differs']}; coverage {ev['coverage']}")
        if "as_run" in ev:
            a = ev["as_run"]
            log(f"{name} as run: {[s['text'] for s in a['whole']['slots']]}; findings {a['whole']['findings']}; "
                f"group outcomes {a['outcomes']}; false differs {a['false_differs']}; fixes {a['fixes']} "
                f"({a['fix_below_declared']} below the declared accept length)")
        Path(args.out).write_text(json.dumps(_support.record(args=vars(args), truth=[s.label() for s in truth],
                                                             evaluation=ev, seconds=round(time.perf_counter() - t0, 1)),
                                             indent=1, default=str))
        return 0
    t1 = time.perf_counter()
    train_text = convs = None
    key = {"prompts": [p.messages for p in train_texts], "max_new": args.max_new, "samples": args.samples,
           "specforge_template": sf is not None}
    cached = torch.load(args.text_cache) if args.text_cache and Path(args.text_cache).is_file() else None
    if cached is not None and (cached["key"] == key or (sf is None and cached["key"] == {**key, "specforge_template": True})):
        convs, train_text = cached["convs"], cached["train_text"]
        log(f"training text read from {args.text_cache} (generated by an earlier run)")
    elif sf is not None:  # one generation serves both trainers (SpecForge's chat template and system prompt)
        convs, train_text = specforge_drafts.regenerate(
            target, train_texts, args.max_new, args.samples,
            sf.templates.get(specforge_drafts.CHAT_TEMPLATE).system_prompt, args.gen_batch)
    elif sp is not None:
        train_text = real_drafts.generate(target, encode(train_texts, tok), args.max_new, args.samples, args.gen_batch)
    if args.text_cache and cached is None:
        torch.save({"key": key, "convs": convs, "train_text": train_text}, args.text_cache)
    log(f"training text: {len(train_texts)} prompts, {len(train_text)} sequences, "
        f"{sum(len(s) for s, _ in train_text)} tokens ({time.perf_counter() - t1:.1f}s)")
    if args.text_only:
        Path(args.out).write_text(json.dumps({"args": vars(args), "seconds": round(time.perf_counter() - t0, 1),
                                              "generation_seconds": round(time.perf_counter() - t1, 1)}, indent=1))
        return 0
    from eagle_audit.fingerprint.corpus import prepare_corpus

    t1 = time.perf_counter()
    corpus = prepare_corpus(target, encode(eval_texts, tok), args.eval_max_new)
    log(f"held-out corpus: {len(eval_texts)} prompts ({time.perf_counter() - t1:.1f}s)")
    save = Path(args.save or Path(args.out).with_suffix(""))
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    record = _support.record(args=vars(args), fixtures={})
    record["training_text"] = {"prompts": len(train_texts), "composed_prompts": args.composed_prompts,
                               "sequences": len(train_text), "tokens": sum(len(s) for s, _ in train_text),
                               "response_tokens": sum(len(s) - n for s, n in train_text)}
    from eagle_audit.states import State

    sp_names = [n for n in wirings if n.startswith("speculators")]
    shared = {}
    if len(sp_names) > 1:
        shared = capture_shared(target, train_text, {n: sp.resolve_target_layer_ids(ALL_WIRINGS[n], verifier)
                                                     for n in sp_names}, dtype, log)
    children = {}
    for name in wirings:
        if args.deadline and time.perf_counter() - t0 > args.deadline:
            log(f"{name}: not started (past --deadline {args.deadline:.0f}s)")
            record["fixtures"][name] = {"error": "not started: past the deadline"}
            continue
        ids_arg = ALL_WIRINGS[name]
        trainer = name.split("-", 1)[0]
        fargs = argparse.Namespace(**{**vars(args), **({"epochs": epochs_of[name], "sf_epochs": epochs_of[name]}
                                                        if name in epochs_of else {})})
        try:
            if trainer == "specforge":
                rec = run_specforge(sf, target, verifier, convs, ids_arg, save / name, fargs, log)
                truth = tuple(State(int(x[1:])) for x in rec["states"])
            else:
                ids = sp.resolve_target_layer_ids(ids_arg, verifier)
                truth = tuple(real_drafts.state_of_id(k) for k in ids)
                rec = run_speculators(sp, target, verifier, train_text, ids_arg, ids, truth, save / name, fargs, dtype,
                                      log, shared.get(name))
            rec["epochs"] = (fargs.sf_epochs or fargs.epochs) if trainer == "specforge" else fargs.epochs
            rec["truth"] = [s.label() for s in truth]
            if args.keep and trainer == "specforge":
                import shutil

                shutil.copytree(rec["checkpoint"], Path(args.keep) / name, dirs_exist_ok=True)
            if args.judge_async:  # the next fixture trains meanwhile; the child writes its own record
                children[name] = judge_child(args, name, rec["checkpoint"])
                rec["evaluation"] = {"in": str(children[name][1])}
                record["fixtures"][name] = rec
                Path(args.out).write_text(json.dumps(record, indent=1, default=str))
                continue
            rec["evaluation"] = evaluate(target, rec["checkpoint"], truth, corpus, args.group, SERVED_BY[trainer],
                                         args.ttt_steps, run)
            w = rec["evaluation"]["whole"]
            log(f"{name}: held-out step-0 accuracy {w['truth_top1']:.3f}; fingerprint "
                f"{[s['text'] for s in w['slots']]}; errors {w['errors']}; outcomes {rec['evaluation']['outcomes']}; "
                f"false differs {rec['evaluation']['false_differs']}; coverage {rec['evaluation']['coverage']}")
        except Exception as e:  # keep the other fixture's numbers
            import traceback

            traceback.print_exc()
            rec = {"error": f"{type(e).__name__}: {e}"}
        record["fixtures"][name] = rec
        Path(args.out).write_text(json.dumps(record, indent=1, default=str))
    for name, (proc, out) in children.items():
        rc = proc.wait()
        got = json.loads(out.read_text()) if rc == 0 and out.is_file() else None
        record["fixtures"][name]["evaluation"] = got["evaluation"] if got else {"error": f"judge exited {rc}", "in": str(out)}
        log(f"{name}: judged by a child process (exit {rc}) -> {out}")
    record["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(record, indent=1, default=str))
    log(f"done in {record['seconds']}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
