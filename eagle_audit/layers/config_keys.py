"""``DRAFT_CONFIG_KEY``: the draft config checked against its own weights and against what the engine's draft class
reads from it.

An engine builds an EAGLE-3 draft from its config before it loads a weight: SGLang 0.5.23 and vLLM 0.33.0 read a
plain draft config with transformers' ``AutoConfig.from_pretrained`` (SGLang ``srt/utils/hf_transformers/config.py``
``HfModelConfigParser.parse``:228-233; vLLM ``transformers_utils/config.py`` ``HFConfigParser.parse``:445-451; a
speculators config through its loader, ``configs/speculators/base.py``:58-63, which builds the class's config from
``transformer_layer_config``). A key the config lacks is then the config class's default (transformers'
``LlamaConfig``: ``hidden_size`` 4096, ``num_attention_heads`` 32, ``vocab_size`` 32000, ``num_hidden_layers``
32, ...), and the draft class sizes its modules from it:

* ``model_type`` absent: ``AutoConfig`` raises ``ValueError: Unrecognized model in DIR. Should have a
  `model_type` key in its config.json`` (both engines), before any weight;
* ``draft_vocab_size`` absent, ``tie_word_embeddings`` false: SGLang's ``LlamaForCausalLMEagle3.__init__``
  reads ``config.draft_vocab_size`` (``llama_eagle3.py``:306-309), which a transformers config without the key
  does not have: ``AttributeError``; vLLM's ``Eagle3LlamaForCausalLM`` takes ``vocab_size`` instead
  (``llama_eagle3.py``:314-316) and sizes ``lm_head`` from it;
* any other size (``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
  ``intermediate_size``, ``vocab_size``, ``draft_vocab_size``) that is absent or written wrong sizes a module
  other than the weights: the load stops at ``default_weight_loader``'s ``AssertionError: Attempted to load weight
  (...) into parameter (...)`` (``model_loader/weight_utils.py``, both engines) or a parallel layer's own shape
  check; ``num_hidden_layers`` builds that many decoder layers (``range(config.num_hidden_layers)``, both
  ``llama_eagle3.py``), the ones the weights lack never loaded.

The defaults are asked of the installed transformers' config class for the config's ``model_type`` (the class
the engine builds), never copied. The weights' shapes come from the safetensors headers
(:attr:`eagle_audit.draft.read.DraftSpec.shapes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..draft.family import draft_family
from .checks import Context, check
from .result import Finding

#: where each engine family reads a plain draft config, and what its draft class reads from it
LOADERS = {
    "sglang": "SGLang 0.5.23 reads it with transformers' AutoConfig.from_pretrained (srt/utils/hf_transformers/config.py:228-233)",
    "vllm": "vLLM 0.33.0 reads it with transformers' AutoConfig.from_pretrained (transformers_utils/config.py:445-451)",
}
UNRECOGNIZED = "ValueError: Unrecognized model in {path}. Should have a `model_type` key in its config.json"
SGLANG_NO_DRAFT_VOCAB = ("AttributeError: '{cls}' object has no attribute 'draft_vocab_size' "
                         "(LlamaForCausalLMEagle3.__init__, srt/models/llama_eagle3.py:306-309)")
LOAD_ERROR = ("the load stops with AssertionError: Attempted to load weight (torch.Size({got})) into parameter "
              "(torch.Size({want})) (model_loader/weight_utils.py default_weight_loader), or the parallel layer's own "
              "shape check")


@dataclass(frozen=True)
class Built:
    """One size the engine's draft class builds: the key, the value it builds with, whether the config gave it."""

    key: str
    value: Any
    given: bool


def family(conv) -> str | None:
    """``sglang`` or ``vllm`` for an engine convention with EAGLE-3 draft classes (None: not checked)."""
    root = conv.base or conv
    if not root.draft_classes or "eagle3" not in conv.draft_kinds:
        return None
    return "sglang" if root.name.startswith("sglang") else "vllm" if root.name.startswith("vllm") else None


#: the sizes transformers' config classes build with when a key is absent, for the decoder types drafts are built
#: from: read from here first, so a static audit imports no transformers (tests/layers/test_layers_config_keys.py pins
#: them against the installed transformers); any other model_type asks transformers itself
CLASS_DEFAULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                              "head_dim": 128, "intermediate_size": 11008, "vocab_size": 32000,
                              "num_hidden_layers": 32, "tie_word_embeddings": False}),
    "qwen2": ("Qwen2Config", {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                              "intermediate_size": 22016, "vocab_size": 151936, "num_hidden_layers": 32,
                              "tie_word_embeddings": False}),
    "qwen3": ("Qwen3Config", {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                              "head_dim": 128, "intermediate_size": 22016, "vocab_size": 151936,
                              "num_hidden_layers": 32, "tie_word_embeddings": False}),
    "mistral": ("MistralConfig", {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                                  "head_dim": 128, "intermediate_size": 14336, "vocab_size": 32000,
                                  "num_hidden_layers": 32, "tie_word_embeddings": False}),
}
SIZE_KEYS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
             "vocab_size", "num_hidden_layers", "tie_word_embeddings")


def class_defaults(model_type: str | None) -> tuple[str, dict[str, Any] | None] | None:
    """The config class's name and the sizes it builds with when a key is absent (None for the sizes: the class
    needs arguments, only the keys given are known; None in all: transformers has no class by that name)."""
    if model_type in CLASS_DEFAULTS:
        return CLASS_DEFAULTS[model_type]
    try:
        from transformers import CONFIG_MAPPING

        cls = CONFIG_MAPPING[model_type] if model_type else None
    except (KeyError, ImportError):
        return None
    if cls is None:
        return None
    try:
        made = cls()
    except Exception:  # a config class that needs arguments
        return cls.__name__, None
    return cls.__name__, {k: getattr(made, k) for k in SIZE_KEYS if getattr(made, k, None) is not None}


def build(view: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> dict[str, Built]:
    """The sizes the config class builds from ``view``: each key given, or its default."""
    out = {}
    for key in SIZE_KEYS:
        if view.get(key) is not None:
            out[key] = Built(key, view[key], True)
        elif defaults is not None and defaults.get(key) is not None:
            out[key] = Built(key, defaults[key], False)
    # derived as LlamaConfig / Qwen3Config derive them when absent
    if "num_key_value_heads" in out and not out["num_key_value_heads"].given and "num_attention_heads" in out:
        out["num_key_value_heads"] = Built("num_key_value_heads", out["num_attention_heads"].value, False)
    if ("head_dim" not in out or not out["head_dim"].given) and {"hidden_size", "num_attention_heads"} <= set(out):
        out["head_dim"] = Built("head_dim", out["hidden_size"].value // out["num_attention_heads"].value, False)
    if view.get("draft_vocab_size") is not None:
        out["draft_vocab_size"] = Built("draft_vocab_size", view["draft_vocab_size"], True)
    return out


def _first(shapes: Mapping[str, tuple], *names: str) -> tuple[str, tuple] | None:
    return next(((n, tuple(shapes[n])) for n in names if n in shapes), None)


def decoder_layers(shapes: Mapping[str, tuple]) -> int | None:
    """How many decoder layers the weights hold (``midlayer.`` is layer 0 in SGLang's legacy map)."""
    found = {int(m.group(1)) for k in shapes if (m := re.match(r"layers\.(\d+)\.", k))}
    if any(k.startswith("midlayer.") for k in shapes):
        found.add(0)
    return len(found) or None


def expectations(built: Mapping[str, Built], attention: str | None, draft_vocab: Built | None
                 ) -> list[tuple[str, tuple[str, ...], int, int, tuple[str, ...]]]:
    """(weight, its names, axis, the size the class builds, the keys that size comes from) for each module."""
    get = lambda k: built[k].value if k in built else None  # noqa: E731
    h = get("hidden_size")
    out = []
    layer = ("midlayer.", "layers.0.")
    if h is not None:
        out += [("fc.weight", ("fc.weight",), 0, h, ("hidden_size",)),
                ("norm.weight", ("norm.weight",), 0, h, ("hidden_size",))]
    if attention in (None, "llama", "qwen3") and None not in (get("num_attention_heads"), get("head_dim")):
        hd = get("head_dim")
        out.append(("q_proj", tuple(p + "self_attn.q_proj.weight" for p in layer), 0, get("num_attention_heads") * hd,
                    ("num_attention_heads", "head_dim")))
        if get("num_key_value_heads") is not None:
            out.append(("k_proj", tuple(p + "self_attn.k_proj.weight" for p in layer), 0,
                        get("num_key_value_heads") * hd, ("num_key_value_heads", "head_dim")))
        if h is not None:
            out.append(("q_proj input", tuple(p + "self_attn.q_proj.weight" for p in layer), 1, 2 * h, ("hidden_size",)))
    if get("intermediate_size") is not None:
        out.append(("gate_proj", tuple(p + "mlp.gate_proj.weight" for p in layer), 0, get("intermediate_size"),
                    ("intermediate_size",)))
    if get("vocab_size") is not None:
        out.append(("embed_tokens", ("embed_tokens.weight",), 0, get("vocab_size"), ("vocab_size",)))
    if draft_vocab is not None and not get("tie_word_embeddings"):
        out.append(("lm_head", ("lm_head.weight",), 0, draft_vocab.value, (draft_vocab.key,)))
    return out


def _values(cause: list[Built], have: int, want: int) -> str:
    """The keys to write and, where one key alone sizes the module, the value the weights imply."""
    if len(cause) == 1 and want:
        b = cause[0]
        value = have * b.value // want  # the key scales the size linearly (hidden_size: q_proj's input is 2 x)
        if have * b.value % want == 0:
            return f"{b.key}: {value}"
    if len(cause) == 2 and cause[1].key == "head_dim" and cause[1].value and have % cause[1].value == 0:
        return f"{cause[0].key}: {have // cause[1].value} (with head_dim {cause[1].value})"
    return ", ".join(b.key for b in cause)


def _said(b: Built, cls_name: str) -> str:
    return f"{b.key} {b.value}" + ("" if b.given else f" (absent: {cls_name}'s default)")


@check
def draft_config_keys(ctx: Context) -> Iterable[Finding]:
    """Every key the engine's draft class sizes a module from: absent (the config class's default, or the engine's
    load error) or contradicting the weights."""
    if ctx.served is None or ctx.served.convention is None or not draft_family(ctx.draft.draft_kind).config_keys:
        return
    conv = ctx.served.convention
    fam = family(conv)
    if fam is None or conv.draft_class is None:
        return
    cls_name = conv.draft_class.name
    view = conv.view(ctx.draft.config)
    speculators = view is not ctx.draft.config
    where = f"{ctx.draft.path}/config.json"
    model_type = view.get("model_type")
    if not speculators and not model_type:
        yield Finding(
            "DRAFT_CONFIG_KEY", "error", None,
            f"{where} has no model_type: {LOADERS[fam]}, which needs it to pick the config class; {ctx.eng} stops with "
            f"{UNRECOGNIZED.format(path=ctx.draft.path)}.",
            "The engine cannot build the draft's config: it fails at start-up, before any weight is read.",
            "Add the model_type of the draft's decoder layer to config.json (\"llama\" for a Llama-type draft, "
            "\"qwen3\" for a Qwen3 one).")
        return
    found = class_defaults(model_type or "llama")
    if found is None:
        return
    cfg_name, defaults = found
    built = build(view, defaults)
    draft_vocab = built.get("draft_vocab_size")
    tied = bool(built.get("tie_word_embeddings") and built["tie_word_embeddings"].value)
    if draft_vocab is None and not tied:
        if fam == "sglang" and cls_name == "llama_eagle3" and "draft_vocab_size" not in view:
            # null is read as absent (`if config.draft_vocab_size is None`: vocab_size, lm_head from the target);
            # a key the config does not have at all is an AttributeError
            yield Finding(
                "DRAFT_CONFIG_KEY", "error", None,
                f"{where} has no draft_vocab_size: {ctx.eng}'s {cls_name} stops with "
                f"{SGLANG_NO_DRAFT_VOCAB.format(cls=cfg_name)}.",
                "The engine cannot build the draft: it fails at start-up.",
                "Add draft_vocab_size to config.json: the number of rows of lm_head.weight"
                + (f" ({ctx.draft.shapes['lm_head.weight'][0]})" if "lm_head.weight" in ctx.draft.shapes else "") + ".")
        elif "vocab_size" in built:
            draft_vocab = Built("vocab_size", built["vocab_size"].value, built["vocab_size"].given)
    shapes = ctx.draft.shapes
    reported: set[str] = set()
    for what, names, axis, want, keys in expectations(built, conv.draft_class.attention, draft_vocab):
        found = _first(shapes, *names)
        if found is None or len(found[1]) <= axis or found[1][axis] == want:
            continue
        name, shape = found
        cause = [built[k] for k in keys if k in built] or [draft_vocab]
        if any(b.key in reported for b in cause):
            continue
        reported.update(b.key for b in cause)
        absent = [b for b in cause if not b.given]
        sizes = list(shape)
        wanted = list(shape)
        wanted[axis] = want
        via = (f" ({'; '.join(_said(b, cfg_name) for b in cause)})")
        yield Finding(
            "DRAFT_CONFIG_KEY", "error", None,
            f"{ctx.eng}'s {cls_name} builds {what} for {want} on axis {axis}{via}; the weights' {name} is {sizes}.",
            (f"{LOADERS[fam]}; a key the config lacks is {cfg_name}'s default. " if absent else "")
            + f"The engine sizes {what} from the config, not from the weights: {LOAD_ERROR.format(got=sizes, want=wanted)}.",
            "Write " + _values(cause, shape[axis], want) + " in config.json, as the weights have it"
            + (" (absent keys are the config class's defaults)" if absent else "") + ".")
    vocab = built.get("vocab_size")
    if (fam == "vllm" and cls_name == "llama_eagle3" and vocab is not None and ctx.target.vocab_size
            and vocab.value != ctx.target.vocab_size and "vocab_size" not in reported):
        reduced = draft_vocab is not None and draft_vocab.value != ctx.target.vocab_size
        yield Finding(
            "DRAFT_CONFIG_KEY", "error", None,
            f"{ctx.eng}'s {cls_name} sizes the draft's logits over the target vocabulary from the draft config's "
            f"{_said(vocab, cfg_name)}; the target's vocabulary has {ctx.target.vocab_size} tokens.",
            "Eagle3LlamaForCausalLM.compute_logits (llama_eagle3.py:373-392) "
            + ("scatters the reduced vocabulary's logits into config.vocab_size columns: target ids at or past "
               f"{vocab.value} index out of range, and the columns do not line up with the target's tokens"
               if reduced else f"asserts logits.shape[1] == config.vocab_size: AssertionError: Expected logits to "
               f"have shape (*, {vocab.value}) at the first draft step") + ".",
            f"Write vocab_size: {ctx.target.vocab_size} (the target's) in config.json.")
    layers = decoder_layers(shapes)
    n = built.get("num_hidden_layers")
    if layers is not None and n is not None and n.value != layers:
        yield Finding(
            "DRAFT_CONFIG_KEY", "error", None,
            f"{ctx.eng}'s {cls_name} builds {n.value} decoder layer(s) ({_said(n, cfg_name)}); the weights hold "
            f"{layers}.",
            "Both engines build range(config.num_hidden_layers) decoder layers (llama_eagle3.py); the layers the weights "
            "lack are never loaded and run with their initial values"
            + (" (SGLang's kimi_k25_eagle3 refuses: ValueError: EAGLE3 currently only supports 1 layer)"
               if cls_name == "kimi_k25_eagle3" else "") + ".",
            f"Write num_hidden_layers: {layers} in config.json.")
