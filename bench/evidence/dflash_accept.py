"""Simulated accept length of the SmolLM2 DFlash canaries (tests/fingerprint/dflash_canary.py, trained if missing into
the test cache), fed their trained wiring and a miswired one (each slot moved 3-8 layers), on their training prompts
(built-in 9-12) and on held-out ones (built-in 1-4), 48 new tokens: what `accept-rate` reports for a block draft
(docs/accept-rate.md, "Block drafts").

Run: python -m bench.evidence.dflash_accept [--out bench/results/dflash_accept_cpu.json]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench._support import record, write
MISWIRED = (5, 20, 24)  # the first n of these for an n-slot canary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from tests.fingerprint.dflash_canary import CANARIES, train_dflash_canary
    from eagle_audit.accept.run import AcceptOptions, run_accept
    from eagle_audit.prompts import encode, load_prompts
    from eagle_audit.states import State
    from eagle_audit.target import default_target, load_target

    torch.set_num_threads(1)
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    target = load_target(default_target())
    rows = []
    for text, sl in (("training prompts 9-12", slice(8, 12)), ("held-out prompts 1-4", slice(0, 4))):
        ids = tuple(map(tuple, encode(load_prompts(None)[sl], target.tokenizer)))
        for name in CANARIES:
            draft = train_dflash_canary(target, cache, name, log=lambda m: None)
            base = dict(target=str(target.info.name), draft=str(draft), prompt_ids=ids, max_new_tokens=48,
                        use_installed_engine=False)
            right = run_accept(AcceptOptions(**base), source=target)
            n = len(right.trained.states)
            wrong = run_accept(AcceptOptions(**base, trained_boundaries=tuple(State(b) for b in MISWIRED[:n])),
                               source=target)
            tr, wr = right.stats["trained"], wrong.stats["trained"]
            rows.append({"canary": name, "text": text, "block_drafts": right.settings.num_steps,
                         "trained": [s.label() for s in right.trained.states], "accept_length": tr.accept_length,
                         "per_position": list(tr.per_position), "verifies": tr.verify_steps,
                         "miswired": [s.label() for s in wrong.trained.states],
                         "miswired_accept_length": wr.accept_length})
            print(rows[-1], flush=True)
    write(record(rows=rows), args.out)


if __name__ == "__main__":
    main()
