"""SmolLM2 drafts trained by speculators 0.9.0's own training loop on known wirings (issue 18 fixtures).

What runs from the wheel (``speculators-0.9.0``, installed ``--no-deps``, driven, never copied):
``models/utils.py resolve_target_layer_ids`` (the ids: its default ``[2, N//2, N-3]`` or explicit ones),
``train/vocab_mapping.py build_vocab_mappings_from_distribution`` (the draft vocabulary from the training
tokens' frequencies), ``Eagle3DraftModel.from_training_args`` (the draft, its verifier weights loaded from the
target's directory), ``train/dataloader.py _setup_dataloader`` (its multipack sampler, ``CollateFn`` and
``models/eagle3/data.py shift_batch``), ``train/trainer.py Trainer`` (its optimizer, scheduler, autocast, its
KL loss over 3 training-time-test steps, its checkpointer: ``save_pretrained`` into ``<save>/<epoch>/``, the
speculators layout) and ``Trainer.val_epoch`` (its per-step accuracies).

What is swapped, and why:
* the data source: speculators reads hidden states that vLLM captured (``ArrowDataset`` over a ``datasets``
  arrow file and an ``hs_connectors`` transfer). vLLM does not run here and neither package is installed, so a
  ``BaseDataset`` subclass serves the same per-sample dict (``input_ids``, ``hidden_states`` = the aux states
  concatenated in id order, ``verifier_last_hidden_states``, ``loss_mask``) from eagle-audit's state source
  (transformers). Which state an id names is vLLM's (IN-k = ``B_k``; the verifier state is ``B_N``, pre-norm:
  docs/trainers.md, checked against the wheels by tests/trainers).
* the text: the target's own generations of chat prompts (``bench/data/canary_prompts.jsonl``), chat-templated with
  the target's template, loss on the assistant tokens (what speculators' ``data_generation`` builds from
  regenerated responses; its preprocessing imports ``httpx`` and ``datasets``, absent here).
* the draft decoder config: ``train/cli.py create_transformer_layer_config`` imports the CLI's pydantic-settings
  schema (absent); the same fields are set here from the verifier config (1 llama layer, the verifier's
  attention geometry and rope, ``tie_word_embeddings=False``; sliding window 2048 as its default, longer
  than every text here).
* on the CPU only: the trainer's device (``get_local_rank`` -> ``"cpu"``; it moves the model to ``cuda:0``) and
  ``torch.accelerator.synchronize`` (its step timer syncs the accelerator; none here: a no-op), and its
  loss implementation ``eager`` (the same KL loss; ``fused``, its default, is a triton kernel).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

HERE = Path(__file__).parent
#: name -> explicit speculators ids (None: the trainer's default, [2, N//2, N-3])
WIRINGS = {"speculators-default": None, "speculators-4-11-24": [4, 11, 24]}
EXTRA_ABSENT = ("httpx",)  # imported at module level by speculators' data_generation, never called here


def _conftest():
    """tests/trainers/conftest.py as a module (its import stubs), also where pytest is not installed (the GPU
    image): then a stand-in whose decorators return what they decorate."""
    import types

    try:
        import pytest  # noqa: F401
    except ImportError:
        fake = types.ModuleType("pytest")
        fake.fixture = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
        fake.mark = types.SimpleNamespace(__getattr__=lambda n: (lambda *a, **k: (lambda f: f)))
        fake.fail = fake.skip = lambda *a, **k: None
        sys.modules["pytest"] = fake
    spec = importlib.util.spec_from_file_location("_eagle_audit_trainer_stubs", HERE / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def import_speculators(site: Path) -> SimpleNamespace:
    """speculators' modules from the installed wheel, with the import stubs of tests/trainers/conftest.py."""
    stubs = _conftest()
    stubs.ABSENT = stubs.ABSENT + EXTRA_ABSENT
    m = stubs.import_trainers(site, ("speculators.train.trainer", "speculators.train.data",
                                     "speculators.train.dataloader", "speculators.models.eagle3.data",
                                     "speculators.train.vocab_mapping", "speculators.models.eagle3.core",
                                     "speculators.models.utils"))
    return SimpleNamespace(
        Trainer=m["speculators.train.trainer"].Trainer, TrainerConfig=m["speculators.train.trainer"].TrainerConfig,
        trainer_module=m["speculators.train.trainer"], BaseDataset=m["speculators.train.data"].BaseDataset,
        setup_dataloader=m["speculators.train.dataloader"]._setup_dataloader,
        shift_batch=m["speculators.models.eagle3.data"].shift_batch,
        build_vocab=m["speculators.train.vocab_mapping"].build_vocab_mappings_from_distribution,
        Eagle3DraftModel=m["speculators.models.eagle3.core"].Eagle3DraftModel,
        resolve_target_layer_ids=m["speculators.models.utils"].resolve_target_layer_ids)


@torch.inference_mode()
def generate(target, prompts: list[list[int]], max_new: int, samples: int, batch: int = 32,
             seed: int = 0) -> list[tuple[list[int], int]]:
    """(prompt + the target's response, prompt length): one greedy and ``samples - 1`` sampled responses
    (temperature 0.8) per prompt, cut at EOS (kept)."""
    model, tok = target.model, target.tokenizer
    dev = target.input_device
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    torch.manual_seed(seed)
    out = []
    for k in range(samples):
        for b0 in range(0, len(prompts), batch):
            group = prompts[b0:b0 + batch]
            L = max(map(len, group))
            ids = torch.tensor([[pad] * (L - len(p)) + p for p in group], device=dev)
            mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in group], device=dev)
            kw = dict(do_sample=True, temperature=0.8, top_k=0, top_p=1.0) if k else dict(do_sample=False)
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, pad_token_id=pad,
                                 eos_token_id=eos, **kw)[:, L:].tolist()
            for p, g in zip(group, gen):
                if eos in g:
                    g = g[:g.index(eos) + 1]
                out.append((p + g, len(p)))
    return out


def state_of_id(k: int):
    """vLLM's aux state id k (speculators' capture) = IN-k = B_k."""
    from eagle_audit.states import State

    return State(k)


@dataclass
class Samples:
    ids: list[torch.Tensor]  # [L]
    aux: list[torch.Tensor]  # [L, n*H]
    last: list[torch.Tensor]  # [L, H]: B_N, pre-norm (the verifier state)
    mask: list[torch.Tensor]  # [L]: 1 on the response


def capture(target, texts: list[tuple[list[int], int]], layer_ids: list[int], dtype=torch.bfloat16) -> Samples:
    from eagle_audit.source import as_source
    from eagle_audit.states import State

    N = target.info.num_layers
    want = tuple(dict.fromkeys([state_of_id(k) for k in layer_ids] + [State(N)]))
    src = as_source(target)
    s = Samples([], [], [], [])
    for seq, plen in texts:
        st = src.teacher_forced([seq], want)[0].states
        s.ids.append(torch.tensor(seq))
        s.aux.append(torch.cat([st[state_of_id(k)].float().cpu() for k in layer_ids], -1).to(dtype))
        s.last.append(st[State(N)].float().cpu().to(dtype))
        s.mask.append(torch.tensor([0] * plen + [1] * (len(seq) - plen)))
    return s


def dataset_class(sp):
    class CapturedDataset(sp.BaseDataset):
        """speculators' dataset interface over captured states (its ArrowDataset reads vLLM's)."""

        def __init__(self, samples: Samples, idx: list[int], max_len: int, dtype):
            self.samples, self.idx = samples, idx
            super().__init__(max_len, dtype)

        def __len__(self):
            return len(self.idx)

        def _compute_approx_lengths(self):
            return [int(self.samples.ids[i].numel()) for i in self.idx]

        def _get_raw_data(self, index):
            i = self.idx[index]
            s = self.samples
            return {"input_ids": s.ids[i], "hidden_states": s.aux[i], "verifier_last_hidden_states": s.last[i],
                    "loss_mask": s.mask[i]}

    return CapturedDataset


def draft_layer_config(verifier_dir: str):
    """The fields ``create_transformer_layer_config`` sets for a 1-layer llama draft (see the module doc)."""
    from transformers import AutoConfig, LlamaConfig

    v = AutoConfig.from_pretrained(verifier_dir)
    return LlamaConfig(vocab_size=v.vocab_size, hidden_size=v.hidden_size, intermediate_size=v.intermediate_size,
                       num_hidden_layers=1, num_attention_heads=v.num_attention_heads,
                       num_key_value_heads=v.num_key_value_heads, hidden_act=v.hidden_act,
                       max_position_embeddings=v.max_position_embeddings, initializer_range=v.initializer_range,
                       rms_norm_eps=v.rms_norm_eps, head_dim=getattr(v, "head_dim", None), tie_word_embeddings=False,
                       sliding_window=2048, use_sliding_window=True, layer_types=["sliding_attention"],
                       rope_parameters=getattr(v, "rope_parameters", None))


def train_speculators(sp, target, verifier_dir: str, samples: Samples, layer_ids_arg, save: Path, *, epochs: int,
                      lr: float = 1e-3, draft_vocab: int = 8192, total_seq_len: int = 8192, dtype=torch.bfloat16,
                      attn: str = "simple_flex_attention", val_share: float = 0.1, log=print) -> dict:
    """Train one draft with speculators' Trainer; returns what it measured and where the checkpoint is."""
    t0 = time.perf_counter()
    if target.input_device.type == "cpu":  # the trainer assumes an accelerator: cuda:0, and syncs it to time steps
        sp.trainer_module.get_local_rank = lambda: "cpu"
        if torch.accelerator.current_accelerator() is None:
            torch.accelerator.synchronize = lambda *a, **k: None
    ids = sp.resolve_target_layer_ids(layer_ids_arg, verifier_dir)
    freq: dict[int, int] = {}
    for x, m in zip(samples.ids, samples.mask):
        for t in x[m.bool()].tolist():
            freq[t] = freq.get(t, 0) + 1
    d2t, t2d = sp.build_vocab(freq, draft_vocab, target.info.vocab_size)
    layer = draft_layer_config(verifier_dir)
    model = sp.Eagle3DraftModel.from_training_args(
        verifier_config=layer, t2d=t2d, d2t=d2t, verifier_name_or_path=verifier_dir, target_layer_ids=layer_ids_arg,
        draft_vocab_size=draft_vocab, norm_before_residual=True, ttt_steps=3, draft_attn_impl=attn)
    n = len(samples.ids)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(n, generator=g).tolist()
    n_val = max(1, int(n * val_share))
    Dataset = dataset_class(sp)
    train_ds = Dataset(samples, order[n_val:], total_seq_len, dtype)
    val_ds = Dataset(samples, order[:n_val], total_seq_len, dtype)
    H = layer.hidden_size
    mk = lambda ds: sp.setup_dataloader(ds, total_seq_len, H, num_workers=0, num_target_layers=len(ids),  # noqa: E731
                                        prefetch_factor=None, preprocess=sp.shift_batch)
    loss_impl = "eager"  # fused (its default, a triton kernel through torch.compile) fails under torch 2.11 (dynamo)
    train_kwargs, val_kwargs = sp.Eagle3DraftModel.get_trainer_kwargs(loss_fn="kl_div", ttt_steps=3,
                                                                      ttt_step_loss_decay=1.0,
                                                                      loss_implementation=loss_impl)
    cfg = sp.TrainerConfig(lr=lr, num_epochs=epochs, save_path=str(save), train_call_kwargs=train_kwargs,
                           val_call_kwargs=val_kwargs, hidden_states_dtype=dtype, log_freq=50)
    trainer = sp.Trainer(model, cfg, mk(train_ds), mk(val_ds))
    trainer.run_training()
    val = trainer.val_epoch(epochs - 1) or {}
    ckpt = save / str(epochs - 1)
    log(f"speculators draft ids {ids}: {epochs} epochs, {time.perf_counter() - t0:.1f}s; val {val}")
    return {"layer_ids": ids, "checkpoint": str(ckpt), "val": {k: float(v) for k, v in val.items()},
            "train_tokens": int(sum(int(m.sum()) for m in samples.mask)), "sequences": n,
            "seconds": round(time.perf_counter() - t0, 1)}


def write_record(path: Path, record: dict) -> None:
    path.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":  # pragma: no cover - a quick manual check
    sys.exit("use python -m bench.evidence.trainer_fixtures")
