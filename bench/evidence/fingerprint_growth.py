"""How the fingerprint's slots behave as the held-out text grows, and whether its "how sure" came true (issue 18).

One draft of known wiring (``--draft DIR --truth B2,B15,B27``; default: the SpecForge 0.2.0 H200 draft under .dev/),
chat prompts it was not trained on, in this order (``--sizes`` takes the first n of them):

1. the last 40 of ``bench/data/canary_prompts.jsonl`` (``bench/evidence/trainer_fixtures.py`` trains on its first 167 and
   holds these out: the GPU run's 40 held-out prompts);
2. the built-in ``eagle_audit/data/chat_prompts.jsonl`` without the ones that are also among the 167 trained on;
3. ``bench/data/heldout_prompts.jsonl`` (written for this measurement: none equal to, or sharing half its content
   words with, a prompt of the two files above).

The target (SmolLM2-135M-Instruct, the GGUF the tests convert) continues every prompt greedily once
(``--max-new`` tokens, as the GPU run: 96) and one capture pass per sequence gives every state; each size n is
the first n sequences of that one corpus (so the sizes are nested, as a second round's text is). Per size and
slot: the answer, the margin best - runner-up and its 99% interval, the truth against its neighbours (the other
slots at the truth), ``separate_tokens`` / ``name_tokens`` / ``needs``; then, for every earlier estimate, whether
a later size with at least that many scored tokens did what it said (``predictions``).

``--calibrate R``: the same check on R random subsets per size, without new draft forwards: the per-token scores of
the largest size's per-slot table (every slot against every state, the others at the best) are restricted to a
subset of prompts, its slot judged as ``search.judge`` judges (best, runner-up, states not separated, the
estimates), and the estimate of each subset is checked on a random superset of the size it names (the subset's
own prompts and fresh ones, as a second round adds to the first). That measures the share of estimates that came
true, for the estimator in ``eagle_audit/fingerprint/intervals.py`` and, for comparison, the one before it
(``--calibrate`` needs the largest size to hold the supersets; estimates beyond it are counted as not checkable;
the ``uninformed`` guard is not applied there, so a shallow slot the draft barely uses is counted too).
Per size also the claims, findings and fix against SGLang (``run.compare``) and each slot's use margin.

    OMP_NUM_THREADS=1 python -m bench.evidence.fingerprint_growth --draft .dev/specforge-default/draft \\
        --sizes 40,80,160 --sequences seqs.json --table table.pt --out bench/results/fingerprint_growth_cpu.json
    OMP_NUM_THREADS=1 python -m bench.evidence.fingerprint_growth --calibrate-only --calibrate 200 --table table.pt --out ...

(1 torch thread: with 2 on a shared 2-core box, OpenMP barriers made generation over 5x slower.)
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

from bench._support import CANARY_PROMPTS, HELDOUT_PROMPTS, ROOT, record


def log(m: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)


def held_out_prompts():
    """The chat prompts in the order above, and where each part came from."""
    from eagle_audit.prompts import load_prompts

    canary = load_prompts(str(CANARY_PROMPTS))
    trained = set(canary[:167])
    first = list(canary[-40:])
    builtin = [p for p in load_prompts(None) if p not in trained]
    extra = list(load_prompts(str(HELDOUT_PROMPTS)))
    allp = first + builtin + extra
    assert not set(allp) & trained and len(set(allp)) == len(allp), "a held-out prompt repeats or was trained on"
    return allp, {"canary_prompts[-40:]": len(first), "chat_prompts (not trained on)": len(builtin),
                  "heldout_prompts.jsonl": len(extra)}


def sub_corpus(c, n: int):
    from eagle_audit.fingerprint.score import Corpus

    return Corpus(c.candidates, [s[:n] for s in c.states], c.next_ids[:n], c.labels[:n], c.valid[:n],
                  int(c.valid[:n].sum()) + n)


class Recording:
    """Keeps the scorers ``infer_wiring`` makes (their per-token caches feed ``--calibrate``)."""

    made: list = []

    @classmethod
    def install(cls):
        from eagle_audit.fingerprint import run
        from eagle_audit.fingerprint.score import Scorer

        class Kept(Scorer):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                cls.made.append(self)

        run.Scorer = Kept


def slot_record(sl, truth, truth_ivs) -> dict:
    kind = ("undetermined" if sl.undetermined else "wrong" if truth not in sl.candidates else
            "exact" if not sl.ambiguous else "ambiguous")
    iv = sl.margin
    return {"truth": truth.label(), "outcome": kind, "text": sl.text(), "best": sl.best.label(),
            "runner_up": sl.runner_up.label() if sl.runner_up else None,
            "margin": [iv.mean, iv.low, iv.high] if iv else None, "candidates": [s.label() for s in sl.candidates],
            "separate_tokens": sl.separate_tokens, "name_tokens": sl.name_tokens, "unused": sl.unused,
            "uninformed": sl.uninformed, "needs": sl.needs(), "scored_tokens": sl.scored_tokens,
            "use_margin": [sl.use_margin.mean, sl.use_margin.low, sl.use_margin.high] if sl.use_margin else None,
            "truth_vs": truth_ivs}


def truth_neighbours(scorer, tw, cands, i: int) -> dict:
    """The truth against the states 1 and 2 boundaries away in slot i, the other slots at the truth."""
    from eagle_audit.fingerprint.intervals import paired_interval
    from eagle_audit.states import State

    idx = {s: j for j, s in enumerate(cands)}
    s = cands[tw[i]]
    top = scorer.score(tw)
    out = {}
    for off in (-2, -1, 1, 2):
        o = State(s.boundary + off)
        if s.normed or o not in idx:
            continue
        iv = paired_interval(top.logprob, scorer.score(tw[:i] + (idx[o],) + tw[i + 1:]).logprob, scorer.units)
        out[o.label()] = [round(iv.mean, 5), round(iv.low, 5), round(iv.high, 5)]
    return out


def estimates(scorer, best, i: int, max_named: int = 3) -> dict:
    """Slot i's runner-up and ``max_named``-th other state against the best (the per-slot table at the answer, as
    ``search.judge`` reads it), and both estimators' tokens for each (``separate`` / ``name``)."""
    from eagle_audit.fingerprint import intervals as S

    n = len(scorer.corpus.candidates)
    rows = [scorer.score(best[:i] + (j,) + best[i + 1:]) for j in range(n)]
    order = sorted(range(n), key=lambda j: -rows[j].mean_logprob)
    order.remove(best[i])
    G = int(scorer.units.max()) + 1
    ivs = [S.paired_interval(rows[best[i]].logprob, rows[j].logprob, scorer.units) for j in (order[0], order[max_named - 1])]
    out = {"runner_up_interval": [ivs[0].mean, ivs[0].low, ivs[0].high],
           f"state_{max_named + 1}_interval": [ivs[1].mean, ivs[1].low, ivs[1].high]}
    for name, est in (("current", S.tokens_to_separate), ("before", before)):
        out[name] = {"separate": est(ivs[0], G, scorer.scored), "name": est(ivs[1], G, scorer.scored)}
    return out


def predictions(sizes: list[dict]) -> list[dict]:
    """Every estimate of a slot not separated at one size (both estimators: ``current`` and ``before``), checked at
    each later size: an undetermined slot's ``name`` estimate (at most 3 states named, the truth among them), an
    ambiguous slot's ``separate`` estimate (one state). ``due``: the later size has at least the tokens named."""
    out = []
    for a, ra in enumerate(sizes):
        for i, sa in enumerate(ra["slots"]):
            if sa["outcome"] == "exact" or sa["unused"] or sa["uninformed"]:
                continue
            key = "name" if sa["outcome"] == "undetermined" else "separate"
            for rb in sizes[a + 1:]:
                sb = rb["slots"][i]
                came = (sb["outcome"] in ("exact", "ambiguous")) if key == "name" else sb["outcome"] == "exact"
                for est in ("current", "before"):
                    want = sa["estimates"][est][key]
                    out.append({"slot": i, "estimator": est, "at_prompts": ra["prompts"],
                                "at_tokens": ra["scored_tokens"], "said": sa["outcome"], "estimate": want,
                                "checked_at_prompts": rb["prompts"], "checked_at_tokens": rb["scored_tokens"],
                                "due": want is not None and rb["scored_tokens"] >= want, "came_true": came,
                                "then": sb["text"]})
    return out


def before(iv, units: int, tokens: int, level: float = 0.99, cap: int = 64):
    """The estimator before this measurement (eagle_audit f6f3e27 ``intervals.tokens_to_separate``), for comparison:
    the tokens at which the interval's half-width, shrunk by the square root of more prompts, meets the measured
    margin (so about half the time the interval still reaches 0 there, if the margin is right)."""
    from eagle_audit.fingerprint.intervals import t_quantile

    if not (math.isfinite(iv.low) and math.isfinite(iv.high)) or iv.mean == 0 or units < 2:
        return None
    q = (1 + level) / 2
    se = (iv.high - iv.low) / 2 / t_quantile(q, units - 1)
    for g in range(2, cap * units + 1):
        if t_quantile(q, g - 1) * se * math.sqrt(units / g) < abs(iv.mean):
            return math.ceil(g * tokens / units)
    return None


class Table:
    """The per-token scores of one scorer's per-slot table at ``best`` (every slot against every state), its units
    and scored tokens: what ``--calibrate`` reads, saved so it can run again without the target (``--table``)."""

    def __init__(self, units, scored, rows):
        self.units, self.scored, self.rows = units, scored, rows  # rows[slot][state]: Score

    @classmethod
    def of(cls, scorer, best):
        n = len(scorer.corpus.candidates)
        return cls(scorer.units, scorer.scored,
                   [[scorer.score(best[:i] + (j,) + best[i + 1:]) for j in range(n)] for i in range(len(best))])

    def save(self, path):
        torch.save({"units": self.units, "scored": self.scored,
                    "logprob": [[s.logprob for s in r] for r in self.rows]}, path)

    @classmethod
    def load(cls, path):
        from eagle_audit.fingerprint.score import Score

        d = torch.load(path)
        return cls(d["units"], d["scored"], [[Score(torch.zeros_like(lp), lp) for lp in r] for r in d["logprob"]])


class View:
    """A scorer restricted to some prompts: the cached per-token scores of a full scorer, no new forwards."""

    def __init__(self, full, rows: torch.Tensor):
        from eagle_audit.fingerprint.intervals import units_of

        self.full = full
        self.sel = torch.isin(full.units, rows)  # full.units: one id per prompt (>= 4 prompts)
        self.units = units_of(full.units[self.sel])
        self.scored = int(self.sel.sum())

    def pick(self, s):
        from eagle_audit.fingerprint.score import Score

        return Score(s.hit[self.sel], s.logprob[self.sel], None)


def calibrate(full: Table, sizes_prompts: list[int], reps: int, level: float = 0.99,
              max_named: int = 3, seed: int = 0) -> dict:
    """See the module doc. ``full``: the largest size's per-slot table."""
    from eagle_audit.fingerprint import intervals as S

    g = torch.Generator().manual_seed(seed)
    G = int(full.units.max()) + 1
    n_cand = len(full.rows[0])
    table = dict(enumerate(full.rows))
    per_prompt = full.scored / G

    def judge_view(v, i):
        sc = [v.pick(s) for s in table[i]]
        means = [float(s.logprob.mean()) for s in sc]
        order = sorted(range(n_cand), key=lambda j: -means[j])
        b = order[0]
        ivs = {j: S.paired_interval(sc[b].logprob, sc[j].logprob, v.units, level) for j in order[1:]}
        close = [b] + [j for j in order[1:] if ivs[j].low <= 0]
        if ivs[order[-1]].low <= 0:
            return {"unused": True, "n_close": len(close)}
        nth = ivs[order[max_named]]
        Gv = int(v.units.max()) + 1
        return {"best": b, "n_close": len(close), "runner": ivs[order[1]], "nth": nth, "G": Gv, "m": v.scored}

    estimators = {"current": S.tokens_to_separate, "before": before}
    out = {}
    for n in sizes_prompts:
        rec = {k: {"slots": {}} for k in estimators}
        for _ in range(reps):
            perm = torch.randperm(G, generator=g)
            first = perm[:n]
            for i in range(len(table)):
                j0 = judge_view(View(full, first), i)
                if j0["n_close"] == 1 or j0.get("unused"):
                    continue  # separated already, or not used by the draft on this text: nothing to predict
                undetermined = j0["n_close"] > max_named
                iv = j0["nth"] if undetermined else j0["runner"]
                for name, est in estimators.items():
                    want = est(iv, j0["G"], j0["m"], level)
                    slot = rec[name]["slots"].setdefault(str(i), {"estimates": 0, "none": 0, "beyond": 0,
                                                                  "checked": 0, "came_true": 0, "ratios": []})
                    slot["estimates"] += 1
                    if want is None:
                        slot["none"] += 1
                        continue
                    k = math.ceil(want / per_prompt)
                    slot["ratios"].append(round(want / j0["m"], 2))
                    if k > G:
                        slot["beyond"] += 1
                        continue
                    sup = torch.cat([first, perm[n:][:max(0, k - n)]]) if k > n else first[:k]
                    j1 = judge_view(View(full, sup), i)
                    slot["checked"] += 1
                    slot["came_true"] += (not j1.get("unused") and
                                          (j1["n_close"] <= max_named if undetermined else j1["n_close"] == 1))
        for name in estimators:
            for s in rec[name]["slots"].values():
                s["share_true"] = s["came_true"] / s["checked"] if s["checked"] else None
                r = sorted(s.pop("ratios"))
                s["median_ratio"] = r[len(r) // 2] if r else None
        out[str(n)] = rec
    return out


def calibrate_into(rec: dict, table, args) -> None:
    """``--calibrate`` on ``table``, into ``rec`` and ``--out``."""
    t3 = time.perf_counter()
    rec["calibration"] = calibrate(table, [int(x) for x in args.calibrate_sizes.split(",")], args.calibrate)
    rec["calibration_seconds"] = round(time.perf_counter() - t3, 1)
    log(f"calibration: {json.dumps(rec['calibration'])}")
    Path(args.out).write_text(json.dumps(rec, indent=1, default=str))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default=str(ROOT / ".dev" / "specforge-default" / "draft"))
    ap.add_argument("--truth", default="B2,B15,B27")
    ap.add_argument("--sizes", default="40,80,160")
    ap.add_argument("--max-new", type=int, default=96)
    ap.add_argument("--ttt-steps", type=int, default=1, help="the judgement's training-time-test steps (CPU default 1)")
    ap.add_argument("--calibrate", type=int, default=0, help="random subsets per size for the estimate check")
    ap.add_argument("--calibrate-sizes", default="10,20,40")
    ap.add_argument("--table", default=None, help="save the largest size's per-slot table here; with "
                    "--calibrate-only, read it instead of running anything")
    ap.add_argument("--calibrate-only", action="store_true")
    ap.add_argument("--table-at", default=None, help="B0,B16,B27: no search; the per-slot table at this wiring on the "
                    "largest size's text, saved to --table, then --calibrate")
    ap.add_argument("--sequences", default=None, help="json cache of the target's continuations (skips generation)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.calibrate_only:
        rec = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
        if rec.get("sizes"):
            rec["predictions"] = predictions(rec["sizes"])
        t3 = time.perf_counter()
        rec["calibration"] = calibrate(Table.load(args.table), [int(x) for x in args.calibrate_sizes.split(",")],
                                       args.calibrate)
        rec["calibration_seconds"] = round(time.perf_counter() - t3, 1)
        log(f"calibration: {json.dumps(rec['calibration'])}")
        Path(args.out).write_text(json.dumps(rec, indent=1, default=str))
        return 0
    from eagle_audit.conventions import get_convention
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.infer import infer_wiring, starting_points
    from eagle_audit.fingerprint.corpus import searched_states
    from eagle_audit.fingerprint.score import capture_corpus
    from eagle_audit.source import as_source
    from eagle_audit.prompts import encode
    from eagle_audit.fingerprint.claims import compare
    from eagle_audit.resolution import resolve_trained, side_of
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target, materialise

    Recording.install()
    sizes = [int(x) for x in args.sizes.split(",")]
    truth = tuple(State(int(x.lstrip("B"))) for x in args.truth.split(","))
    prompts, parts = held_out_prompts()
    if max(sizes) > len(prompts):
        raise SystemExit(f"--sizes: at most {len(prompts)} held-out prompts")
    gguf = default_target()
    materialise(gguf)
    t0 = time.perf_counter()
    target = load_target(gguf)
    log(f"target loaded ({time.perf_counter() - t0:.1f}s)")
    rec = record(torch_threads=torch.get_num_threads(), args=vars(args),
                 draft=args.draft, truth=[s.label() for s in truth], prompts=parts, sizes=[])
    fixture = Path(args.draft).parent / "fixture.json"
    if fixture.is_file():
        rec["fixture"] = {k: v for k, v in json.loads(fixture.read_text()).items() if k in ("trainer", "truth", "machine")}
    t1 = time.perf_counter()
    ids = encode(prompts[:max(sizes)], target.tokenizer)
    as_source(target).reserve(searched_states(as_source(target)), next_tokens=True)  # as prepare_corpus does
    if args.sequences and Path(args.sequences).is_file():
        seqs = json.loads(Path(args.sequences).read_text())
        assert [s[:len(p)] for s, p in zip(seqs, ids)] == ids, f"{args.sequences}: other prompts"
        corpus = capture_corpus(target, seqs, searched_states(as_source(target)))
    else:
        from eagle_audit.fingerprint.corpus import continuations

        seqs = continuations(target, ids, args.max_new)
        if args.sequences:
            Path(args.sequences).write_text(json.dumps(seqs))
        corpus = capture_corpus(target, seqs, searched_states(as_source(target)))
    rec["corpus_seconds"] = round(time.perf_counter() - t1, 1)
    log(f"corpus: {max(sizes)} prompts, {corpus.tokens} tokens ({rec['corpus_seconds']}s)")
    spec = read_draft(args.draft)
    declared, trainer = resolve_trained(spec, target.info, [])
    engine = get_convention("sglang", "engine")
    served = side_of(engine, spec.config, target.info.architecture, target.info.num_layers)
    starts = starting_points(spec, target.info, declared.wiring, engine)
    cands = corpus.candidates
    idx = {s: j for j, s in enumerate(cands)}
    tw = tuple(idx[s] for s in truth)
    if args.table_at:
        from eagle_audit.runtime.eagle3 import load_draft_model
        from eagle_audit.fingerprint.score import Scorer

        t2 = time.perf_counter()
        at = tuple(idx[State(int(x.lstrip("B").split("+")[0]), normed=x.endswith("+norm"))] for x in args.table_at.split(","))
        table = Table.of(Scorer(load_draft_model(spec, target, declared.flags), sub_corpus(corpus, max(sizes))), at)
        if args.table:
            table.save(args.table)
        rec = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else rec
        rec["table"] = {"at": args.table_at, "prompts": max(sizes), "seconds": round(time.perf_counter() - t2, 1)}
        calibrate_into(rec, table, args)
        return 0
    for n in sizes:
        t2 = time.perf_counter()
        Recording.made.clear()
        c = sub_corpus(corpus, n)
        inf = infer_wiring(target, spec, c, starts, declared.flags, ttt_steps=args.ttt_steps)
        secs = time.perf_counter() - t2
        scorer = Recording.made[-1]
        size = {"prompts": n, "scored_tokens": inf.scored_tokens, "seconds": round(secs, 1),
                "confidence": inf.confidence, "top1": inf.top1, "baseline_top1": inf.baseline_top1,
                "truth_top1": scorer.score(tw).top1, "wirings_scored": inf.search.get("wirings_scored"),
                "ttt_steps": inf.search.get("ttt_steps"),
                "slots": [slot_record(sl, t, truth_neighbours(scorer, tw, cands, i))
                          for i, (sl, t) in enumerate(zip(inf.slots, truth))]}
        claims, findings, fix = compare(inf, spec, target.info, declared, trainer, served)
        size.update(best=[s.label() for s in inf.best], declared=[s.label() for s in declared.states],
                    claims=[c.to_json() for c in claims], findings=[f.code for f in findings],
                    errors=[f.code for f in findings if f.severity == "error"], fix=fix is not None and fix.possible)
        best = tuple(idx[s] for s in inf.best)
        for i, sl in enumerate(size["slots"]):
            sl["estimates"] = estimates(scorer, best, i)
        rec["sizes"].append(size)
        rec["predictions"] = predictions(rec["sizes"])
        log(f"{n} prompts, {inf.scored_tokens} tokens, {secs:.0f}s: "
            + "; ".join(f"{s['text']} [{s['outcome']}] sep {s['separate_tokens']} name {s['name_tokens']}"
                        for s in size["slots"]) + f"; errors {size['errors']}; fix {size['fix']}")
        Path(args.out).write_text(json.dumps(rec, indent=1, default=str))
        if n == max(sizes) and args.table:
            Table.of(scorer, tuple(idx[s] for s in inf.best)).save(args.table)
        if n == max(sizes) and args.calibrate:
            calibrate_into(rec, Table.of(scorer, tuple(idx[s] for s in inf.best)), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
