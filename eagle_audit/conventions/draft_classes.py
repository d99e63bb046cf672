"""The EAGLE-3 draft classes an engine serves, declared as data in its convention file (``draft_classes``).

An engine does not run every EAGLE-3 draft the same way: it picks a draft *class* by the draft config's
``architectures[0]`` (SGLang's and vLLM's model registries), or, for a speculators-format config, by what its
config loader maps ``speculators_model_type`` and ``transformer_layer_config.model_type`` to (vLLM
``transformers_utils/configs/speculators/algos.py``). Each class sizes ``fc`` from its own keys, honours its own
draft flags, and has its own decoder layer (Llama GQA attention, Qwen3 attention with per-head q/k norms, or
DeepSeek multi-latent attention). A class declares only what differs from the convention's draft side; what it
leaves out is the convention's (``aux_count_from``, ``draft_flags``, ``fc_skip_when_width_equals_hidden``).

Convention file keys (engines):

``draft_classes``
    a list of ``{"name", "architectures": [...], "source", "attention": "llama"|"qwen3"|"mla",
    "aux_count_from", "aux_count_empty": "absent"|"zero" (an empty id list sizes fc for 3, or for 0 as
    SGLang's ``kimi_k25_eagle3.py`` does), "draft_flags", "fc_skip_when_width_equals_hidden",
    "use_aux_hidden_state": "flag"|"width"|"ignored" (how the class treats a draft with
    ``eagle_config.use_aux_hidden_state: false``: it skips fc on that flag, it skips fc because the state it is
    fed has the draft's width, or it applies fc regardless), "notes"}``.
``draft_class_fallback``
    the class a draft whose architecture no class lists is audited with (said in the notes), or null: such a
    draft is one the engine cannot load.
``speculators_loader``
    ``{"source", "types": {speculators_model_type: {"architectures": {model_type: architecture}, "sets":
    {key: default} (keys copied from the config's top level, with this default when absent), "copies_if_set":
    [keys copied when set], "source"}}}``: the config the engine's draft class reads is the
    ``transformer_layer_config`` updated this way; an unknown type or model_type is a draft the engine cannot
    load. Optional ``"used_when": {"absent": [keys], "present": [keys], "source"}``: the engine takes this loader
    only for a config without the ``absent`` top-level keys and with the ``present`` ones (vLLM's config parser
    picks the speculators config class only when ``model_type`` is absent and ``speculators_config`` is
    there); any other config is read as a plain config of its ``model_type``, its ``architectures`` as written.
``draft_architecture_rename``
    ``{"prefix", "keep_prefix", "keep_suffix", "source", "error"}``: the engine renames a plain (not speculators-loaded)
    draft config's ``architectures[0]`` before looking it up in its registry: ``prefix + arch`` unless the
    name starts with ``keep_prefix`` or ends with ``keep_suffix`` (vLLM's ``EAGLEConfig`` for ``eagle3``:
    ``LlamaForCausalLM`` -> ``Eagle3LlamaForCausalLM``, ``Eagle3Speculator`` kept as it is).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import BadConvention

ATTENTION = ("llama", "qwen3", "mla")
USE_AUX = ("flag", "width", "ignored")


@dataclass(frozen=True)
class DraftClass:
    """One draft class of an engine (see the module docstring)."""

    name: str
    architectures: tuple[str, ...]
    source: str
    attention: str = "llama"
    aux_count_from: tuple[Any, ...] | None = None  # None: the convention's
    aux_count_empty: str = "absent"
    draft_flags: Mapping[str, Any] | None = None  # name -> conventions.FlagRule; None: the convention's
    fc_skip_when_width_equals_hidden: bool | None = None
    use_aux_hidden_state: str = "width"
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "architectures": list(self.architectures), "source": self.source,
                     "attention": self.attention, "use_aux_hidden_state": self.use_aux_hidden_state}
        if self.aux_count_from is not None:
            out["aux_count_from"] = list(self.aux_count_from)
        if self.aux_count_empty != "absent":
            out["aux_count_empty"] = self.aux_count_empty
        if self.draft_flags is not None:
            out["draft_flags"] = {k: f.to_json() for k, f in self.draft_flags.items()}
        if self.fc_skip_when_width_equals_hidden is not None:
            out["fc_skip_when_width_equals_hidden"] = self.fc_skip_when_width_equals_hidden
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class LoaderType:
    """What a speculators config loader does for one ``speculators_model_type``."""

    architectures: Mapping[str, str]  # transformer_layer_config.model_type -> architecture
    sets: Mapping[str, Any] = field(default_factory=dict)  # key -> default (copied from the top level)
    copies_if_set: tuple[str, ...] = ()
    source: str = ""
    renames: Mapping[str, str] = field(default_factory=dict)  # config key -> the key it is stored under
    parallel_drafting: bool = False  # the engine drafts several tokens per forward for this type (P-EAGLE)


@dataclass(frozen=True)
class ArchitectureRename:
    """How an engine renames a plain draft config's architecture before its registry lookup (module docstring)."""

    prefix: str
    keep_prefix: str = ""
    keep_suffix: str = ""
    source: str = ""
    error: str = ""  # the engine's message when the renamed architecture is not registered ({arch}: its repr)

    def apply(self, arch: str) -> str:
        if (self.keep_prefix and arch.startswith(self.keep_prefix)) or (self.keep_suffix and arch.endswith(self.keep_suffix)):
            return arch
        return self.prefix + arch

    def to_json(self) -> dict:
        return {"prefix": self.prefix, "keep_prefix": self.keep_prefix, "keep_suffix": self.keep_suffix,
                "source": self.source, **({"error": self.error} if self.error else {})}


def parse_rename(data: Any, where: str) -> ArchitectureRename | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("prefix"), str):
        raise BadConvention(f"{where}: draft_architecture_rename must be an object with a string 'prefix'")
    extra = set(data) - {"prefix", "keep_prefix", "keep_suffix", "source", "error"}
    if extra:
        raise BadConvention(f"{where}: draft_architecture_rename: unknown key(s) {', '.join(sorted(extra))}")
    return ArchitectureRename(data["prefix"], str(data.get("keep_prefix", "")), str(data.get("keep_suffix", "")),
                              str(data.get("source", "")), str(data.get("error", "")))


@dataclass(frozen=True)
class SpeculatorsLoader:
    types: Mapping[str, LoaderType]
    source: str = ""
    absent: tuple[str, ...] = ()  # used only for a config without these top-level keys ...
    present: tuple[str, ...] = ()  # ... and with these
    used_when_source: str = ""

    def applies(self, config: Mapping[str, Any]) -> bool:
        """Whether the engine reads ``config`` through this loader (a speculators config it recognises as one)."""
        if not config.get("speculators_model_type"):
            return False
        return (all(config.get(k) is None for k in self.absent)
                and all(config.get(k) is not None for k in self.present))

    def why_not(self, config: Mapping[str, Any]) -> str:
        """Why a config marked speculators is not read through this loader ("" when it is)."""
        if not config.get("speculators_model_type") or self.applies(config):
            return ""
        have = [k for k in self.absent if config.get(k) is not None]
        lack = [k for k in self.present if config.get(k) is None]
        parts = [f"top-level {k} {config[k]!r}" for k in have] + [f"no {k}" for k in lack]
        return (f"its speculators config loader is used only for a config with no top-level "
                f"{', '.join(self.absent) or '-'} and with {', '.join(self.present) or '-'} "
                f"({self.used_when_source}); this one has {' and '.join(parts)}, so it is read as a plain config")

    def parallel_drafting(self, config: Mapping[str, Any]) -> bool:
        spec = self.types.get(config.get("speculators_model_type"))
        return bool(spec and spec.parallel_drafting)

    def view(self, config: Mapping[str, Any]) -> tuple[dict | None, str]:
        """The config the engine's draft class reads (None: the loader refuses it), and how it was made."""
        kind = config.get("speculators_model_type")
        spec = self.types.get(kind)
        if spec is None:
            return None, (f"its speculators config loader knows speculators_model_type "
                          f"{', '.join(sorted(self.types))}, not {kind!r} ({self.source})")
        layer = config.get("transformer_layer_config")
        out = dict(layer) if isinstance(layer, Mapping) else {}
        for key, default in spec.sets.items():
            out[key] = config.get(key, default)
        for key, to in spec.renames.items():
            if key in config:
                out[to] = config[key]
        for key in spec.copies_if_set:
            if config.get(key):
                out[key] = config[key]
        model_type = out.get("model_type", "llama")
        arch = spec.architectures.get(model_type)
        if arch is None:
            return None, (f"its speculators loader raises ValueError: Unsupported model_type {model_type} for "
                          f"{kind} speculator (it maps {', '.join(sorted(spec.architectures))}; {spec.source})")
        out["architectures"] = [arch]
        return out, f"speculators_model_type {kind!r}, model_type {model_type!r} -> {arch} ({spec.source})"


def parse_draft_classes(data: Any, where: str, parse_flags: Callable[[Any, str], Mapping[str, Any]]
                        ) -> tuple[DraftClass, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise BadConvention(f"{where}: draft_classes must be a list of objects")
    known = {"name", "architectures", "source", "attention", "aux_count_from", "aux_count_empty", "draft_flags",
             "fc_skip_when_width_equals_hidden", "use_aux_hidden_state", "notes"}
    out = []
    for i, c in enumerate(data):
        w = f"{where}: draft_classes[{i}]"
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise BadConvention(f"{w}: a draft class is an object with a 'name'")
        extra = set(c) - known
        if extra:
            raise BadConvention(f"{w}: unknown key(s) {', '.join(sorted(extra))}")
        archs = c.get("architectures", [])
        if not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise BadConvention(f"{w}.architectures must be a list of strings")
        attention = c.get("attention", "llama")
        if attention not in ATTENTION:
            raise BadConvention(f"{w}.attention: one of {', '.join(ATTENTION)}, got {attention!r}")
        use_aux = c.get("use_aux_hidden_state", "width")
        if use_aux not in USE_AUX:
            raise BadConvention(f"{w}.use_aux_hidden_state: one of {', '.join(USE_AUX)}, got {use_aux!r}")
        empty = c.get("aux_count_empty", "absent")
        if empty not in ("absent", "zero"):
            raise BadConvention(f"{w}.aux_count_empty: 'absent' or 'zero', got {empty!r}")
        aux = c.get("aux_count_from")
        out.append(DraftClass(
            name=c["name"], architectures=tuple(archs), source=str(c.get("source", "")), attention=attention,
            aux_count_from=tuple(aux) if aux is not None else None, aux_count_empty=empty,
            draft_flags=parse_flags(c["draft_flags"], w) if c.get("draft_flags") is not None else None,
            fc_skip_when_width_equals_hidden=c.get("fc_skip_when_width_equals_hidden"),
            use_aux_hidden_state=use_aux, notes=tuple(c.get("notes", ()))))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise BadConvention(f"{where}: draft_classes: duplicate names")
    return tuple(out)


def parse_loader(data: Any, where: str) -> SpeculatorsLoader | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("types"), Mapping):
        raise BadConvention(f"{where}: speculators_loader must be an object with 'types'")
    types = {}
    for name, t in data["types"].items():
        if not isinstance(t, Mapping) or not isinstance(t.get("architectures"), Mapping):
            raise BadConvention(f"{where}: speculators_loader.types.{name} needs 'architectures'")
        types[name] = LoaderType(dict(t["architectures"]), dict(t.get("sets", {})), tuple(t.get("copies_if_set", ())),
                                 str(t.get("source", "")), dict(t.get("renames", {})),
                                 bool(t.get("parallel_drafting", False)))
    used = data.get("used_when") or {}
    if not isinstance(used, Mapping) or set(used) - {"absent", "present", "source"}:
        raise BadConvention(f"{where}: speculators_loader.used_when is an object with 'absent', 'present', 'source'")
    return SpeculatorsLoader(types, str(data.get("source", "")), tuple(used.get("absent", ())),
                             tuple(used.get("present", ())), str(used.get("source", "")))


def loader_json(loader: SpeculatorsLoader) -> dict:
    used = ({"used_when": {"absent": list(loader.absent), "present": list(loader.present),
                           "source": loader.used_when_source}} if loader.absent or loader.present else {})
    return {"source": loader.source, **used,
            "types": {k: {"architectures": dict(t.architectures), "sets": dict(t.sets),
                          "copies_if_set": list(t.copies_if_set), "source": t.source,
                          **({"renames": dict(t.renames)} if t.renames else {}),
                          **({"parallel_drafting": True} if t.parallel_drafting else {})} for k, t in loader.types.items()}}
