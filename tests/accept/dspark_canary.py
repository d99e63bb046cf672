"""A DSpark canary of known wiring on SmolLM2, trained by SpecForge 0.2.0's own DSpark training forward and loss.

As tests/fingerprint/dflash_canary.py (its text, target states, AdamW loop and checkpoint writer), with SpecForge's
``specforge/modeling/draft/dspark.py`` ``DSparkDraftModel`` (a vanilla Markov head, rank 16) and
``algorithms/common/dflash_family_model.py`` ``OnlineDSparkModel.forward`` (labels at anchor + 1..B, the Markov
bias of each row from the true previous token, ``_build_dspark_labels_and_mask`` / ``forward``) in place of the
DFlash ones, its cross-entropy term only (``dspark_ce_loss_alpha`` 1, the L1 and confidence terms 0: they need the
target's last states and a confidence head, neither of which changes which rows draft what).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from tests.fingerprint.dflash_canary import ANCHORS, BLOCK, EPOCHS, LR, MASK, draft_config

#: name -> the trained DSpark ids (boundary = id + 1), as the DFlash canary of that name
CANARIES = {"2-15-27": (1, 14, 26)}
VERSION = 1
RANK = 16


def dir_name(name: str) -> str:
    return f"fp-dspark-canary-{name}-v{VERSION}"


def boundaries(name: str) -> tuple[int, ...]:
    return tuple(i + 1 for i in CANARIES[name])


def train_dspark_canary(target, root: Path, name: str = "2-15-27", log=print, epochs: int = EPOCHS,
                        device: str = "cpu") -> Path:
    """Train the canary ``name`` under ``root / dir_name(name)`` unless it is there; return its directory."""
    out = root / dir_name(name)
    if (out / "config.json").is_file():
        return out
    from tests import wheels
    from safetensors.torch import save_file
    from tests.trainers.conftest import import_trainers

    from eagle_audit.accept.canary import CanaryOptions, make_data
    from eagle_audit.states import State
    from tests.fingerprint.fp_canaries import training_prompts

    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    mods = import_trainers(site, ("specforge.algorithms.common.dflash_family_model", "specforge.modeling.draft.dspark"))
    fam, dmod = mods["specforge.algorithms.common.dflash_family_model"], mods["specforge.modeling.draft.dspark"]
    states = tuple(State(b) for b in boundaries(name))
    data = make_data(target, training_prompts(target), CanaryOptions(boundaries=(0,), max_new_tokens=96), states)
    torch.manual_seed(0)
    cfg = draft_config(target, CANARIES[name])
    cfg.architectures = ["DSparkDraftModel"]
    cfg.dflash_config = {**cfg.dflash_config, "markov_rank": RANK, "markov_head_type": "vanilla"}
    draft = dmod.DSparkDraftModel(cfg).to(device)
    model = target.model  # its head and embedding, copied out of inference mode, frozen
    w = model.get_output_embeddings().weight.detach().clone().to(device)
    head = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=device)
    head.weight = torch.nn.Parameter(w, requires_grad=False)
    emb = torch.nn.Embedding.from_pretrained(model.get_input_embeddings().weight.detach().clone().to(device))
    online = fam.OnlineDSparkModel(draft, head, emb, MASK, block_size=BLOCK, attention_backend="sdpa",
                                   num_anchors=ANCHORS, dspark_ce_loss_alpha=1.0, dspark_l1_loss_alpha=0.0,
                                   dspark_confidence_head_alpha=0.0)
    opt = torch.optim.AdamW(draft.parameters(), lr=LR, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=epochs * len(data), pct_start=0.1)
    t1 = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    accs = []
    for ep in range(epochs):
        accs = []
        for i in torch.randperm(len(data), generator=g).tolist():
            d = data[i]
            ids = torch.tensor([list(d.ids)], device=device)
            hidden = d.aux[None].to(device, torch.float32).clone()  # [1, L, 3H]
            loss, acc, _ = online(ids, hidden, torch.ones_like(ids, dtype=torch.float32))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            opt.step()
            sched.step()
            accs.append(float(acc))
        log(f"dspark canary epoch {ep + 1}/{epochs}: loss {float(loss):.3f}, block accuracy {sum(accs) / len(accs):.3f}")
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in draft.state_dict().items()}, str(tmp / "model.safetensors"))
    cfg_json = cfg.to_dict()
    cfg_json.pop("_attn_implementation", None)
    cfg_json["eagle_audit_dspark_canary"] = {"trainer": "specforge 0.2.0 OnlineDSparkModel (sdpa, cross-entropy only)",
                                             "trained_boundaries": list(boundaries(name)), "epochs": epochs, "lr": LR,
                                             "anchors": ANCHORS, "sequences": len(data), "markov_rank": RANK,
                                             "block_accuracy": sum(accs) / len(accs),
                                             "train_seconds": round(time.perf_counter() - t1, 1)}
    (tmp / "config.json").write_text(json.dumps(cfg_json, indent=2))
    tmp.rename(out)
    return out


def fill_in_copy(canary: Path, dest: Path) -> Path:
    """The canary with ``sample_from_anchor: false`` (the DFlash rows: what SpecForge's ``spec_generate`` drafts)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((canary / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**cfg, "sample_from_anchor": False}, indent=2))
    shutil.copy(canary / "model.safetensors", dest / "model.safetensors")
    return dest
