"""Small CPU-trained drafts of both real trainers, cached in the test cache (issue 18, part 2).

Six SmolLM2-135M-Instruct drafts, each trained by the trainer's own loop (``real_drafts.py``: speculators
0.9.0; ``specforge_drafts.py``: SpecForge 0.2.0's data preparation, ``specforge train`` and ``specforge
export``; each module says what runs from the wheel and what is swapped), on the trainer's default wiring and
one explicit wiring (4 epochs), and one 12-epoch checkpoint of each (:data:`FIXTURES`), on the same small text:
the target's own responses to the first :data:`TRAIN_PROMPTS` chat prompts of ``bench/data/canary_prompts.jsonl``
(SpecForge's chat template). The held-out prompts are the last
:data:`EVAL_PROMPTS` of that file (never trained on).

Each fixture is ``<cache>/trainer-fixtures-v<VERSION>/<name>/``: ``draft/`` (the trainer's own layout:
speculators' checkpoint folder, SpecForge's SGLang export) and ``fixture.json`` (the trainer, the ids it was
given, the true states, what its training measured). Built once (about 20 minutes on 1 CPU thread; every core
this process may use by default, :func:`build_threads`), then reused;
bump :data:`VERSION` when anything here changes.

    python -m tests.trainers.real_fixtures      # build (or list) the fixtures, print where they are
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent

from tests.trainers import real_drafts, specforge_drafts

VERSION = 1
TRAIN_PROMPTS, SAMPLES, MAX_NEW = 32, 2, 48
EVAL_PROMPTS, EVAL_MAX_NEW = 8, 48
CONFIRM_PROMPTS = 8  # the fingerprint's confirmation: the 8 prompts before the held-out ones (never trained on)
DRAFT_VOCAB = 2048
#: name -> (trainer, ids as given to it: None = its default[, what differs from its schedule below]). The
#: 12-epoch ones are the later checkpoints issue 27 was found on (SpecForge on [B1, B3, B16] for 12 epochs: a slot
#: named without its truth); SpecForge's ids are layer outputs (id k = B(k+1))
FIXTURES = {"specforge-default": ("specforge", None), "specforge-5-12-21": ("specforge", [5, 12, 21]),
            "speculators-default": ("speculators", None), "speculators-4-11-24": ("speculators", [4, 11, 24]),
            "specforge-0-2-15-e12": ("specforge", [0, 2, 15], {"epochs": 12}),
            "speculators-default-e12": ("speculators", None, {"epochs": 12})}
SPECULATORS = dict(epochs=4, lr=3e-3, total_seq_len=1024, attn="eager")
SPECFORGE = dict(epochs=4, lr=3e-3, batch_size=2, max_length=512, attention="sdpa")
PROMPTS = HERE.parent.parent / "bench" / "data" / "canary_prompts.jsonl"


def root(cache: Path) -> Path:
    return cache / f"trainer-fixtures-v{VERSION}"


def eval_prompts():
    from eagle_audit.prompts import load_prompts

    return load_prompts(str(PROMPTS))[-EVAL_PROMPTS:]


def confirm_prompts():
    """The confirmation's prompts (the fingerprint's other text): disjoint from the training and held-out ones."""
    from eagle_audit.prompts import load_prompts

    return load_prompts(str(PROMPTS))[-EVAL_PROMPTS - CONFIRM_PROMPTS:-EVAL_PROMPTS]


def build(target, target_dir: str, cache: Path, names=tuple(FIXTURES), log=print) -> dict[str, Path]:
    """Every fixture of ``names`` under :func:`root` (built where missing, with :func:`build_threads` threads; a
    half-built one is rebuilt)."""
    base = root(cache)
    todo = [n for n in names if not (base / n / "fixture.json").is_file()]
    before = torch.get_num_threads()
    if todo:
        torch.set_num_threads(build_threads())
    try:
        return _build(target, target_dir, base, names, todo, log)
    finally:
        torch.set_num_threads(before)


def build_threads() -> int:
    """Intra-op threads for building the fixtures: $EAGLE_AUDIT_BUILD_THREADS, else every core this process may
    use (CI's machine runs nothing beside the test session; the tests themselves keep 1 thread, tests/conftest.py).
    The fixtures' weights depend on it only as float sums do on their order: the tests hold on either."""
    if os.environ.get("EAGLE_AUDIT_BUILD_THREADS"):
        return max(1, int(os.environ["EAGLE_AUDIT_BUILD_THREADS"]))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _build(target, target_dir: str, base: Path, names, todo, log) -> dict[str, Path]:
    from tests import wheels
    from eagle_audit.prompts import load_prompts

    if todo:
        torch.manual_seed(0)
        site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
        sf = specforge_drafts.import_specforge(site, wheels.sglang_wheel(wheels.SPECFORGE_SGLANG_VERSION))
        sp = real_drafts.import_speculators(site)
        prompts = load_prompts(str(PROMPTS))[:TRAIN_PROMPTS]
        assert not set(prompts) & set(eval_prompts())
        t0 = time.perf_counter()
        text = base / "responses.json"  # the generation is the slowest step on a loaded CPU: kept
        if text.is_file():
            convs, seqs = json.loads(text.read_text())
            seqs = [tuple(x) for x in seqs]
        else:
            convs, seqs = specforge_drafts.regenerate(target, prompts, MAX_NEW, SAMPLES,
                                                      sf.templates.get(specforge_drafts.CHAT_TEMPLATE).system_prompt)
            base.mkdir(parents=True, exist_ok=True)
            text.write_text(json.dumps([convs, seqs]))
        log(f"trainer fixtures: {len(seqs)} responses ({time.perf_counter() - t0:.0f}s)")
        for name in todo:
            trainer, ids, *more = FIXTURES[name]
            schedule = {**(SPECFORGE if trainer == "specforge" else SPECULATORS), **(more[0] if more else {})}
            work = base / f"{name}.tmp{os.getpid()}"
            shutil.rmtree(work, ignore_errors=True)
            t1 = time.perf_counter()
            if trainer == "specforge":
                prep = specforge_drafts.prepare(sf, target, target_dir, convs, work, ids, draft_vocab=DRAFT_VOCAB,
                                                max_length=SPECFORGE["max_length"], log=log)
                rec = specforge_drafts.train(sf, target_dir, prep, work, log=log, **schedule)
                truth = prep["states"]
                shutil.copytree(rec["checkpoint"], work / "draft")
                measured = {"eval": rec["eval"], "eval_history": rec["eval_history"], "capture_ids": prep["capture_ids"]}
                for sub in ("hidden_states", "eval_hidden_states", "run", "export", "cache", "target"):
                    shutil.rmtree(work / sub, ignore_errors=True)
            else:
                resolved = sp.resolve_target_layer_ids(ids, target_dir)
                samples = real_drafts.capture(target, seqs, resolved, torch.float32)
                rec = real_drafts.train_speculators(sp, target, target_dir, samples, ids, work / "run",
                                                    draft_vocab=DRAFT_VOCAB, dtype=torch.float32, log=log,
                                                    **schedule)
                truth = [real_drafts.state_of_id(k).label() for k in resolved]
                shutil.copytree(rec["checkpoint"], work / "draft")
                shutil.rmtree(work / "run", ignore_errors=True)
                measured = {"val": rec["val"], "layer_ids": rec["layer_ids"]}
            info = {"trainer": {"specforge": "specforge 0.2.0", "speculators": "speculators 0.9.0"}[trainer],
                    "engine": {"specforge": "sglang", "speculators": "vllm"}[trainer], "ids_given": ids,
                    "truth": truth, "measured": measured, "train_sequences": len(seqs), "schedule": schedule,
                    "seconds": round(time.perf_counter() - t1, 1), "torch": torch.__version__}
            (work / "fixture.json").write_text(json.dumps(info, indent=1, default=str))
            final = base / name
            shutil.rmtree(final, ignore_errors=True)
            work.rename(final)
            log(f"trainer fixture {name}: truth {truth}, {info['seconds']}s")
    return {n: base / n for n in names}


def load(path: Path) -> dict:
    return json.loads((path / "fixture.json").read_text())


if __name__ == "__main__":  # pragma: no cover - manual build
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    os.environ.setdefault("EAGLE_AUDIT_CACHE", str(cache))  # the GGUF conversion the tests made
    from eagle_audit.target import default_target, load_target, materialise

    gguf = default_target()
    target_dir = str(materialise(gguf))
    tgt = load_target(target_dir, "cpu", "float32")
    for n, p in build(tgt, target_dir, cache).items():
        print(n, p, load(p)["truth"], load(p)["measured"])
