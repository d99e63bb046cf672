"""Which reading of fc's weights separates best (issue: the fingerprint reads the fc weights themselves), measured on
drafts of known wiring: the shipped demo draft, the fingerprint's test canaries (``tests/fingerprint/fp_canaries.py``)
and the six real-trainer fixtures (``tests/trainers/real_fixtures.py``, where built).

Per draft, statistic (:class:`eagle_audit.fingerprint.weights.Statistic`) and slot: what the weights name against
the truth: ``exact`` (the truth alone), ``with`` (named with others), ``wrong`` (a reading that excludes the truth),
``none`` (below the random-block null), with the truth's rank and the alignment margin. The corpus is the
fingerprint's default: the first 8 built-in chat prompts, 64 greedy new tokens.

    OMP_NUM_THREADS=2 python -m bench.evidence.weights_statistic --out bench/results/weights_statistic_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench._support import record


def drafts(target, cache: Path, fixtures: bool) -> dict[str, tuple[Path, tuple]]:
    from eagle_audit.demo import demo_draft
    from eagle_audit.states import State
    from tests.fingerprint.fp_canaries import CANARIES, train_all

    N = target.info.num_layers
    out = {"demo": (Path(demo_draft()), (State(0), State(3), State(16)))}
    for name, d in train_all(target, cache, log=print).items():
        b, final = CANARIES[name]
        out[f"canary {name}"] = (d, tuple(State(x, normed=final and x == N) for x in b))
    if fixtures:
        from tests.trainers import real_fixtures

        base = real_fixtures.root(cache)
        for name in real_fixtures.FIXTURES:
            f = base / name / "fixture.json"
            if f.is_file():
                info = json.loads(f.read_text())
                out[f"fixture {name}"] = (base / name / "draft", tuple(State(int(x[1:].split("+")[0]), normed=x.endswith("+norm")) for x in info["truth"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-fixtures", action="store_true")
    args = ap.parse_args()

    from eagle_audit.draft.fit import check_target_fit
    from eagle_audit.draft.read import read_draft
    from eagle_audit.fingerprint.corpus import prepare_corpus
    from eagle_audit.fingerprint.weights import Statistic, read_weights
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.resolution import resolve_trained
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.target import default_target, load_target

    cache = Path(os.environ.get("EAGLE_AUDIT_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    target = load_target(default_target())
    corpus = prepare_corpus(target, encode(load_prompts(None)[:8], target.tokenizer), 64)
    stats = [Statistic(k=k, centred=c, weighted=w) for k in (8, 16, 32, 64) for c in (False, True) for w in (False, True)]
    stats.append(Statistic(k=32, normed=False))
    rows, tally = [], {}
    for name, (ddir, truth) in drafts(target, cache, not args.no_fixtures).items():
        spec = read_draft(str(ddir))
        n = check_target_fit(spec, target.info)
        if n < 2:
            continue  # one slot: n * H_t == H, fc skipped
        declared, _ = resolve_trained(spec, target.info, [])
        draft = load_draft_model(spec, target, declared.flags)
        for st in stats:
            t0 = time.perf_counter()
            r = read_weights(draft, corpus, n, st)
            secs = time.perf_counter() - t0
            for sl, t in zip(r.slots, truth):
                cands = corpus.candidates
                order = sorted(range(len(cands)), key=lambda j: -sl.alignment[j])
                rank = [cands[j] for j in order].index(t) if t in cands else None
                out = ("none" if not sl.informed else "wrong" if t not in sl.candidates else
                       "exact" if len(sl.candidates) == 1 else "with")
                tally.setdefault(st.label(), {}).setdefault(out, 0)
                tally[st.label()][out] += 1
                rows.append({"draft": name, "statistic": st.label(), "slot": sl.index, "truth": t.label(),
                             "outcome": out, "named": [s.label() for s in sl.candidates] if sl.informed else [],
                             "truth_rank": rank, "best": sl.best.label(), "margin": sl.margin.to_json() if sl.margin else None,
                             "truth_alignment": round(sl.alignment_of(t), 4) if t in cands else None,
                             "null": round(sl.null, 4), "seconds": round(secs, 2)})
                print(f"{name:28s} {st.label():28s} slot {sl.index} truth {t.label():9s} {out:6s} rank {rank} "
                      f"named {sl.text()}", flush=True)
    for k, v in tally.items():
        print(f"{k:30s} {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(record(tally=tally, rows=rows), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
