"""The SmolLM2 canaries the fingerprint tests recover: known wirings, short schedules, one shared data pass.

Every canary trains on the same text (built-in prompts 9-16 and the target's greedy continuations, 96
new tokens): :func:`train_all` generates it once, capturing the union of the states, and each canary
takes its own columns (``train_canary(data=...)``).
"""

from __future__ import annotations

import time
from pathlib import Path

#: name -> (boundaries, final_norm): the wirings the fingerprint must recover (N = 30 for SmolLM2)
CANARIES = {
    "emb-3-16": ((0, 3, 16), False),  # an embedding slot
    "2-15-27": ((2, 15, 27), False),  # SGLang's default for N = 30
    "5-12-29": ((5, 12, 29), False),
    "one-20": ((20,), False),  # one slot: n * H_t == H, so the engine (and training) skip fc
    "8-final": ((8, 30), True),  # the post-norm final state
}
VERSION = 2
#: step 0 only (ttt_steps 1): the fingerprint scores the first draft token, and one step trains ~3x faster
EPOCHS, TTT, MAX_NEW, DRAFT_VOCAB, LR, BATCH = 20, 1, 96, 2048, 3e-3, 2


def training_prompts(target) -> list[list[int]]:
    from eagle_audit.prompts import encode, load_prompts

    return encode(load_prompts(None)[8:16], target.tokenizer)


def train_all(target, root: Path, log=print) -> dict[str, Path]:
    """Train every missing canary under ``root`` (``<name>-v<VERSION>``); return name -> directory."""
    from eagle_audit.accept.canary import CanaryOptions, make_data, train_canary
    from eagle_audit.states import State

    N = target.info.num_layers
    dirs = {name: root / f"fp-canary-{name}-v{VERSION}" for name in CANARIES}
    missing = [n for n, d in dirs.items() if not (d / "config.json").is_file()]
    if not missing:
        return dirs
    union = tuple(sorted({State(b, normed=fn and b == N) for n in missing for b in CANARIES[n][0]
                          for fn in (CANARIES[n][1],)}))
    base = CanaryOptions(boundaries=(0,), epochs=EPOCHS, ttt_steps=TTT, max_new_tokens=MAX_NEW, draft_vocab=DRAFT_VOCAB, lr=LR,
                         batch_size=BATCH)
    t0 = time.perf_counter()
    data = make_data(target, training_prompts(target), base, union)
    log(f"canary data: {time.perf_counter() - t0:.1f}s")
    for name in missing:
        bounds, final = CANARIES[name]
        t1 = time.perf_counter()
        tmp = dirs[name].with_name(dirs[name].name + ".tmp")
        r = train_canary(target, [], CanaryOptions(**{**base.__dict__, "boundaries": bounds, "final_norm": final}),
                         tmp, data=(data, union))
        tmp.rename(dirs[name])
        log(f"canary {name}: {time.perf_counter() - t1:.1f}s, step-0 accuracy {r.first_token_accuracy:.3f}")
    return dirs
