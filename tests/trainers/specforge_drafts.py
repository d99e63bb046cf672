"""SmolLM2 drafts trained by SpecForge 0.2.0's own code on known wirings (issue 18 fixtures).

What runs from the wheel (``specforge-0.2.0``, installed ``--no-deps`` into the test cache; driven, never
copied), in the order ``scripts/prepare_hidden_states.py`` and ``specforge train`` / ``specforge export`` run it
(the script is not in the wheel or the sdist; what it does was read at sgl-project/SpecForge a6b6b02, version.txt
0.2.0, scripts/prepare_hidden_states.py:317-372 and :640-730):

* ``config.Config`` + ``application.resolve_offline_capture`` (the script's ``resolve_offline_capture_plan``):
  the draft config (``training/model_loading.py _generate_draft_config`` from the target's config when none is
  given), the capture ids (``algorithms/model_providers.py resolve_eagle_capture_layers``: its default
  ``[1, N//2-1, N-4]`` or the draft config's ``eagle_config.eagle_aux_hidden_state_layer_ids``) and the
  persisted layout (``OfflineCaptureLayout``: ``input_ids``, ``loss_mask``, ``aux_hidden_state``,
  ``hidden_state``);
* ``data/preprocessing.py preprocess_conversations`` with ``data/template.py`` TEMPLATE_REGISTRY ``qwen`` (the
  chatml markers SmolLM2 uses): the chat template and the assistant-only loss mask;
* ``data/preprocessing.py generate_vocab_mapping_file`` (d2t / t2d from the loss-masked token counts);
* ``offline_capture/sglang.py OfflineSGLangCapture`` (``set_capture_layers``, ``capture``: the batch it hands
  the script) over a backend object, and ``OfflineCaptureLayout.materialize`` for each record, saved with
  ``torch.save`` into ``rows_<a>-<b>/data_<i>.ckpt`` as the script's ``_save_tensor_sync`` does;
* training: ``specforge train``'s own in-process path (``cli.py`` ``load_config`` -> ``resolve_run`` ->
  ``bind_run`` -> ``_train``: ``init_distributed``, ``build_application_run(...).run()``: its offline reader,
  collator, ``OnlineEagle3Model`` with the 7-step training-time test, optimizer, scheduler, checkpointer);
* ``export/to_sglang.py export_to_sglang`` (``specforge export --to sglang``): the draft as SGLang loads it.

What is swapped, and why:
* the capture engine. SpecForge 0.2.0 captures only through SGLang 0.5.14 (``offline_capture/sglang_backend/
  capture.py``: a ``ModelRunner``, CUDA kernels), which does not run here. The backend handed to
  ``OfflineSGLangCapture`` is :class:`HooksBackend`: SGLang 0.5.14's own
  ``LlamaForCausalLM.set_eagle3_layers_to_capture`` (``sglang/srt/models/llama.py:812-824``, compiled from the
  0.5.14 wheel with ``tests/wheels.py``) sets ``layers_to_capture`` on a stand-in of the SGLang model, and
  transformers forward hooks (eagle-audit's state source) read what SGLang's loop would hand on: for each
  ``i`` in ``layers_to_capture``, ``hidden_states + residual`` before layer ``i`` (llama.py:407-409) = boundary
  ``B_i``; the final state after ``self.norm`` (llama.py:426), which SpecForge's logits-processor patch passes
  on as ``last_hidden_states`` (``offline_capture/sglang_backend/utils.py``: ``pruned_states``) = ``B_N+norm``.
* the text: the target's own responses to chat prompts (``bench/data/canary_prompts.jsonl``), as SpecForge's
  ``scripts/regenerate_train_data.py`` would make them through an SGLang server (none here): generated with
  transformers from the same chat template SpecForge applies (its ``qwen`` template's system prompt).
* the HF ``datasets`` package (absent): ``generate_vocab_mapping_file`` and the script index a dataset by
  column (``dataset["input_ids"]``); a plain mapping of lists serves the same columns. The training side does
  not import it (its offline reader lists ``.ckpt`` files).
* on the CPU only: ``core/loss.py LogSoftmaxLoss`` is a triton kernel (no triton here); its own reference
  ``_compute_loss`` from the same file (the same masked soft cross-entropy, mean over batch x positions) is
  compiled from the wheel and used as its ``apply``; on the GPU the kernel runs. ``torch._dynamo`` is
  disabled on the CPU (SpecForge's ``@torch.compile`` functions then run eagerly).
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
import time
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import torch

HERE = Path(__file__).parent
#: name -> explicit SpecForge ids (None: the trainer's default, [1, N//2-1, N-4], captured +1 by SGLang)
WIRINGS = {"specforge-default": None, "specforge-5-12-21": [5, 12, 21]}
#: the script saves what SGLang returns in the target's dtype (SmolLM2's config: bfloat16); SpecForge's
#: TargetHead is bfloat16 whatever the run's dtype (target_head.py:52-54), so the features must be too
FEATURE_DTYPE = torch.bfloat16
CHAT_TEMPLATE = "qwen"  # SpecForge's chatml template (data/template.py): SmolLM2's markers
SPECFORGE_MODULES = (
    "specforge.config", "specforge.application", "specforge.data.preprocessing", "specforge.data.template",
    "specforge.offline_capture", "specforge.export.to_sglang", "specforge.cli", "specforge.algorithms.eagle3.model",
    "specforge.training.model_loading")


def _stubs():
    from tests.trainers.real_drafts import _conftest

    return _conftest()


def import_specforge(site: Path, sglang_wheel: Path) -> SimpleNamespace:
    """SpecForge's modules from the installed wheel (import stubs of tests/trainers/conftest.py), the loss
    kernel or its reference (module doc), and SGLang 0.5.14's setter compiled from its wheel."""
    from tests import wheels

    stubs = _stubs()
    have_triton = importlib.util.find_spec("triton") is not None and torch.cuda.is_available()
    if not have_triton:
        torch._dynamo.config.disable = True
    m = stubs.import_trainers(site, SPECFORGE_MODULES)
    sf = wheels.WheelSource(wheels.specforge_wheel() if not os.environ.get("EAGLE_AUDIT_SPECFORGE_WHEEL")
                            else Path(os.environ["EAGLE_AUDIT_SPECFORGE_WHEEL"]))
    model_mod = m["specforge.algorithms.eagle3.model"]
    if have_triton:  # the real kernel: import core/loss.py itself (import_trainers stubbed it)
        sys.modules.pop("specforge.core.loss", None)
        loss = wheels.import_from(site, "specforge.core.loss")
        model_mod.LogSoftmaxLoss = loss.LogSoftmaxLoss
        loss_impl = "triton kernel core/loss.py LogSoftmaxLoss"
    else:
        ref = sf.function("specforge/core/loss.py", "_compute_loss", {"torch": torch, "nn": torch.nn})
        model_mod.LogSoftmaxLoss = type("LogSoftmaxLoss", (), {"apply": staticmethod(ref)})
        loss_impl = "reference core/loss.py _compute_loss (no triton)"
    sg = wheels.WheelSource(sglang_wheel)
    setter = sg.function("sglang/srt/models/llama.py", "LlamaForCausalLM.set_eagle3_layers_to_capture",
                         {"Optional": __import__("typing").Optional, "List": list})
    return SimpleNamespace(
        Config=m["specforge.config"].Config, load_config=m["specforge.config"].load_config,
        resolve_offline_capture=m["specforge.application"].resolve_offline_capture,
        resolve_run=m["specforge.application"].resolve_run, bind_run=m["specforge.application"].bind_run,
        preprocess_conversations=m["specforge.data.preprocessing"].preprocess_conversations,
        generate_vocab_mapping_file=m["specforge.data.preprocessing"].generate_vocab_mapping_file,
        templates=m["specforge.data.template"].TEMPLATE_REGISTRY,
        OfflineSGLangCapture=m["specforge.offline_capture"].OfflineSGLangCapture,
        export_to_sglang=m["specforge.export.to_sglang"].export_to_sglang, cli=m["specforge.cli"],
        model_loading=m["specforge.training.model_loading"], sglang_setter=setter, loss_impl=loss_impl,
        site=site, stubs=stubs)


@contextmanager
def lazy_imports(sf):
    """SpecForge imports more of itself inside its functions (the trainer's reader, collator, ...): the wheel's
    folder and the stand-ins for the absent packages stay in place while they run (then are removed)."""
    finder = sf.stubs._AbsentFinder()
    sys.path.insert(0, str(sf.site))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.path.remove(str(sf.site))
        sys.meta_path.remove(finder)


class _SGLangModelStandIn:
    """The attributes SGLang 0.5.14's ``LlamaForCausalLM.set_eagle3_layers_to_capture`` reads and writes."""

    def __init__(self, num_layers: int, setter):
        self.pp_group = SimpleNamespace(is_last_rank=True)
        self.config = SimpleNamespace(num_hidden_layers=num_layers)
        self.model = SimpleNamespace(layers_to_capture=[])
        self.capture_aux_hidden_states = False
        self._setter = setter

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        return self._setter(self, layer_ids)


class HooksBackend:
    """The capture backend ``OfflineSGLangCapture`` drives (module doc: what SGLang would hand on)."""

    def __init__(self, target, setter):
        from eagle_audit.source import as_source

        self.target = target
        self.source = as_source(target)
        self.N = target.info.num_layers
        self.model_runner = SimpleNamespace(model=_SGLangModelStandIn(self.N, setter))

    def set_capture_layers(self, layer_ids=None, *, capture_method: str):
        if capture_method != "eagle3":
            raise ValueError(f"only eagle3 capture is wired here, got {capture_method!r}")
        self.model_runner.model.set_eagle3_layers_to_capture(layer_ids)

    @property
    def states(self):
        from eagle_audit.states import State

        return tuple(State(i) for i in self.model_runner.model.model.layers_to_capture)

    def capture(self, *, input_ids, attention_mask, loss_mask):
        from eagle_audit.states import State

        final = State(self.N, normed=True)
        want = tuple(dict.fromkeys(self.states + (final,)))
        data, aux, last = [], [], []
        for row, am, lm in zip(input_ids.split(1), attention_mask.split(1), loss_mask.split(1)):
            seq = row[0][am[0].bool()].tolist()
            st = self.source.teacher_forced([seq], want)[0].states
            aux.append(torch.cat([st[s].float() for s in self.states], -1))  # [L, 3*H] in capture order
            last.append(st[final].float())  # [L, H]
            data.append((row, am, lm))
        return data, aux, last


@torch.inference_mode()
def regenerate(target, prompts, max_new: int, samples: int, system: str, batch: int = 32, seed: int = 0):
    """ShareGPT conversations ``[user, assistant]``: the target's responses (1 greedy + ``samples - 1``
    sampled at temperature 0.8) under the chat template SpecForge applies (its system prompt ``system``);
    and the same as token sequences ``(prompt + response, prompt length)`` (speculators' fixtures train on
    them when both trainers run: one generation)."""
    tok = target.tokenizer
    msgs = [[{"role": r, "content": c} for r, c in p.messages] for p in prompts]
    encoded = [tok.apply_chat_template([{"role": "system", "content": system}, *m], tokenize=True,
                                       add_generation_prompt=True) for m in msgs]
    encoded = [list(e["input_ids"] if isinstance(e, dict) or hasattr(e, "keys") else e) for e in encoded]
    from tests.trainers.real_drafts import generate

    out = generate(target, encoded, max_new, samples, batch, seed)
    convs = []
    for (seq, plen), k in zip(out, range(len(out))):
        text = tok.decode(seq[plen:], skip_special_tokens=True)
        convs.append([*msgs[k % len(prompts)], {"role": "assistant", "content": text}])
    return convs, out


class _Columns(dict):
    """What ``generate_vocab_mapping_file`` reads of an HF dataset: columns by name, ``len`` = rows."""

    def __len__(self):
        return len(self["input_ids"])


def draft_config_file(sf, target_dir: str, out: Path, ids, draft_vocab: int) -> Path:
    """SpecForge's own generated draft config (``_generate_draft_config`` from the target's config), with
    ``draft_vocab_size`` set and, for an explicit wiring, ``eagle_config.eagle_aux_hidden_state_layer_ids``
    (where SpecForge reads a draft's ids, and where its export keeps them)."""
    cfg = sf.Config(model={"target_model_path": target_dir}, data={"hidden_states_path": str(out)},
                    training={"strategy": "eagle3"})
    resolved = sf.resolve_run(cfg)
    provider = resolved.algorithm.providers.model.draft_config
    dc = sf.model_loading._generate_draft_config(cfg, provider)
    payload = dc.to_dict()
    payload["draft_vocab_size"] = draft_vocab
    if ids is not None:
        payload["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(ids)}
    path = out / "draft_config.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path


def prepare(sf, target, target_dir: str, convs, out: Path, ids, *, draft_vocab: int, max_length: int,
            val_share: float = 0.1, log=print) -> dict:
    """``scripts/prepare_hidden_states.py``'s steps (module doc) into ``out``: draft config, capture plan,
    data, vocab mapping (from the training rows), captured features: ``hidden_states/`` for training and
    ``eval_hidden_states/`` (a seeded ``val_share`` of the conversations, SpecForge's own evaluation reads
    it). Returns the plan and paths."""
    out.mkdir(parents=True, exist_ok=True)
    feats, evals = out / "hidden_states", out / "eval_hidden_states"
    dc_path, plan, capture = capture_plan(sf, target, target_dir, out, ids, draft_vocab, max_length)
    template = sf.templates.get(CHAT_TEMPLATE)
    # tools: one (empty) list per conversation, as the script's dataset map passes them (its default [[]]
    # zips to the first conversation only)
    data = sf.preprocess_conversations(target.tokenizer, convs, template, max_length, tools=[[]] * len(convs))
    n = len(data["input_ids"])
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0)).tolist()
    val = set(order[:max(1, int(n * val_share))])
    train_rows = [i for i in range(n) if i not in val]
    cols = _Columns(input_ids=[data["input_ids"][i][0] for i in train_rows],
                    loss_mask=[data["loss_mask"][i][0] for i in train_rows])
    mapping = sf.generate_vocab_mapping_file(cols, target_vocab_size=target.info.vocab_size,
                                             draft_vocab_size=draft_vocab, cache_dir=str(out / "vocab_mapping"),
                                             cache_key="vocab_mapping")
    states = capture._backend.states
    t0 = time.perf_counter()
    group = 2000
    for i, (ids_, lm, am) in enumerate(zip(data["input_ids"], data["loss_mask"], data["attention_mask"])):
        if int(lm.sum()) == 0:
            continue
        got = capture.capture(input_ids=ids_, attention_mask=am, loss_mask=lm)
        record = plan.layout.materialize({"input_ids": got.input_ids[0].clone(), "loss_mask": got.loss_mask[0].clone(),
                                          "aux_hidden_states": got.hidden_states[0].to(FEATURE_DTYPE),
                                          "last_hidden_states": got.last_hidden_states[0].to(FEATURE_DTYPE)})
        folder = (evals if i in val else feats) / f"rows_{i // group * group}-{i // group * group + group}"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(record, folder / f"data_{i}.ckpt")
    log(f"specforge prepare: ids {list(plan.capture_layers)} -> SGLang layers_to_capture "
        f"{[s.label() for s in states]}; {len(data['input_ids'])} sequences captured "
        f"({time.perf_counter() - t0:.1f}s)")
    return {"draft_config": str(dc_path), "hidden_states": str(feats), "eval_hidden_states": str(evals),
            "vocab_mapping": mapping, "capture_ids": list(plan.capture_layers), "states": [s.label() for s in states],
            "sequences": n, "train_sequences": len(train_rows),
            "train_tokens": int(sum(int(data["loss_mask"][i].sum()) for i in train_rows))}


def capture_plan(sf, target, target_dir: str, out: Path, ids, draft_vocab: int, max_length: int = 2048):
    """SpecForge's own draft config (:func:`draft_config_file`) and capture plan (``resolve_offline_capture``) for
    ``ids`` (None: its default), and the capture set up as its script sets it (SGLang 0.5.14's setter through
    :class:`HooksBackend`, whose ``states`` are what SGLang captures). Returns (config path, plan, capture)."""
    from transformers import AutoConfig

    dc_path = draft_config_file(sf, target_dir, out, ids, draft_vocab)
    cfg = sf.Config(model={"target_model_path": target_dir, "draft_model_config": str(dc_path)},
                    data={"hidden_states_path": str(out / "hidden_states"), "max_length": max_length},
                    training={"strategy": "eagle3"})
    plan = sf.resolve_offline_capture(cfg, target_config=AutoConfig.from_pretrained(target_dir))
    capture = sf.OfflineSGLangCapture(HooksBackend(target, sf.sglang_setter))
    capture.set_capture_layers(list(plan.capture_layers), capture_method=plan.capture_method)
    return dc_path, plan, capture


def target_view(target_dir: str, out: Path) -> str:
    """The target folder as SpecForge reads it: its ``TargetHead`` finds the lm head only through a
    ``*.index.json`` (``modeling/target/target_head.py:68-80``); SmolLM2 ships one ``model.safetensors`` with
    tied embeddings. The view links the target's files and adds ``model.safetensors.index.json`` naming that
    file for every tensor (a valid transformers layout); training then reads the lm head as
    ``model.embed_tokens.weight`` (``model.lm_head_key``: the tied matrix *is* the lm head)."""
    from safetensors import safe_open

    src = Path(target_dir)
    view = out / "target"
    view.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not (view / f.name).exists():
            (view / f.name).symlink_to(f.resolve())
    index = view / "model.safetensors.index.json"
    if not index.exists():
        with safe_open(str(src / "model.safetensors"), framework="pt") as f:
            keys = list(f.keys())
        index.write_text(json.dumps({"metadata": {}, "weight_map": {k: "model.safetensors" for k in keys}}))
    return str(view)


def train(sf, target_dir: str, prep: dict, out: Path, *, epochs: int, lr: float, max_length: int,
          batch_size: int = 1, ttt: int = 7, attention: str = "sdpa", dtype: str = "bfloat16",
          extra: tuple[str, ...] = (), log=print) -> dict:
    """``specforge train`` (in process, its own ``cli.py`` path) on the prepared features, then
    ``specforge export --to sglang``. Returns the export's folder and the logged metrics."""
    run = out / "run"
    cfg_path = out / "train.yaml"
    import yaml

    view = target_view(target_dir, out)
    cfg = {
        "model": {"target_model_path": view, "draft_model_config": prep["draft_config"],
                  "vocab_mapping_path": prep["vocab_mapping"], "torch_dtype": dtype,
                  "lm_head_key": "model.embed_tokens.weight"},
        "data": {"hidden_states_path": prep["hidden_states"], "eval_hidden_states_path": prep["eval_hidden_states"],
                 "max_length": max_length, "chat_template": CHAT_TEMPLATE, "cache_dir": str(out / "cache")},
        "training": {"strategy": "eagle3", "num_epochs": epochs, "batch_size": batch_size, "learning_rate": lr,
                     "ttt_length": ttt, "attention_backend": attention, "log_interval": 10, "seed": 0,
                     # SpecForge's own evaluation on the held-out features, about once an epoch
                     "eval_interval": max(1, prep["train_sequences"] // batch_size),
                     # FSDP needs an accelerator; SpecForge's own NO_SHARD recipe wraps in DDP (one rank: the
                     # same update) and runs on the CPU (training/backend.py:232-253)
                     "fsdp_sharding": "SHARD_GRAD_OP" if torch.cuda.is_available() else "NO_SHARD"},
        "run_id": out.name, "output_dir": str(run),
        "deployment": {"mode": "local_colocated", "trainer": {"nnodes": 1, "nproc_per_node": 1}},
    }
    cfg_path.write_text(yaml.safe_dump(cfg))
    t0 = time.perf_counter()
    config = sf.load_config(str(cfg_path), list(extra))
    resolved = sf.resolve_run(config)
    lines = _Tee(sys.stdout)
    with lazy_imports(sf), redirect_stdout(lines):
        sf.cli._train(sf.bind_run(resolved.config, resolved.algorithm))
    seconds = time.perf_counter() - t0
    metrics = lines.metrics()
    ckpt = max(run.glob(f"{out.name}-step*"), key=lambda p: int(p.name.rsplit("step", 1)[1]))
    export = out / "export"
    with lazy_imports(sf):
        sf.cli.main(["export", "--to", "sglang", "--checkpoint", str(ckpt), "--draft-config", prep["draft_config"],
                     "--output-dir", str(export), "--vocab-mapping", prep["vocab_mapping"]])
    evals = {k: v for k, v in metrics.items() if k.startswith("eval/")}
    log(f"specforge train: {epochs} epochs ({seconds:.1f}s); eval {evals}; exported {export}")
    return {"checkpoint": str(export), "training_checkpoint": str(ckpt), "eval": evals,
            "eval_history": lines.history("eval/avg_acc"), "eval_acc_0_history": lines.history("eval/per_position_acc"),
            "train_last": {k: v for k, v in metrics.items() if not k.startswith("eval/")},
            "seconds": round(seconds, 1), "loss_implementation": sf.loss_impl}


class _Tee(io.TextIOBase):
    """stdout as the trainer prints it (``training/assembly.py _logger``: ``step N: {metrics}``), kept."""

    def __init__(self, stream):
        self.stream, self.text = stream, []

    def write(self, s):
        self.stream.write(s)
        self.text.append(s)
        return len(s)

    def flush(self):
        self.stream.flush()

    def history(self, key: str) -> list:
        """Every printed value of ``key``, in order, with its step."""
        import ast

        out = []
        for line in "".join(self.text).splitlines():
            if line.startswith("step ") and ": {" in line and f"'{key}'" in line:
                try:
                    v = ast.literal_eval(line.split(": ", 1)[1])[key]
                except (ValueError, SyntaxError, KeyError):
                    continue
                out.append([int(line.split()[1].rstrip(":")), v[0] if isinstance(v, list) else v])
        return out

    def metrics(self) -> dict:
        """The last value of every metric the trainer printed."""
        import ast

        got: dict = {}
        for line in "".join(self.text).splitlines():
            if line.startswith("step ") and ": {" in line:
                try:
                    got.update(ast.literal_eval(line.split(": ", 1)[1]))
                except (ValueError, SyntaxError):
                    continue
        return got
