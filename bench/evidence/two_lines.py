"""Both lines of the fingerprint's evidence, per slot, on every draft of known wiring here: the shipped demo draft,
the fingerprint's canaries (tests/fingerprint/fp_canaries.py, dflash_canary.py) and the six real-trainer fixtures
(tests/trainers/real_fixtures.py, where built). Each draft is fingerprinted as a user's run does it
(``run_fingerprint``, defaults: search, second round, confirmation); per slot the table gives the truth, what the
draft's function reads (``function``), what fc's weights read (``weights``), the one verdict (``state``), which
line(s) decided it (``lines``) and whether the verdict is decided, right or wrong (a named slot whose states do not
hold the truth). The canaries and the demo take the default corpus (built-in prompts 1-8; they trained on 9-16);
the fixtures take the prompts their test takes (real_fixtures.eval_prompts / confirm_prompts, never trained on).

    OMP_NUM_THREADS=1 python -m bench.evidence.two_lines --out bench/results/two_lines_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench._support import record, write


def _state(label: str):
    from eagle_audit.states import State

    return State(int(label[1:].split("+")[0]), normed=label.endswith("+norm"))


def drafts(target, cache: Path, fixtures: bool):
    """name -> (draft directory, truth, extra FingerprintOptions fields)."""
    from eagle_audit.demo import demo_draft
    from eagle_audit.states import State
    from tests.fingerprint.dflash_canary import CANARIES as DFLASH, boundaries, train_dflash_canary
    from tests.fingerprint.fp_canaries import CANARIES, train_all

    N = target.info.num_layers
    out = {"demo": (Path(demo_draft()), (State(0), State(3), State(16)), {})}
    for name, d in train_all(target, cache, log=print).items():
        b, final = CANARIES[name]
        out[f"canary {name}"] = (d, tuple(State(x, normed=final and x == N) for x in b), {})
    for name in DFLASH:
        d = train_dflash_canary(target, cache, name, log=print)
        out[f"dflash {name}"] = (d, tuple(State(b) for b in boundaries(name)), {})
    if fixtures:
        from tests.trainers import real_fixtures
        from eagle_audit.prompts import encode

        ids = lambda prompts: tuple(tuple(p) for p in encode(prompts, target.tokenizer))  # noqa: E731
        base = real_fixtures.root(cache)
        for name in real_fixtures.FIXTURES:
            f = base / name / "fixture.json"
            if f.is_file():
                info = json.loads(f.read_text())
                extra = dict(engine=info["engine"], max_new_tokens=real_fixtures.EVAL_MAX_NEW,
                             prompt_ids=ids(real_fixtures.eval_prompts()),
                             confirm_prompt_ids=ids(real_fixtures.confirm_prompts()))
                out[f"fixture {name}"] = (base / name / "draft", tuple(_state(x) for x in info["truth"]), extra)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-fixtures", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated draft names (as in the table) to run")
    args = ap.parse_args()

    from eagle_audit.fingerprint.options import FingerprintOptions
    from eagle_audit.fingerprint.run import run_fingerprint
    from eagle_audit.target import default_target, load_target

    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    target = load_target(default_target())
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for name, (ddir, truth, extra) in drafts(target, cache, not args.no_fixtures).items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        opts = FingerprintOptions(target=str(target.info.name), draft=str(ddir), use_installed_engine=False,
                                  **extra)
        res = run_fingerprint(opts, source=target)
        secs = round(time.perf_counter() - t0, 1)
        for sl, t in zip(res.slots, truth):
            j = sl.to_json()
            # what a user is told: a named slot of a trusted wiring, or one fc's weights name alone where no wiring
            # makes the draft's function agree (REPRESENTATION_MISMATCH: FingerprintResult.weights_alone)
            named = not (sl.undetermined or sl.unused or sl.uninformed) and (
                res.inferred is not None or sl in res.weights_alone)
            rows.append({"draft": name, "slot": sl.index, "truth": t.label(), "function": j["function"],
                         "weights": j["weights"], "state": j["text"], "lines": j["lines"], "decided": named,
                         "right": (not named) or sl.admits(t), "exact": named and sl.candidates == (t,),
                         "seconds": secs, "findings": sorted({f.code for f in res.findings})})
            print(json.dumps(rows[-1]), flush=True)
    decided = sum(r["decided"] for r in rows)
    wrong = sum(not r["right"] for r in rows)
    print(f"{decided} of {len(rows)} slots decided, {sum(r['exact'] for r in rows)} exact, {wrong} wrong", flush=True)
    write(record(rows=rows, decided=decided, slots=len(rows), wrong=wrong), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
