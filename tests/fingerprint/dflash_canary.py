"""A DFlash canary of known wiring on SmolLM2, trained by SpecForge 0.2.0's own DFlash training forward and loss.

What runs from the wheel (installed ``--no-deps`` into the test cache, imported through
tests/trainers/conftest.py ``import_trainers``): ``specforge/modeling/draft/dflash.py`` ``DFlashDraftModel`` (its
construction and initialisation from a Qwen3 config with ``dflash_config``) and
``specforge/algorithms/common/dflash_family_model.py`` ``OnlineDFlashModel.forward`` (anchor sampling, the mask
of every block over its context, noise embedding, labels, the DFlash cross-entropy and accuracy), with the
target's own ``lm_head`` and ``embed_tokens`` frozen, ``attention_backend="sdpa"`` (flex attention needs a
compiler; SpecForge offers sdpa for it). What is eagle-audit's: the text (built-in prompts 9-16 and the target's
greedy continuations, as the EAGLE-3 canaries, tests/fingerprint/fp_canaries.py), the target states
(eagle-audit's capture of B(id+1), which is what SpecForge's ``extract_context_feature`` takes,
``hidden_states[id + 1]``: checked in tests/trainers/test_block_trainers.py), the AdamW loop around the loss
(SpecForge's own loop needs its launcher and SGLang for capture) and the checkpoint writer (the
z-lab / SpecForge layout: ``config.json`` with ``dflash_config``, the draft's state dict as safetensors).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

#: name -> the trained DFlash ids (boundary = id + 1): [1, 14, 26] = B2, B15, B27 (SGLang's EAGLE-3 default for
#: N = 30, as an EAGLE-3 canary); [19] = B20, one slot (as the EAGLE-3 canary ``one-20``; DFlash applies fc even then)
CANARIES = {"2-15-27": (1, 14, 26), "one-20": (19,)}
VERSION = 1
EPOCHS, BLOCK, ANCHORS, LR, INTER, MASK = 30, 4, 64, 2e-3, 768, 4  # id 4: a SmolLM2 special token, not in the text


def boundaries(name: str) -> tuple[int, ...]:
    return tuple(i + 1 for i in CANARIES[name])


def dir_name(name: str) -> str:
    return f"fp-dflash-canary-{name}-v{VERSION}"


def specforge_modules():
    from tests import wheels
    from tests.trainers.conftest import import_trainers

    site = wheels.installed(wheels.specforge_wheel(), wheels.speculators_wheel())
    return import_trainers(site, ("specforge.algorithms.common.dflash_family_model",
                                  "specforge.modeling.draft.dflash"))


def draft_config(target, ids):
    import transformers as T

    info = target.info
    cfg = T.Qwen3Config(num_hidden_layers=1, hidden_size=info.hidden_size, intermediate_size=INTER,
                        num_attention_heads=9, num_key_value_heads=3, head_dim=64, vocab_size=info.vocab_size,
                        rms_norm_eps=1e-5, num_target_layers=info.num_layers, block_size=BLOCK,
                        max_position_embeddings=2048, tie_word_embeddings=False)
    cfg.architectures = ["DFlashDraftModel"]
    cfg.dflash_config = {"target_layer_ids": list(ids), "mask_token_id": MASK, "block_size": BLOCK}
    cfg._attn_implementation = "sdpa"
    return cfg


def train_dflash_canary(target, root: Path, name: str = "2-15-27", log=print, epochs: int = EPOCHS,
                        device: str = "cpu") -> Path:
    """Train the canary ``name`` under ``root / dir_name(name)`` unless it is there; return its directory."""
    out = root / dir_name(name)
    ids = CANARIES[name]
    if (out / "config.json").is_file():
        return out
    from safetensors.torch import save_file

    from eagle_audit.accept.canary import CanaryOptions, make_data
    from eagle_audit.states import State
    from tests.fingerprint.fp_canaries import training_prompts

    mods = specforge_modules()
    fam, dmod = mods["specforge.algorithms.common.dflash_family_model"], mods["specforge.modeling.draft.dflash"]
    states = tuple(State(b) for b in boundaries(name))
    t0 = time.perf_counter()
    data = make_data(target, training_prompts(target), CanaryOptions(boundaries=(0,), max_new_tokens=96), states)
    log(f"dflash canary data: {len(data)} sequences, {sum(len(d.ids) for d in data)} tokens, "
        f"{time.perf_counter() - t0:.1f}s")
    torch.manual_seed(0)
    cfg = draft_config(target, ids)
    draft = dmod.DFlashDraftModel(cfg).to(device)
    model = target.model  # its head and embedding, copied out of inference mode, frozen
    w = model.get_output_embeddings().weight.detach().clone().to(device)
    head = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=device)
    head.weight = torch.nn.Parameter(w, requires_grad=False)
    emb = torch.nn.Embedding.from_pretrained(model.get_input_embeddings().weight.detach().clone().to(device))
    online = fam.OnlineDFlashModel(draft, head, emb, MASK, block_size=BLOCK, attention_backend="sdpa",
                                   num_anchors=ANCHORS)
    opt = torch.optim.AdamW(draft.parameters(), lr=LR, weight_decay=0.01)
    steps = epochs * len(data)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps, pct_start=0.1)
    t1 = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    accs = []
    for ep in range(epochs):
        accs = []
        for i in torch.randperm(len(data), generator=g).tolist():
            d = data[i]
            ids = torch.tensor([list(d.ids)], device=device)
            hidden = d.aux[None].to(device, torch.float32).clone()  # [1, L, 3H]: B2, B15, B27 at each position
            loss, acc, _ = online(ids, hidden, torch.ones_like(ids, dtype=torch.float32))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            opt.step()
            sched.step()
            accs.append(float(acc))
        log(f"dflash canary epoch {ep + 1}/{epochs}: loss {float(loss):.3f}, block accuracy {sum(accs) / len(accs):.3f}")
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().cpu().contiguous() for k, v in draft.state_dict().items()}
    save_file(sd, str(tmp / "model.safetensors"))
    cfg_json = cfg.to_dict()
    cfg_json.pop("_attn_implementation", None)
    # not the EAGLE-3 canary record (``eagle_audit_canary``): the config's ids are the declared wiring
    cfg_json["eagle_audit_dflash_canary"] = {"trainer": "specforge 0.2.0 OnlineDFlashModel (sdpa)",
                                      "trained_boundaries": list(boundaries(name)), "epochs": epochs, "lr": LR,
                                      "anchors": ANCHORS, "sequences": len(data),
                                      "block_accuracy": sum(accs) / len(accs),
                                      "train_seconds": round(time.perf_counter() - t1, 1)}
    (tmp / "config.json").write_text(json.dumps(cfg_json, indent=2))
    tmp.rename(out)
    return out
