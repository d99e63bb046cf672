"""eagle-audit runs DFlash drafts saved in the speculators 0.9.0 layout (``speculators_model_type: "dflash"``), checked
against speculators' own code executed from its wheel (installed ``--no-deps`` into the test cache):

* a tiny random ``DFlashDraftModel`` built with speculators' own classes (``DFlashSpeculatorConfig``,
  ``SpeculatorsConfig``, ``VerifierConfig``: the config ``from_training_args`` builds), its verifier the tiny Llama
  target; ``load_vocab_mappings`` and ``load_verifier_weights`` (the verifier's embedding and head, the head's rows
  marked in ``t2d`` for a reduced vocabulary), random body (and, reduced, a random own ``lm_head``), written with
  ``save_pretrained`` (the layout: no ``embed_tokens``, no ``verifier_*``, ``lm_head`` only for a reduced vocabulary,
  ``d2t`` / ``t2d``), read back with ``DFlashDraftModel.from_pretrained``;
* its ``_backbone_forward`` (the training forward ``forward`` runs: several anchors in one pass, its own anchor
  selection from ``loss_mask``, its mask from ``create_anchor_block_mask_mod``, eager attention) against
  eagle-audit's block forward (``eagle_audit/runtime/block.py``) loaded from the saved directory with the target:
  the logits of every block row, and the fingerprint scorer's view (the block anchored at t+1, its first drafted
  token), full and reduced vocabulary (reduced: logits over the draft vocabulary, a draft id i is target id
  i + d2t[i]); a perturbed weight is seen;
* ``eagle_audit.accept_rate`` end to end on the saved full-vocabulary draft and the tiny target.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests import wheels
from tests.accept.accept_tiny import HIDDEN, VOCAB, tiny_prompts, tiny_target, tiny_target_dir  # noqa: F401 (fixtures)
from eagle_audit.draft.read import read_draft
from eagle_audit.runtime.block import load_dflash_draft

pytestmark = [pytest.mark.full, pytest.mark.usefixtures("one_thread")]

BLOCK, MASK, AUX, DRAFT_VOCAB = 4, 7, (1, 3, 5), 512  # aux ids IN-k (speculators): B1, B3, B5


@pytest.fixture(scope="module")
def spec():
    """speculators 0.9.0's DFlash model and config classes, from the wheel."""
    from tests.trainers.conftest import import_trainers

    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    torch._dynamo.config.disable = True
    m = import_trainers(site, ("speculators.models.dflash", "speculators.config", "speculators.proposals.greedy"))
    d, c = m["speculators.models.dflash"], m["speculators.config"]
    return SimpleNamespace(Model=d.DFlashDraftModel, Config=d.DFlashSpeculatorConfig, SpeculatorsConfig=c.SpeculatorsConfig,
                           VerifierConfig=c.VerifierConfig, Greedy=m["speculators.proposals.greedy"].GreedyTokenProposalConfig)


def vocab_map(seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """A reduced vocabulary as speculators builds one (train/vocab_mapping.py): sorted target ids, offsets."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.cat([torch.arange(256), 256 + torch.randperm(VOCAB - 256, generator=g)[:DRAFT_VOCAB - 256]])
    keep = keep.sort().values
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[keep] = True
    return keep - torch.arange(DRAFT_VOCAB), t2d


def write_speculators_dflash(spec, verifier: Path, out: Path, reduced: bool, seed: int = 0) -> Path:
    import transformers as T

    tl = T.Qwen3Config(num_hidden_layers=2, hidden_size=HIDDEN, intermediate_size=128, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, vocab_size=VOCAB, rms_norm_eps=1e-6,
                       max_position_embeddings=512)
    tl._attn_implementation = "eager"
    sc = spec.SpeculatorsConfig(algorithm="dflash", proposal_methods=[spec.Greedy(speculative_tokens=BLOCK - 1)],
                                default_proposal_method="greedy",
                                verifier=spec.VerifierConfig(name_or_path=str(verifier), architectures=["LlamaForCausalLM"]))
    cfg = spec.Config(transformer_layer_config=tl, draft_vocab_size=DRAFT_VOCAB if reduced else VOCAB, block_size=BLOCK,
                      aux_hidden_state_layer_ids=list(AUX), mask_token_id=MASK, speculators_config=sc)
    model = spec.Model(cfg)
    if reduced:
        d2t, t2d = vocab_map()
        model.load_vocab_mappings(t2d, d2t)
    model.load_verifier_weights()  # the verifier's embedding, head (its t2d rows), final norm
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(("embed_tokens.", "verifier_")) or (name.startswith("lm_head.") and not reduced):
                continue
            if name.endswith("norm.weight"):  # all-ones norms would hide a norm applied in the wrong place
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            else:  # a reduced draft's own lm_head too: not the verifier's rows
                p.copy_(0.08 * torch.randn(p.shape, generator=g))
    model.save_pretrained(str(out))
    return out


def load_theirs(spec, path: Path):
    cfg = spec.Config.from_pretrained(str(path))
    cfg.transformer_layer_config._attn_implementation = "eager"
    return spec.Model.from_pretrained(str(path), config=cfg).eval()  # load_verifier_weights runs here


@pytest.fixture(scope="module")
def drafts(spec, tiny_target_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("speculators_dflash")
    return {name: write_speculators_dflash(spec, tiny_target_dir, root / name, reduced=name == "reduced")
            for name in ("full", "reduced")}


@pytest.mark.parametrize("vocab", ["full", "reduced"])
def test_speculators_forward_equals_ours(spec, drafts, tiny_target, vocab):
    path = drafts[vocab]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["speculators_model_type"] == "dflash" and "transformer_layer_config" in cfg
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), "pt") as f:
        saved = set(f.keys())
    assert not saved & {"embed_tokens.weight", "verifier_lm_head.weight", "verifier_norm.weight"}
    assert ("lm_head.weight" in saved) == (vocab == "reduced")

    theirs = load_theirs(spec, path)
    mine = load_dflash_draft(read_draft(str(path)), tiny_target)
    assert mine.arch.layout == "speculators" and mine.arch.block_size == BLOCK and mine.arch.mask_token_id == MASK
    rows = DRAFT_VOCAB if vocab == "reduced" else VOCAB
    g = torch.Generator().manual_seed(2)
    S, anchors = 12, [1, 4, 7]  # speculators never anchors in the last block_size positions (utils.py select_anchors)
    states = torch.randn(1, S, len(AUX) * HIDDEN, generator=g)  # [1, S, n*H]: the aux states, cat in id order
    input_ids = torch.randint(0, 256, (1, S), generator=g)
    loss_mask = torch.zeros(1, S, dtype=torch.long)
    loss_mask[0, anchors] = 1  # select_anchors takes every valid position when max_anchors is their count
    with torch.inference_mode():
        _, logits, *_ = theirs._backbone_forward(states, input_ids, loss_mask, torch.randn(1, S, HIDDEN, generator=g),
                                                 torch.zeros(1, S, dtype=torch.long), max_anchors=len(anchors))
        theirs_l = logits.view(len(anchors), BLOCK, -1)  # [A, bs, V_d]
        block = torch.full((1, len(anchors), BLOCK), MASK, dtype=torch.long)
        block[..., 0] = input_ids[0, anchors]
        mine_l = mine.logits(mine.blocks(mine.context(states), block, torch.tensor([anchors])))[0]  # [A, bs, V_d]
        # the scorer's view: position t = the block anchored at t+1 (token x[t+1]) over the states at 0..t
        step = mine(input_ids[:, 1:], mine.project(states[:, :S - 1]), projected=True).logits[0]  # [S-1, V_d]
    diff = float((mine_l - theirs_l).abs().max())
    print(f"speculators DFlash ({vocab} vocabulary): max |ours - speculators| over {len(anchors)} blocks = {diff:.2e}")
    assert theirs_l.shape == mine_l.shape == (len(anchors), BLOCK, rows)
    assert diff < 1e-5, diff
    assert float((step[[a - 1 for a in anchors]] - theirs_l[:, 1]).abs().max()) < 1e-5
    picked = theirs_l[:, 1:].argmax(-1)  # draft ids of the mask rows
    want = picked + theirs.d2t[picked] if vocab == "reduced" else picked  # speculators' draft -> target id
    assert torch.equal(mine.to_target_ids(mine_l[:, 1:].argmax(-1)), want)
    if vocab == "reduced":
        assert not torch.equal(mine.target_head, tiny_target.model.get_output_embeddings().weight[vocab_map()[1]])  # its own head
    with torch.no_grad():  # control: one weight off by a little is seen
        mine.layers[1].self_attn.v_proj.weight[0, 0] += 0.05
        off = mine.logits(mine.blocks(mine.context(states), block, torch.tensor([anchors])))[0]
    assert float((off - theirs_l).abs().max()) > 1e-4


def test_accept_rate_on_a_speculators_dflash_draft(drafts, tiny_target_dir):
    from eagle_audit import accept_rate

    result = accept_rate(tiny_target_dir, drafts["full"], engine="vllm", prompt_ids=tiny_prompts(2), max_new_tokens=12,
                         use_installed_engine=False)
    assert result.draft["kind"] == "dflash" and result.draft["layout"] == "speculators"
    assert [s.label() for s in result.trained.states] == ["B1", "B3", "B5"]  # IN-k ids, speculators' convention
    assert any(n.startswith("DFlash block drafting: 4-token blocks [bonus, 3 masks]") for n in result.settings.notes)
    for side in ("trained", "served"):
        stats = result.stats[side]
        assert len(stats.histogram) == BLOCK and 1.0 <= stats.accept_length <= BLOCK, (side, stats)
    print(f"accept-rate, speculators DFlash: trained {result.stats['trained'].accept_length:.3f}, served "
          f"{result.stats['served'].accept_length:.3f}")


def test_block_drafts_of_a_reduced_vocabulary_draft_are_target_ids(drafts, tiny_target):
    from eagle_audit.simulate.block import block_drafts
    from eagle_audit.states import State

    mine = load_dflash_draft(read_draft(str(drafts["reduced"])), tiny_target)
    states = tuple(State(b) for b in AUX)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 256, (16,), generator=g).tolist()
    caps = {s: torch.randn(len(ids), HIDDEN, generator=g) for s in states}
    out = block_drafts(mine, ids, caps, states, BLOCK - 1)
    assert set(sum(out, [])) <= set(mine.hot_ids.tolist())
