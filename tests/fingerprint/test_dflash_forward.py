"""eagle-audit's DFlash block-draft forward (eagle_audit/runtime/block.py) against the wheels' own forwards,
on one random-weight tiny draft and random target states:

* z-lab ``dflash`` 0.1.0 (``dflash/model.py``, installed ``--no-deps`` into the test cache): ``DFlashDraftModel``
  built from the config, its weights saved with ``save_pretrained`` and read back by eagle-audit; the inference
  call of ``dflash_generate`` (one block after the context, the target's embedding through
  ``_raw_input_embeddings`` with ``input_embedding_scale``, ``compute_logits`` with ``output_multiplier`` and
  softcapping), bidirectional and ``is_causal`` blocks;
* SpecForge 0.2.0 DSpark (``modeling/draft/dspark.py`` ``DSparkDraftModel``, each Markov head kind): the
  fingerprint's first drafted token against the row ``OnlineDSparkModel.forward`` trains for it (the anchor's, the
  row both engines draft it from by default), and the block forward and ``markov_head.sample_block_tokens``'s
  corrected logits of the mask rows, as ``_sample_draft_tokens`` calls them in ``spec_generate``;
* SpecForge 0.2.0: ``OnlineDFlashModel._forward_draft_blocks`` (``algorithms/common/dflash_family_model.py``, its
  training forward: many anchors in one pass, its own anchor sampling and sdpa mask) on its own
  ``DFlashDraftModel`` (``modeling/draft/dflash.py``).

Logits (and hidden states) equal to 1e-5; a control draft with one weight perturbed differs by more.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests import wheels
from eagle_audit.runtime.eagle3 import read_weights
from eagle_audit.draft.read import read_draft
from eagle_audit.runtime.block import build_dflash_draft, dflash_arch

pytestmark = pytest.mark.full

H, N_TARGET, VOCAB, MASK = 64, 6, 300, 7


@pytest.fixture(scope="module")
def zlab():
    return wheels.import_from(wheels.installed(wheels.dflash_wheel()), "dflash.model")


@pytest.fixture(scope="module")
def specforge():
    from tests.trainers.conftest import import_trainers  # the wheel's modules, with the stubs restored after
    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    return import_trainers(site, ("specforge.algorithms.common.dflash_family_model",
                                  "specforge.modeling.draft.dflash", "specforge.modeling.draft.dspark"))


def qwen3_config(layers: int = 2, block: int = 4, ids=(0, 2, 4), **dflash):
    import transformers as T

    cfg = T.Qwen3Config(num_hidden_layers=layers, hidden_size=H, intermediate_size=128, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, vocab_size=VOCAB, rms_norm_eps=1e-6,
                        num_target_layers=N_TARGET, block_size=block, max_position_embeddings=512)
    cfg.architectures = ["DFlashDraftModel"]
    cfg.dflash_config = {"target_layer_ids": list(ids), "mask_token_id": MASK, "block_size": block, **dflash}
    return cfg


def randomize(model, seed: int) -> None:
    """Random weights everywhere, norms included (all-ones norms would hide a norm applied in the wrong place)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


def ours(model_dir: Path, embed: torch.Tensor, head: torch.Tensor):
    spec = read_draft(str(model_dir))
    return build_dflash_draft(dflash_arch(spec, H), read_weights(model_dir), embed, head, str(model_dir))


def tiny_target_head(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(VOCAB, H, generator=g), 0.1 * torch.randn(VOCAB, H, generator=g)  # embedding, lm_head


class _Target(torch.nn.Module):
    """What z-lab's helpers read off a target: ``get_input_embeddings`` and ``lm_head``."""

    def __init__(self, embed, head):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding.from_pretrained(embed)
        self.lm_head = torch.nn.Linear(H, VOCAB, bias=False)
        self.lm_head.weight.data.copy_(head)

    def get_input_embeddings(self):
        return self.embed_tokens


@pytest.mark.parametrize("extra", [{}, {"is_causal": True},
                                   {"input_embedding_scale": 1.7, "output_multiplier": 0.6,
                                    "final_logit_softcapping": 3.0}], ids=["bidirectional", "causal", "scaled"])
def test_zlab_inference_block_equals_ours(zlab, tmp_path, extra):
    cfg = qwen3_config(layers=2, block=4)
    if "is_causal" in extra:
        cfg.is_causal = True
    else:
        cfg.dflash_config.update(extra)
    model = zlab.DFlashDraftModel(cfg).eval()
    randomize(model, 0)
    model.save_pretrained(tmp_path / "d")
    embed, head = tiny_target_head()
    target = _Target(embed, head)
    mine = ours(tmp_path / "d", embed, head)
    g = torch.Generator().manual_seed(2)
    S, bs = 11, 4
    states = torch.randn(1, S, 3 * H, generator=g)  # [1, S, n*H_t]: the target's states at positions 0..S-1
    block = torch.tensor([[42] + [MASK] * (bs - 1)])  # anchor token x_S + mask tokens
    with torch.inference_mode():
        # dflash_generate's draft call (dflash/model.py): embedding, positions of context + block, head
        noise = zlab._raw_input_embeddings(target, block, float(zlab._draft_value(model.config,
                                                                                   "input_embedding_scale", 1.0)))
        theirs_h = model(target_hidden=states, noise_embedding=noise, position_ids=torch.arange(S + bs)[None])
        theirs = model.compute_logits(theirs_h, zlab._output_head(target))  # [1, bs, V]
        mine_h = mine.blocks(mine.context(states), block[:, None], torch.tensor([[S]]))[:, 0]  # [1, bs, H]
        logits = mine.logits(mine_h)
    assert mine_h.shape == theirs_h.shape and logits.shape == theirs.shape
    assert (mine_h - theirs_h).abs().max() < 1e-5
    assert (logits - theirs).abs().max() < 1e-5, float((logits - theirs).abs().max())
    # the scorer's view: position t = the block anchored at t+1 over states 0..t; its last position is the above
    ids = torch.randint(0, VOCAB, (1, S), generator=g)
    ids[0, S - 1] = 42
    with torch.inference_mode():
        step = mine(ids, mine.project(states), projected=True).logits  # [1, S, V]
    assert (step[0, S - 1] - theirs[0, 1]).abs().max() < 1e-5
    # control: one weight off by a little is seen
    with torch.no_grad():
        mine.layers[0].self_attn.k_proj.weight[0, 0] += 0.05
        off = mine.logits(mine.blocks(mine.context(states), block[:, None], torch.tensor([[S]]))[:, 0])
    assert (off - theirs).abs().max() > 1e-4


def test_specforge_training_forward_equals_ours(specforge, tmp_path):
    fam = specforge["specforge.algorithms.common.dflash_family_model"]
    draft_mod = specforge["specforge.modeling.draft.dflash"]
    bs = 4
    cfg = qwen3_config(layers=2, block=bs, ids=(1, 3))
    cfg._attn_implementation = "sdpa"
    model = draft_mod.DFlashDraftModel(cfg).eval()
    randomize(model, 3)
    model.save_pretrained(tmp_path / "sf")
    embed, head = tiny_target_head(4)
    target = _Target(embed, head)
    online = fam.OnlineDFlashModel(model, target.lm_head, target.embed_tokens, MASK, block_size=bs,
                                   attention_backend="sdpa", num_anchors=6)
    g = torch.Generator().manual_seed(5)
    B, S = 2, 17
    ids = torch.randint(0, VOCAB, (B, S), generator=g)
    states = torch.randn(B, S, 2 * H, generator=g)
    loss_mask = torch.ones(B, S)
    loss_mask[1, 12:] = 0  # the second case is shorter: fewer anchors, some blocks not kept
    torch.manual_seed(6)
    with torch.inference_mode():
        anchors, keep, out = online._forward_draft_blocks(ids, states, loss_mask)  # out [B, A*bs, H]
    A = anchors.shape[1]
    out = out.view(B, A, bs, H)
    mine = ours(tmp_path / "sf", embed, head)
    block = torch.full((B, A, bs), MASK)
    block[..., 0] = ids.gather(1, anchors)
    with torch.inference_mode():
        h = mine.blocks(mine.context(states), block, anchors)  # [B, A, bs, H]
    assert keep.sum() >= 8 and int(anchors.max()) > 8  # several anchors, deep into the context
    diff = (h - out).abs().amax(dim=(-1, -2))[keep]
    assert float(diff.max()) < 1e-5, diff
    la, lb = target.lm_head(out[keep]), mine.logits(h[keep])
    assert (la - lb).abs().max() < 1e-5


@pytest.mark.parametrize("head", ["vanilla", "gated", "rnn"])
def test_specforge_dspark_first_token_equals_ours(specforge, tmp_path, head):
    """The fingerprint's DSpark first token (``mine(ids, states)``, the scorer's view) is the row SpecForge's own DSpark
    loss trains for it and both engines draft it from by default (``sample_from_anchor`` absent: true): row 0, the
    anchor's, its Markov previous token the anchor (``OnlineDSparkModel.forward``: labels at anchor + 1..B,
    ``dflash_family_model.py:764-767``, previous tokens [anchor, labels...], ``:1094-1097``). The trainer's whole
    forward runs with one supervised anchor and one supervised label, so its loss is that row's cross-entropy on the
    label; every label of the vocabulary gives its log-softmax. Control: the same weights drafting from the mask rows
    (``sample_from_anchor`` false) differ. ``spec_generate``'s call (rows 1..B-1, the anchor as the Markov head's
    first previous token) still equals :meth:`blocks` + :meth:`logits` on row 1."""
    dspark = specforge["specforge.modeling.draft.dspark"]
    fam = specforge["specforge.algorithms.common.dflash_family_model"]
    bs = 4
    cfg = qwen3_config(layers=1, block=bs, ids=(0, 3), markov_rank=8, markov_head_type=head)
    cfg.architectures = ["DSparkDraftModel"]
    cfg._attn_implementation = "sdpa"
    model = dspark.DSparkDraftModel(cfg).eval()
    randomize(model, 7)
    model.save_pretrained(tmp_path / "ds")
    embed, head_w = tiny_target_head(8)
    target = _Target(embed, head_w)
    spec = read_draft(str(tmp_path / "ds"))
    assert spec.kind == "dspark"
    mine = ours(tmp_path / "ds", embed, head_w)
    assert mine.arch.sample_from_anchor and mine.arch.first_draft_row == 0 and mine.arch.engine_block == bs
    g = torch.Generator().manual_seed(9)
    S = 9  # the anchor's position: context = the states at 0..S-1
    states = torch.randn(1, S + 2, 2 * H, generator=g)
    ids = torch.randint(0, VOCAB, (1, S + 2), generator=g)
    ids[0, S] = 17  # the anchor token
    # the trainer: one valid anchor (S: loss_mask at S and S+1), one label (S+1), its loss = CE of row 0 on it
    online = fam.OnlineDSparkModel(model, target.lm_head, target.embed_tokens, MASK, block_size=bs,
                                   attention_backend="sdpa", num_anchors=4, dspark_ce_loss_alpha=1.0,
                                   dspark_l1_loss_alpha=0.0, dspark_confidence_head_alpha=0.0)
    loss_mask = torch.zeros(1, S + 2)
    loss_mask[0, S:] = 1
    trainer = torch.empty(VOCAB)
    with torch.inference_mode():
        for label in range(VOCAB):
            ids[0, S + 1] = label
            trainer[label] = -online(ids, states, loss_mask)[0]  # log p(label) of the first draft, as trained
        scored = mine(ids[:, 1:], mine.project(states[:, :-1]), projected=True).logits  # position t: anchor t+1
        first = torch.log_softmax(scored[0, S - 1], -1)  # [V]: the block anchored at S
    assert (first - trainer).abs().max() < 1e-5, float((first - trainer).abs().max())
    fill_in = build_dflash_draft(dataclasses.replace(mine.arch, sample_from_anchor=False), read_weights(tmp_path / "ds"),
                                 embed, head_w, str(tmp_path / "ds"))
    assert fill_in.arch.first_draft_row == 1 and fill_in.arch.engine_block == bs + 1  # [bonus, mask x gamma]
    with torch.inference_mode():
        other = torch.log_softmax(fill_in(ids[:, 1:], fill_in.project(states[:, :-1]), projected=True).logits[0, S - 1], -1)
    assert (other - trainer).abs().max() > 1e-2  # the mask rows are another prediction
    # spec_generate (modeling/draft/dflash.py:525, dspark.py:334-341): rows 1..B-1 of a B-token block
    block = torch.tensor([[17] + [MASK] * (bs - 1)])
    ctx_states = states[:, :S]
    with torch.inference_mode():
        hidden = model(target_hidden=ctx_states, noise_embedding=target.embed_tokens(block),
                       position_ids=torch.arange(S + bs)[None], is_causal=False)
        proposal = hidden[:, -bs + 1:, :]
        _, corrected = model.markov_head.sample_block_tokens(target.lm_head(proposal), first_prev_token_ids=block[:, 0],
                                                             hidden_states=proposal)
        h = mine.blocks(mine.context(ctx_states), block[:, None], torch.tensor([[S]]))[:, 0]  # [1, bs, H]
        row1 = mine.logits(h[:, 1], block[:, 0])  # [1, V]
        bare = row1 - mine.markov_head.first_bias(block[:, 0], h[:, 1])
        row0 = mine.logits(h[:, 0], block[:, 0])
    assert (row1 - corrected[:, 0]).abs().max() < 1e-5
    assert (bare - corrected[:, 0]).abs().max() > 1e-3  # the Markov bias matters at this size
    assert (torch.log_softmax(row0[0], -1) - first).abs().max() < 1e-5  # the scorer's row 0 is this block's row 0
