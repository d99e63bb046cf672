"""Read an EAGLE-3 draft checkpoint into a frozen description, without loading its weights.

Layouts recognised (``DraftSpec.layout``):

* ``sglang``: ``architectures: ["LlamaForCausalLMEagle3"]`` (SGLang, SpecForge, modelopt exports); ids,
  if any, nested in ``eagle_config.eagle_aux_hidden_state_layer_ids`` (OUT-k by convention).
* ``speculators``: ``speculators_model_type: "eagle3"`` / ``architectures: ["Eagle3Speculator"]``;
  top-level ``eagle_aux_hidden_state_layer_ids`` (IN-k), ``speculators_config``, a nested
  ``transformer_layer_config``.
* ``eagle``: the original SafeAILab layout (``LlamaForCausalLM`` with ``fc`` and ``midlayer`` weights,
  ids hard-coded in the trainer).

Shapes come from safetensors headers (``fc.weight``: [hidden, n_aux * target_hidden]). Only the small
``d2t`` / ``t2d`` tensors are read, to validate the vocabulary map. A ``pytorch_model.bin`` (old EAGLE
checkpoints) is memory-mapped with ``torch.load(weights_only=True, mmap=True)``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import BadCheckpoint, InputNotFound, param, shown
from ..jsonfile import loads_bounded, read_json_object
from ..target import draft_sign

_ST_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                   "F8_E4M3": 1, "F8_E5M2": 1}


@dataclass(frozen=True)
class VocabMap:
    """The draft-to-target vocabulary map, as engines apply it: ``target = i + d2t[i]``."""

    draft_vocab_size: int | None
    has_d2t: bool
    has_t2d: bool
    d2t_len: int | None = None
    t2d_len: int | None = None
    t2d_count: int | None = None
    max_target_id: int | None = None  # max over i of i + d2t[i]
    min_target_id: int | None = None
    d2t_in_t2d: bool | None = None  # every i + d2t[i] is marked in t2d


@dataclass(frozen=True)
class DraftSpec:
    path: str
    layout: str
    architectures: tuple[str, ...]
    config: Mapping[str, Any] = field(repr=False, compare=False)
    config_sha256: str = ""
    hidden_size: int = 0
    num_layers: int = 1
    fc_in: int = 0
    fc_out: int = 0
    target_hidden_size: int | None = None  # from the config, if stated
    num_aux_hidden_states: int | None = None  # from the config, if stated
    vocab_size: int | None = None
    vocab: VocabMap = VocabMap(None, False, False)
    flags: Mapping[str, Any] = field(default_factory=dict)  # draft flags as written (None: absent)
    use_aux_hidden_state: bool = True
    weight_names: tuple[str, ...] = field(default=(), repr=False)
    verifier: str | None = None
    has_weights: bool = True  # False: a config-only draft (``layers --static``); fc is the config's
    fc_source: str = "weights"  # "weights" (fc.weight's shape), "config" (config-only), "none" (no fc: no aux states)

    @property
    def uses_aux(self) -> bool:
        """Whether the draft takes aux states through fc (``eagle_config.use_aux_hidden_state`` not false)."""
        return self.fc_source != "none"
    kind: str = "eagle3"  # a name of eagle_audit.kinds.KINDS ("eagle3", "dflash", "dspark")
    block: Any = field(default=None, compare=False)  # block_draft.BlockSpec of a DFlash / DSpark draft
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)  # canonical name -> shape

    @property
    def draft_kind(self):
        """The :class:`eagle_audit.kinds.DraftKind` of this draft (what each command can do with it)."""
        from ..kinds import kind

        return kind(self.kind)

    def aux_count(self, target_hidden: int) -> int | None:
        """Aux slots fc was trained for, given the target hidden size (None: fc does not fit it); a draft
        without fc takes one state, the target's last."""
        if self.fc_source == "none":
            return 1
        if target_hidden <= 0 or self.fc_in % target_hidden:
            return None
        return self.fc_in // target_hidden

    def has_weight(self, name: str) -> bool:
        return name in self.weight_names

    def to_json(self) -> dict:
        return {"path": self.path, "layout": self.layout, "architectures": list(self.architectures),
                "config_sha256": self.config_sha256, "hidden_size": self.hidden_size, "num_layers": self.num_layers,
                "fc_in": self.fc_in, "fc_out": self.fc_out, "target_hidden_size": self.target_hidden_size,
                "num_aux_hidden_states": self.num_aux_hidden_states, "vocab_size": self.vocab_size,
                "vocab": dict(self.vocab.__dict__), "flags": dict(self.flags),
                "use_aux_hidden_state": self.use_aux_hidden_state, "verifier": self.verifier,
                "has_weights": self.has_weights, "fc_source": self.fc_source, "kind": self.kind,
                "block": self.block.to_json() if self.block is not None else None}

    def for_target(self, target_hidden: int) -> "DraftSpec":
        """A config-only draft's fc, sized as the config says for this target (``target_hidden_size`` or the
        target's hidden size); any other draft as it is."""
        if self.fc_source != "config":
            return self
        from dataclasses import replace

        return replace(self, fc_in=self.config_aux * int(self.target_hidden_size or target_hidden))

    @property
    def config_aux(self) -> int:
        """The aux count a config states: ``num_aux_hidden_states``, else its ids (nested, then top level), else 3."""
        if self.num_aux_hidden_states:
            return int(self.num_aux_hidden_states)
        nested = self.config.get("eagle_config") if isinstance(self.config.get("eagle_config"), Mapping) else {}
        for ids in (nested.get("eagle_aux_hidden_state_layer_ids"), self.config.get("eagle_aux_hidden_state_layer_ids")):
            if ids:
                return len(ids)
        return 3


def canonical_name(name: str) -> str:
    """Weight names without the optional ``model.`` prefix (SGLang tries both spellings)."""
    return name[len("model."):] if name.startswith("model.") else name


def read_safetensors_header(path: Path) -> dict[str, dict]:
    """name -> {"dtype", "shape", "data_offsets"} from a safetensors file header; validated."""
    size = path.stat().st_size
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise BadCheckpoint(f"{path}: corrupt safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", raw)
        if n <= 0 or n > min(size - 8, 100 * 2**20):
            raise BadCheckpoint(f"{path}: corrupt safetensors file (header length {n} does not fit a {size}-byte file)")
        text = f.read(n)
    try:
        header = loads_bounded(text.decode("utf-8"), f"{path}: corrupt safetensors file: header", BadCheckpoint)
    except UnicodeDecodeError:
        raise BadCheckpoint(f"{path}: corrupt safetensors file (header is not JSON: not UTF-8)") from None
    if not isinstance(header, dict):
        raise BadCheckpoint(f"{path}: corrupt safetensors file (header is a JSON {type(header).__name__}, not an object)")
    header.pop("__metadata__", None)
    end = 0
    for name, meta in header.items():
        what = f"{path}: corrupt safetensors file (entry {shown(name)}"
        if not isinstance(meta, dict):
            raise BadCheckpoint(f"{what} is not an object)")
        dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in _ST_DTYPE_BYTES:
            raise BadCheckpoint(f"{what} has an unknown dtype {shown(dtype)}; known: {', '.join(_ST_DTYPE_BYTES)})")
        if not (isinstance(shape, list) and len(shape) <= 8 and all(_is_int(d) and 0 <= d < 2**40 for d in shape)):
            raise BadCheckpoint(f"{what} has shape {shown(shape)}; a shape is a list of sizes >= 0)")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) and o >= 0 for o in offsets)
                and offsets[0] <= offsets[1]):
            raise BadCheckpoint(f"{what} has data_offsets {shown(offsets)}; expected [start, end] with 0 <= start <= end)")
        start, stop = offsets
        numel = 1
        for d in shape:
            numel *= d
        want = _ST_DTYPE_BYTES[dtype]
        if stop - start != numel * want:
            raise BadCheckpoint(f"{what} holds {stop - start} bytes, its shape needs {numel * want})")
        end = max(end, stop)
    if 8 + n + end > size:
        raise BadCheckpoint(f"{path}: corrupt or truncated safetensors file (data ends at byte {8 + n + end}, file has {size})")
    return header


def weight_files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.safetensors"))
    if files:
        return files
    bins = sorted(directory.glob("pytorch_model*.bin"))
    if bins:
        return bins
    raise BadCheckpoint(f"{directory}: no *.safetensors or pytorch_model.bin weights")


def _shapes(files: list[Path]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for f in files:
        if f.suffix == ".safetensors":
            for name, meta in read_safetensors_header(f).items():
                shapes[canonical_name(name)] = tuple(meta["shape"])
        else:
            import torch

            try:
                sd = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            except Exception as e:
                raise BadCheckpoint(f"{f}: unreadable PyTorch checkpoint ({type(e).__name__})") from None
            shapes.update({canonical_name(k): tuple(v.shape) for k, v in sd.items()})
    return shapes


def load_tensor(directory: Path, name: str):
    """One tensor by canonical name, from whichever weight file holds it."""
    import torch
    from safetensors import safe_open

    for f in weight_files(directory):
        if f.suffix == ".safetensors":
            with safe_open(str(f), framework="pt") as sf:
                for key in sf.keys():
                    if canonical_name(key) == name:
                        return sf.get_tensor(key)
        else:
            sd = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            for key, v in sd.items():
                if canonical_name(key) == name:
                    return v
    return None


def _layout(config: Mapping[str, Any], shapes: Mapping[str, tuple]) -> str:
    archs = config.get("architectures") or []
    if config.get("speculators_model_type") or "Eagle3Speculator" in archs or "speculators_config" in config:
        return "speculators"
    if any("Eagle3" in a for a in archs) or "eagle_config" in config:
        return "sglang"
    return "eagle"


_INT_CODES = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U8": "B", "BOOL": "B"}


def _load_ints(directory: Path, name: str) -> list[int] | None:
    """One small integer or bool tensor, flattened, read from the safetensors bytes with the standard
    library (no numpy, no torch: a static audit stays light); ``.bin`` files and other dtypes go
    through :func:`load_tensor`. Little-endian, as safetensors stores it."""
    import sys
    from array import array

    for f in weight_files(directory):
        if f.suffix != ".safetensors":
            continue
        header = read_safetensors_header(f)
        for key, meta in header.items():
            if canonical_name(key) != name:
                continue
            code = _INT_CODES.get(meta["dtype"])
            if code is None:
                break
            start, stop = meta["data_offsets"]
            with f.open("rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                fh.seek(8 + n + start)
                values = array(code, fh.read(stop - start))
            if sys.byteorder != "little" and values.itemsize > 1:
                values.byteswap()
            return values.tolist()
    t = load_tensor(directory, name)
    return None if t is None else [int(v) for v in t.reshape(-1).tolist()]


def _vocab_map(directory: Path, config: Mapping, shapes: Mapping) -> VocabMap:
    dvs = config.get("draft_vocab_size")
    has_d2t, has_t2d = "d2t" in shapes, "t2d" in shapes
    for name in ("d2t", "t2d"):
        if name in shapes and (len(shapes[name]) != 1 or shapes[name][0] == 0):
            raise BadCheckpoint(f"{directory}: {name} has shape {list(shapes[name])}; the vocabulary map is a non-empty "
                                "vector")
    if not has_d2t:
        return VocabMap(dvs, False, has_t2d, t2d_len=shapes["t2d"][0] if has_t2d else None)
    try:
        d2t = _load_ints(directory, "d2t") or []
        t2d = [bool(v) for v in _load_ints(directory, "t2d")] if has_t2d else None
    except Exception as e:  # safetensors / torch refuse a corrupt tensor in several ways
        raise BadCheckpoint(f"{directory}: the vocabulary map (d2t/t2d) cannot be read ({type(e).__name__})") from None
    target = [i + d for i, d in enumerate(d2t)]
    in_t2d = None
    if t2d is not None:
        in_t2d = all(0 <= t < len(t2d) and t2d[t] for t in target)
    return VocabMap(dvs, True, has_t2d, d2t_len=len(d2t), t2d_len=len(t2d) if t2d is not None else None,
                    t2d_count=sum(t2d) if t2d is not None else None, max_target_id=max(target) if target else None,
                    min_target_id=min(target) if target else None, d2t_in_t2d=in_t2d)


_INT_KEYS = ("hidden_size", "num_hidden_layers", "vocab_size", "draft_vocab_size", "target_hidden_size",
             "num_aux_hidden_states", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             "max_position_embeddings")
CANARY_KEY_NAME = "eagle_audit_canary"  # resolution.CANARY_KEY: where train-canary records its wiring
_DICT_KEYS = ("eagle_config", "speculators_config", "transformer_layer_config", CANARY_KEY_NAME)
_ID_KEYS = ("eagle_aux_hidden_state_layer_ids", "layer_ids")
_BOOL_KEYS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual", "use_aux_norm", "use_aux_hidden_state")
_MAX_INT = 2**31 - 1


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_config(config: Mapping[str, Any], where: str) -> None:
    """Refuse a draft config whose keys have the wrong JSON types, naming the file and key: every key
    eagle-audit reads, at the top level and in ``eagle_config``, ``transformer_layer_config``,
    ``speculators_config.verifier`` and the canary record. Unknown keys are left alone."""

    def bad(key: str, want: str, value: Any) -> BadCheckpoint:
        return BadCheckpoint(f"{where}: {key} must be {want}, got {shown(value)}")

    def check(node: Mapping[str, Any], prefix: str) -> None:
        for key in _INT_KEYS:
            v = node.get(key)
            if v is not None and not (_is_int(v) and 0 < v <= _MAX_INT):
                raise bad(prefix + key, f"a positive integer (at most {_MAX_INT})", v)
        for key in _ID_KEYS:
            v = node.get(key)
            if v is not None and not (isinstance(v, list) and all(_is_int(i) and abs(i) <= 100_000 for i in v)):
                raise bad(prefix + key, "a list of integers (or null)", v)
        for key in _BOOL_KEYS:
            v = node.get(key)
            if v is not None and not isinstance(v, bool):
                raise bad(prefix + key, "true, false or null", v)
        for key in _DICT_KEYS:
            v = node.get(key)
            if v is not None and not isinstance(v, dict):
                raise bad(prefix + key, "a JSON object", v)

    archs = config.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise bad("architectures", "a list of strings", archs)
    for key in ("speculators_model_type", "model_type"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise bad(key, "a string", config[key])
    check(config, "")
    for key in ("eagle_config", "transformer_layer_config"):
        if isinstance(config.get(key), dict):
            check(config[key], key + ".")
    verifier = (config.get("speculators_config") or {}).get("verifier")
    if verifier is not None:
        if not isinstance(verifier, dict):
            raise bad("speculators_config.verifier", "a JSON object", verifier)
        if verifier.get("name_or_path") is not None and not isinstance(verifier["name_or_path"], str):
            raise bad("speculators_config.verifier.name_or_path", "a string", verifier["name_or_path"])
    record = config.get(CANARY_KEY_NAME) or {}
    tb = record.get("trained_boundaries")
    if tb is not None and not (isinstance(tb, list) and tb and all(_is_int(b) and 0 <= b <= 100_000 for b in tb)):
        raise bad(f"{CANARY_KEY_NAME}.trained_boundaries", "a non-empty list of boundaries (integers >= 0)", tb)


def _existing_dir(path: str, what: str) -> Path:
    directory = Path(path).expanduser()
    if not directory.exists():
        if os.path.lexists(directory) or os.path.islink(directory):
            raise InputNotFound(f"{path}: a broken symbolic link or a symbolic-link loop, not a {what}")
        raise InputNotFound(f"{path}: no such {what}")
    return directory


_SWAPPED_HINT = f"give the target model with {param('target')} and its draft with {param('draft')}"


def _target_like(config: Mapping[str, Any], shapes: Mapping[str, tuple]) -> int:
    """The decoder layers of a directory that holds a whole model rather than a draft (0: none such): weights of
    more than one decoder layer (``layers.1.``), no ``fc``, and no draft key or architecture in the config
    (:func:`eagle_audit.target.draft_sign`). An EAGLE-3 draft has one decoder layer and an fc."""
    if draft_sign(dict(config)) or "fc.weight" in shapes:
        return 0
    layers = {int(m.group(1)) for k in shapes if (m := re.match(r"(?:.*\.)?layers\.(\d+)\.", k))}
    return len(layers) if len(layers) > 1 else 0


def read_draft(path: str, config_only: bool = False) -> DraftSpec:
    """The draft at ``path``. ``config_only``: a directory with config.json and no weights is read too (fc
    sized from the config: :meth:`DraftSpec.for_target`), for a static audit."""
    directory = _existing_dir(path, "draft directory")
    if not directory.is_dir():
        if directory.suffix == ".gguf":
            raise BadCheckpoint(f"{path}: a .gguf file is a target model, not a draft (a draft is a directory with "
                                "config.json and weights)", hint=_SWAPPED_HINT)
        raise BadCheckpoint(f"{path}: a draft is a directory with config.json and weights")
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise BadCheckpoint(f"{cfg_path}: missing (not a draft checkpoint)")
    config = read_json_object(cfg_path, BadCheckpoint, "a draft config")
    check_config(config, str(cfg_path))
    nested = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    use_aux = bool(nested.get("use_aux_hidden_state", True))
    has_weights = True
    try:
        files = weight_files(directory)
    except BadCheckpoint as e:
        if not config_only:
            raise BadCheckpoint(e.message, hint=f"a config-only draft (no weights yet) is audited by layers with "
                                f"{param('static', True)}") from None
        files, has_weights = [], False
    shapes = _shapes(files)
    from .block import draft_kind
    from .family import draft_family

    family = draft_family(config)  # what the draft's family reads beyond EAGLE-3's layouts (draft/family.py)
    block = family.read(config, str(cfg_path)) if family.read is not None else None
    layout = family.layout(config) if family.layout is not None else _layout(config, shapes)
    layer_cfg = config.get("transformer_layer_config") if layout == "speculators" else None
    hidden = (layer_cfg or {}).get("hidden_size") or config.get("hidden_size")
    if "fc.weight" in shapes:
        fc_shape = shapes["fc.weight"]
        if len(fc_shape) != 2 or min(fc_shape) <= 0:
            raise BadCheckpoint(f"{directory}: fc.weight has shape {list(fc_shape)}; an EAGLE-3 fc is a non-empty matrix "
                                "[hidden, n_aux * target_hidden]")
        (fc_out, fc_in), fc_source = fc_shape, "weights"
    elif not use_aux:  # eagle_config.use_aux_hidden_state: false: no fc, the target's last state only
        fc_out, fc_in, fc_source = 0, 0, "none"
    elif not has_weights:
        if not hidden:
            raise BadCheckpoint(f"{cfg_path}: a config-only draft needs hidden_size to size fc")
        fc_out, fc_in, fc_source = int(hidden), 0, "config"
    elif _target_like(config, shapes):
        raise BadCheckpoint(f"{path}: this is a target model, not a draft (config.json: architectures "
                            f"{', '.join(config.get('architectures') or ()) or '-'}, {_target_like(config, shapes)} "
                            "decoder layers, no fc.weight)", hint=_SWAPPED_HINT)
    else:
        raise BadCheckpoint(f"{directory}: no fc.weight: not an EAGLE-3 draft (weights: {', '.join(sorted(shapes)[:6])}"
                            "...; a draft without aux states says eagle_config.use_aux_hidden_state: false)")
    hidden = hidden or fc_out
    if not hidden:
        raise BadCheckpoint(f"{cfg_path}: the draft has no fc and its config no hidden_size")
    num_layers = (layer_cfg or {}).get("num_hidden_layers") or config.get("num_hidden_layers") or 1
    vocab_size = (layer_cfg or {}).get("vocab_size") or config.get("vocab_size")
    flags = {}
    for name in ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual"):
        flags[name] = config.get(name, nested.get(name))
    if flags["fc_norm"] is None and config.get("use_aux_norm") is not None:
        flags["fc_norm"] = config.get("use_aux_norm")
    verifier = ((config.get("speculators_config") or {}).get("verifier") or {}).get("name_or_path")
    vocab = (_vocab_map(directory, config, shapes) if has_weights
             else VocabMap(config.get("draft_vocab_size"), False, False))
    return DraftSpec(
        path=str(directory), layout=layout, architectures=tuple(config.get("architectures") or ()), config=config,
        config_sha256=hashlib.sha256(cfg_path.read_bytes()).hexdigest(), hidden_size=int(hidden),
        num_layers=int(num_layers), fc_in=int(fc_in), fc_out=int(fc_out),
        target_hidden_size=config.get("target_hidden_size"), num_aux_hidden_states=config.get("num_aux_hidden_states"),
        vocab_size=vocab_size, vocab=vocab, flags=flags, use_aux_hidden_state=use_aux,
        weight_names=tuple(sorted(shapes)), verifier=verifier, has_weights=has_weights, fc_source=fc_source,
        kind=draft_kind(config), block=block, shapes=dict(shapes))
