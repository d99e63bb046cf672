"""Simulated accept length of the SmolLM2 DSpark canary (tests/accept/dspark_canary.py: SpecForge 0.2.0's own DSpark
training, trained if missing into the test cache), on its training prompts (built-in 9-12) and held-out ones (1-4),
48 new tokens: fed its trained wiring and a miswired one (each slot moved 3-8 layers), and drafted from the rows the
engines draft by default (``sample_from_anchor`` true: the anchor's row first, B drafts a verify) against the DFlash
rows SpecForge's own ``spec_generate`` drafts (``sample_from_anchor`` false). What `accept-rate` reports for a DSpark
draft (docs/accept-rate.md, "DSpark").

Run: python -m bench.evidence.dspark_accept [--out bench/results/dspark_accept_cpu.json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench._support import record, write
MISWIRED = (5, 20, 24)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from tests.accept.dspark_canary import CANARIES, fill_in_copy, train_dspark_canary
    from eagle_audit.accept.run import AcceptOptions, run_accept
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target

    torch.set_num_threads(1)
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    target = load_target(default_target())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in CANARIES:
            canary = train_dspark_canary(target, cache, name, log=lambda m: print(m, flush=True))
            fill_in = fill_in_copy(canary, Path(tmp) / name)
            for text, sl in (("training prompts 9-12", slice(8, 12)), ("held-out prompts 1-4", slice(0, 4))):
                ids = tuple(map(tuple, encode(load_prompts(None)[sl], target.tokenizer)))
                for rows_used, draft in (("anchor (sample_from_anchor true)", canary),
                                         ("fill-in (sample_from_anchor false)", fill_in)):
                    base = dict(target=str(target.info.name), draft=str(draft), prompt_ids=ids, max_new_tokens=48,
                                use_installed_engine=False)
                    right = run_accept(AcceptOptions(**base), source=target)
                    wrong = run_accept(AcceptOptions(**base, trained_boundaries=tuple(State(b) for b in MISWIRED)),
                                       source=target)
                    tr, wr = right.stats["trained"], wrong.stats["trained"]
                    rows.append({"canary": name, "text": text, "rows": rows_used,
                                 "block_drafts": right.settings.num_steps,
                                 "trained": [s.label() for s in right.trained.states],
                                 "accept_length": tr.accept_length, "per_position": list(tr.per_position),
                                 "verifies": tr.verify_steps, "miswired": [s.label() for s in wrong.trained.states],
                                 "miswired_accept_length": wr.accept_length,
                                 "miswired_per_position": list(wr.per_position)})
                    print(rows[-1], flush=True)
    write(record(rows=rows), args.out)


if __name__ == "__main__":
    main()
