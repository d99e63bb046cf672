"""accept-rate on a DSpark draft, end to end (a draft directory in the SpecForge layout, the tiny Llama target):
its block drafted left to right through the Markov head, gamma = block_size drafts a verify, equal to the rounds run
one at a time as an engine runs them (tests/accept/block_tiny.py ``engine_round``) on the target's own continuations.

The draft's vanilla Markov head holds the bigrams of those continuations (rank 72, one per previous token seen), its
bias far above the backbone's logits where it has a row: a draft that accepts only through the bias of its own
previous drafts, so a simulation that biased the first drafted token only would accept about one draft a verify."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from eagle_audit import accept_rate
from eagle_audit.draft.read import read_draft
from eagle_audit.runtime.block import DFlashArch, DFlashDraft, MarkovHead
from eagle_audit.states import State
from eagle_audit.runtime.load import load_draft
from eagle_audit.simulate.accept import capture_cases, make_cases, stats_from_gains

from tests.accept.accept_tiny import HIDDEN, N_LAYERS, VOCAB, tiny_prompts
from tests.accept.block_tiny import engine_round

pytestmark = pytest.mark.usefixtures("one_thread")

BLOCK, MASK, RANK, IDS = 4, 7, 72, (0, 2, 4)  # ids OUT-k: B1, B3, B5
PROMPTS, NEW = tiny_prompts(4), 32


def write_dspark(out: Path, bigrams: dict[int, int], seed: int = 3) -> Path:
    cfg = {"architectures": ["DSparkDraftModel"], "model_type": "qwen3", "hidden_size": HIDDEN, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
           "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "num_target_layers": N_LAYERS, "block_size": BLOCK,
           "dflash_config": {"target_layer_ids": list(IDS), "mask_token_id": MASK, "block_size": BLOCK,
                             "markov_rank": RANK, "markov_head_type": "vanilla"}}
    arch = DFlashArch(hidden_size=HIDDEN, target_hidden_size=HIDDEN, num_aux=len(IDS), num_layers=1, num_heads=4,
                      num_kv_heads=2, head_dim=16, intermediate_size=128, eps=1e-6, rope_theta=10000.0,
                      block_size=BLOCK, mask_token_id=MASK, markov="vanilla", markov_rank=RANK, dspark=True,
                      sample_from_anchor=True)
    model = DFlashDraft(arch)
    model.markov_head = MarkovHead(arch, VOCAB)
    g = torch.Generator().manual_seed(seed)
    sd = {k: (1 + 0.3 * torch.randn(v.shape, generator=g)) if k.endswith("norm.weight")
          else 0.1 * torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
    sd["markov_head.markov_w1.weight"] = torch.zeros(VOCAB, RANK)
    sd["markov_head.markov_w2.weight"] = torch.zeros(VOCAB, RANK)
    assert len(bigrams) <= RANK
    for k, (prev, nxt) in enumerate(sorted(bigrams.items())):
        sd["markov_head.markov_w1.weight"][prev, k] = 100.0
        sd["markov_head.markov_w2.weight"][nxt, k] = 100.0
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(cfg))
    save_file(sd, str(out / "model.safetensors"))
    return out


@pytest.fixture(scope="module")
def cases(tiny_target):
    return make_cases(tiny_target, PROMPTS, NEW)[0]


@pytest.fixture(scope="module")
def dspark_dir(cases, tmp_path_factory):
    seen = collections.defaultdict(collections.Counter)
    for c in cases:
        ids = c.ids[len(c.prompt) - 1:]
        for a, b in zip(ids, ids[1:]):
            seen[a][b] += 1
    return write_dspark(tmp_path_factory.mktemp("dspark") / "draft", {a: n.most_common(1)[0][0] for a, n in seen.items()})


def test_accept_rate_on_a_dspark_draft(tiny_target, tiny_target_dir, dspark_dir, cases):
    result = accept_rate(tiny_target_dir, dspark_dir, prompt_ids=PROMPTS, max_new_tokens=NEW,
                         use_installed_engine=False)
    assert result.draft["kind"] == "dspark" and result.settings.num_steps == BLOCK
    assert any(n.startswith("DSpark block drafting: 4-token blocks [bonus, 3 masks], every row drafting") for n in
               result.settings.notes), result.settings.notes
    trained = result.stats["trained"]
    assert [s.label() for s in result.trained.states] == ["B1", "B3", "B5"] and len(trained.histogram) == BLOCK + 1

    states = (State(1), State(3), State(5))
    draft = load_draft(read_draft(str(dspark_dir)), tiny_target, None)
    caps = capture_cases(tiny_target, cases, states)
    gains = []
    for case, cap in zip(cases, caps):  # the engine's rounds, one at a time
        ids, L, gs = case.ids, len(case.prompt), []
        while L < len(ids) - 1:
            d = engine_round(draft, ids, cap, L, states)
            k = next((i for i, t in enumerate(d) if L + i + 1 >= len(ids) or t != ids[L + i + 1]), len(d))
            gs.append(min(k + 1, len(ids) - 1 - L))
            L += gs[-1]
        gains.append(gs)
    ref = stats_from_gains(gains, BLOCK, cases)
    assert trained.gains == ref.gains and trained.accept_length == pytest.approx(ref.accept_length)
    assert trained.accept_length > 2.5 and trained.per_position[2] > 0.3, trained  # the chained bias drafts on


def test_a_wiring_already_simulated_is_not_simulated_again(tiny_target_dir, dspark_dir, monkeypatch):
    """The same model on the same states is simulated once: served = trained gives one simulation and the same
    figures on both sides, and a single-slot fix that gives the trained wiring back is the trained figure (issue 34
    item 5: the second, identical block simulation was 1.4 s of the DFlash canary's 23 s)."""
    import eagle_audit.accept.run as run

    calls = []
    real = run.simulate
    monkeypatch.setattr(run, "simulate", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    result = accept_rate(tiny_target_dir, dspark_dir, prompt_ids=PROMPTS[:2], max_new_tokens=8,
                         use_installed_engine=False)
    assert result.trained.states == result.served.states and len(calls) == 1
    assert result.stats["served"] == result.stats["trained"] and result.verdict == "match"

    # one slot mis-wired: fixing it gives the trained wiring back, whose figures are not simulated again
    served = result.served.states
    other = next(b for b in range(1, 5) if State(b) not in served)
    trained = (State(other),) + tuple(served[1:])
    calls.clear()
    result = accept_rate(tiny_target_dir, dspark_dir, prompt_ids=PROMPTS[:2], max_new_tokens=8,
                         use_installed_engine=False, trained_boundaries=trained)
    assert len(result.attribution) == 1 and tuple(calls) == (trained, served), calls
    assert result.attribution[0].accept_length == result.stats["trained"].accept_length
