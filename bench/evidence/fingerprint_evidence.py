"""What each kind of evidence adds to `fingerprint` (issue 18, part 2): measured on drafts of known wiring.

Drafts: the test canaries (``tests/fingerprint/fp_canaries.py``, eagle-audit's trainer, step-0 training) and
drafts trained by speculators 0.9.0's own loop (``bench/evidence/trainer_fixtures.py``; ``--fixture NAME=DIR:B2,B15,B27``).
Per draft, corpus and setting, every slot's outcome against the truth (exact / ambiguous with the truth /
undetermined / wrong), the truth's separation from its closest other state (``z``: the margin over the interval's
half-width, > 1 separated; only where the truth is the best), and the seconds the search + judgement took.

* ``steps``: training-time-test steps scored per position (1: the first draft token only, 3: SpecForge's and
  speculators' unrolled steps 0..2, ``eagle_audit/fingerprint/score.py``).
* corpora: the prompts in the target's chat template with its own greedy continuations (``chat``: what both
  trainers train on) against the same prompt texts as plain text (``plain``) and their continuations.
* ``fc_stats``: what the weights say without text: per slot and state, the energy of the slot's fc block on
  that state's positions relative to an isotropic input of the same norm (``r_ij = E|W_i x_j|^2 / (E|x_j|^2 *
  |W_i|_F^2 / H_t)``; a trained block's update lies in the span of what it was trained on), and whether its
  argmax is the truth or a neighbour.
* ``coverage``: for the truth against each state one or two boundaries away, the share of per-group 99% intervals
  (groups of ``--group`` prompts) that cover the margin measured on the whole corpus.

    OMP_NUM_THREADS=1 python -m bench.evidence.fingerprint_evidence --out bench/results/fingerprint_evidence_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from bench._support import CANARY_PROMPTS, record


def log(m: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)


def plain(prompts):
    """The same prompts as plain text: the user turns' contents, no chat template."""
    from eagle_audit.prompts import Prompt

    return tuple(Prompt(text="\n".join(c for r, c in p.messages if r == "user")) if p.messages else p for p in prompts)


def sub_corpus(c, rows):
    from eagle_audit.fingerprint.score import Corpus

    return Corpus(c.candidates, [s[rows] for s in c.states], c.next_ids[rows], c.labels[rows], c.valid[rows],
                  int(c.valid[rows].sum()))


def fc_stats(scorer, truth_idx) -> list[dict]:
    """Per slot: r_ij (see the module doc) over the candidates, its argmax and the truth's rank."""
    if not scorer.linear:
        return []
    m = scorer.mask
    d = scorer.draft
    Ht = scorer.Ht
    out = []
    W = d.fc.weight.detach().float()
    for i in range(scorer.n):
        Wi = W[:, i * Ht:(i + 1) * Ht]
        iso = float(Wi.detach().pow(2).sum()) / Ht
        r = []
        for j, s in enumerate(scorer.corpus.states):
            x = s.to(scorer.dev, torch.float32)
            if d.input_norm is not None:
                x = x * d.input_norm.weight[i * Ht:(i + 1) * Ht].float()
            if d.fc_norm is not None:
                x = d.fc_norm[i](x)
            num = scorer._products[i][j].float().pow(2).sum(-1)[m].mean()
            den = x.pow(2).sum(-1)[m].mean()
            r.append(float(num / den / iso))
        order = sorted(range(len(r)), key=lambda j: -r[j])
        out.append({"r": r, "argmax": order[0], "truth_rank": order.index(truth_idx[i]),
                    "truth_r": r[truth_idx[i]], "max_r": r[order[0]]})
    return out


def coverage(scorer, truth_idx, cands, group: int) -> tuple[int, int]:
    from eagle_audit.fingerprint.intervals import paired_interval, units_of
    from eagle_audit.states import State

    top = scorer.score(truth_idx)
    seq = scorer.units  # sequence-level units (>= 4 sequences here)
    G = int(seq.max()) + 1
    groups = [list(range(g0, g0 + group)) for g0 in range(0, G - group + 1, group)]
    idx = {s: j for j, s in enumerate(cands)}
    covered = total = 0
    for i, t in enumerate(truth_idx):
        s = cands[t]
        for off in (-2, -1, 1, 2):
            if s.normed or s.boundary + off < 0 or State(s.boundary + off) not in idx:
                continue
            j = idx[State(s.boundary + off)]
            d = (top.logprob - scorer.score(truth_idx[:i] + (j,) + truth_idx[i + 1:]).logprob).double()
            pooled = float(d.mean())
            for g in groups:
                sel = torch.isin(seq, torch.tensor(g))
                iv = paired_interval(d[sel], torch.zeros_like(d[sel]), units_of(seq[sel]))
                covered += iv.low <= pooled <= iv.high
                total += 1
    return covered, total


def judge_draft(target, ddir, truth, corpus, steps: int, group: int) -> dict:
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.fingerprint.score import Scorer
    from eagle_audit.fingerprint.intervals import paired_interval
    from eagle_audit.resolution import resolve_trained

    spec = read_draft(str(ddir))
    declared, _ = resolve_trained(spec, target.info, [])
    starts = starting_points(spec, target.info, declared.wiring, get_convention("sglang", "engine"))
    t0 = time.perf_counter()
    inf = infer_wiring(target, spec, corpus, starts, declared.flags, ttt_steps=steps)
    secs = time.perf_counter() - t0
    cands = corpus.candidates
    idx = {s: j for j, s in enumerate(cands)}
    tw = tuple(idx[s] for s in truth)
    draft = load_draft_model(spec, target, declared.flags)
    scorer = Scorer(draft, corpus, steps=steps)
    top = scorer.score(tw)
    slots = []
    for sl, t in zip(inf.slots, truth):
        kind = ("undetermined" if sl.undetermined else "wrong" if t not in sl.candidates else
                "exact" if not sl.ambiguous else "ambiguous")
        # the truth against every other state in its slot (others at the truth): its closest rival
        i = sl.index
        ivs = [(j, paired_interval(top.logprob, scorer.score(tw[:i] + (j,) + tw[i + 1:]).logprob, scorer.units))
               for j in range(len(cands)) if j != tw[i]]
        j, iv = min(ivs, key=lambda p: p[1].mean)
        half = (iv.high - iv.low) / 2
        slots.append({"truth": t.label(), "outcome": kind, "text": sl.text(), "uninformed": sl.uninformed,
                      "rival": cands[j].label(), "truth_margin": iv.mean, "truth_interval": [iv.low, iv.high],
                      "z": iv.mean / half if half > 0 else None, "candidates": len(sl.candidates),
                      "separate_tokens": sl.separate_tokens, "needs": sl.needs()})
    cov = coverage(scorer, tw, cands, group) if int(scorer.units.max()) + 1 >= 2 * group else (0, 0)
    per_step = [{"top1": top.top1_at(k), "logprob": top.mean_logprob_at(k)} for k in range(steps)]
    return {"steps": steps, "slots": slots, "seconds": round(secs, 1), "scored_tokens": inf.scored_tokens,
            "top1": inf.top1, "truth_per_step": per_step, "wirings_scored": inf.search.get("wirings_scored"),
            "coverage": list(cov), "fc_stats": fc_stats(scorer, tw) if steps == 1 else None,
            "confidence": inf.confidence, "split_seconds": inf.search.get("seconds"),
            "ttt_steps": inf.search.get("ttt_steps")}


def second_round(gguf, ddir, truth, prompts_file: str, first: int, more: int, max_new: int) -> list[dict]:
    """``fingerprint()`` end to end on ``first`` prompts of the file, with no second round and with a budget of
    ``more`` prompts: the outcome per slot and the seconds each took."""
    from eagle_audit.fingerprint.api import fingerprint

    out = []
    for budget in (0, more):
        t0 = time.perf_counter()
        r = fingerprint(gguf, str(ddir), prompts=prompts_file, max_prompts=first, more_prompts=budget,
                        max_new_tokens=max_new)
        secs = time.perf_counter() - t0
        slots = [{"truth": t.label(), "text": sl.text(), "needs": sl.needs(),
                  "outcome": ("undetermined" if sl.undetermined else "wrong" if t not in sl.candidates else
                              "exact" if not sl.ambiguous else "ambiguous")} for sl, t in zip(r.slots, truth)]
        out.append({"more_prompts": budget, "seconds": round(secs, 1), "slots": slots,
                    "errors": [f.code for f in r.errors], "scored_tokens": r.scored_tokens,
                    "second_round": r.search.get("second_round"), "split_seconds": r.search.get("seconds")})
        log(f"second round budget {budget}: {[x['outcome'] for x in slots]} {[x['text'] for x in slots]} "
            f"errors {out[-1]['errors']} {out[-1]['seconds']}s round2 {out[-1]['second_round']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixture", action="append", default=[], help="NAME=DIR:B2,B15,B27 (a draft of known wiring)")
    ap.add_argument("--canaries", default="all", help="test canaries to include (comma list, all, none)")
    ap.add_argument("--steps", default="1,3")
    ap.add_argument("--corpora", default="train-chat,heldout-chat,heldout-plain")
    ap.add_argument("--fixture-prompts", type=int, default=16, help="held-out prompts of canary_prompts.jsonl")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--second-round", action="store_true", help="only the second-round measurement, per fixture")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from tests.fingerprint.fp_canaries import CANARIES, VERSION

    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target, materialise

    gguf = default_target()
    materialise(gguf)
    target = load_target(gguf)
    N = target.info.num_layers
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE", Path.home() / ".cache" / "eagle-audit-test"))
    drafts = {}
    names = list(CANARIES) if args.canaries == "all" else [] if args.canaries == "none" else args.canaries.split(",")
    for name in names:
        b, final = CANARIES[name]
        drafts[f"canary {name}"] = (cache / f"fp-canary-{name}-v{VERSION}",
                                    tuple(State(x, normed=final and x == N) for x in b), "canary")
    for f in args.fixture:
        name, rest = f.split("=", 1)
        d, states = rest.rsplit(":", 1)
        drafts[name] = (Path(d), tuple(State(int(x.lstrip("B"))) for x in states.split(",")), "fixture")
    builtin = load_prompts(None)
    held = load_prompts(str(CANARY_PROMPTS))[-args.fixture_prompts:]
    corpora_of = {  # name -> (prompts, new tokens, for which drafts)
        "train-chat": (builtin[8:16], 96, "canary"),  # the canaries' training prompts (the tests' corpus)
        "heldout-chat": (builtin[:8], args.max_new, "canary"),
        "heldout-plain": (plain(builtin[:8]), args.max_new, "canary"),
        "fixture-chat": (held, args.max_new, "fixture"),
        "fixture-plain": (plain(held), args.max_new, "fixture"),
    }
    if args.second_round:
        import tempfile

        lines = CANARY_PROMPTS.read_text().splitlines()[-args.fixture_prompts:]
        pf = Path(tempfile.mkdtemp()) / "held_out.jsonl"
        pf.write_text("".join(ln + "\n" for ln in lines))
        rec = record(second_round={})
        for dname, (ddir, truth, k) in drafts.items():
            if k == "fixture":
                rec["second_round"][dname] = second_round(gguf, ddir, truth, str(pf), args.fixture_prompts // 2,
                                                          args.fixture_prompts // 2, args.max_new)
                Path(args.out).write_text(json.dumps(rec, indent=1, default=str))
        return 0
    wanted = args.corpora.split(",")
    if args.fixture and not any(c.startswith("fixture") for c in wanted):
        wanted += ["fixture-chat", "fixture-plain"]
    rec = record(torch_threads=torch.get_num_threads(), args=vars(args), runs=[])
    for cname in dict.fromkeys(wanted):
        prompts, new, kind = corpora_of[cname]
        if not any(k == kind for _, _, k in drafts.values()):
            continue
        t0 = time.perf_counter()
        corpus = prepare_corpus(target, encode(prompts, target.tokenizer), new)
        log(f"corpus {cname}: {len(prompts)} prompts, {corpus.tokens} tokens ({time.perf_counter() - t0:.1f}s)")
        for dname, (ddir, truth, k) in drafts.items():
            if k != kind:
                continue
            for steps in map(int, args.steps.split(",")):
                r = judge_draft(target, ddir, truth, corpus, steps, args.group)
                r.update(draft=dname, corpus=cname)
                rec["runs"].append(r)
                log(f"{dname} / {cname} / steps {steps}: {[s['outcome'] for s in r['slots']]} "
                    f"z {[None if s['z'] is None else round(s['z'], 2) for s in r['slots']]} "
                    f"{r['seconds']}s coverage {r['coverage']} top1/step {[round(p['top1'], 3) for p in r['truth_per_step']]}"
                    + (f" fc_stats truth rank {[f['truth_rank'] for f in r['fc_stats']]}" if r['fc_stats'] else ""))
                Path(args.out).write_text(json.dumps(rec, indent=1, default=str))
    Path(args.out).write_text(json.dumps(rec, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
