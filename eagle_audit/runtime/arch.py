"""What a draft is, resolved from its config and weight names: :class:`DraftArch` (shapes, attention kind,
RoPE), the flags a side runs it with (:func:`flags_from_config`), and the RoPE parameters (:func:`rope_params`,
shared with the block drafts of :mod:`eagle_audit.runtime.block`). No torch here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..draft.read import DraftSpec, canonical_name
from ..errors import BadCheckpoint
from ..resolution import DraftFlags


_LEGACY = {"aux_norm_low": "fc_norm.0", "aux_norm_mid": "fc_norm.1", "aux_norm_high": "fc_norm.2"}


def canonical_weight(name: str) -> str:
    name = canonical_name(name)
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    for old, new in _LEGACY.items():
        if name.startswith(old):
            name = new + name[len(old):]
    return name


def flags_from_config(config: Mapping[str, Any], layout: str, semantics: str = "sglang") -> DraftFlags:
    """Flags as written in a draft config (tests and benches that run a draft outside an audit). SGLang
    never reads ``norm_before_residual``; vLLM's speculators loader defaults it to True when absent
    (conventions.md section 3)."""
    nested = config.get("eagle_config") if isinstance(config.get("eagle_config"), Mapping) else {}

    def get(name, default=False):
        v = config.get(name, nested.get(name))
        return default if v is None else bool(v)

    nbr = get("norm_before_residual", layout == "speculators") if semantics == "vllm" else False
    return DraftFlags(get("norm_before_fc"), get("fc_norm") or bool(config.get("use_aux_norm")), get("norm_output"),
                      nbr, semantics)


@dataclass(frozen=True)
class LayerShape:
    """What every draft kind's layers share: sizes, the number of target states fc reads, RoPE's base."""

    hidden_size: int
    target_hidden_size: int
    num_aux: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    eps: float
    rope_theta: float


@dataclass(frozen=True)
class DraftArch(LayerShape):
    """Shapes and hyper-parameters of an EAGLE-3 draft, resolved from its config and fc shape."""

    vocab_size: int
    draft_vocab_size: int
    tie_word_embeddings: bool = False
    head_from_target: bool = False  # draft_vocab_size null: the target's lm_head (full vocab) is used
    rope: RopeScaling | None = None  # None: default RoPE
    notes: tuple[str, ...] = field(default=(), compare=False)
    no_fc: bool = False  # eagle_config.use_aux_hidden_state: false: the target's last state is fed unprojected
    attention: str = "llama"  # "llama" (GQA), "qwen3" (GQA + per-head q/k RMSNorm), "mla" (DeepSeek multi-latent)
    attention_bias: bool = False  # q/k/v biases (qwen3_eagle3.py:69 attention_bias)
    mla: "MlaDims | None" = None


@dataclass(frozen=True)
class MlaDims:
    """DeepSeek multi-latent attention sizes (draft config keys of the same names)."""

    q_lora_rank: int | None  # None: a plain q_proj (vLLM allows it; SGLang's kimi_k25_eagle3.py:114-117 refuses)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_interleave: bool = True  # SGLang deepseek_v2.py:2166 / HF: pairs (2i, 2i+1) rotate; vLLM always does


@dataclass(frozen=True)
class RopeScaling:
    """A ``rope_scaling`` block the runtime applies: ``linear`` (positions / factor), ``llama3`` (per-band
    frequency division), ``yarn`` (frequency blend + attention scale)."""

    kind: str
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float = 1.0
    mscale_all_dim: float = 0.0


#: The rope_scaling types the runtime implements.
ROPE_IMPLEMENTED = ("linear", "llama3", "yarn")


def rope_params(cfg: Mapping[str, Any], applied: Sequence[str]) -> tuple[float, RopeScaling | None, list[str]]:
    """theta and the scaling to apply, from ``rope_parameters`` / ``rope_scaling``; ``applied``: the types
    the side running the draft applies."""
    notes = []
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(params, Mapping):
        params = {}
    theta = float(cfg.get("rope_theta") or params.get("rope_theta") or 10000.0)
    kind = params.get("rope_type", params.get("type")) or "default"
    if kind == "default":
        return theta, None, notes
    if kind not in applied:
        notes.append(f"rope_scaling {kind!r} is not applied by this side: run as default RoPE (theta {theta})")
        return theta, None, notes
    if kind not in ROPE_IMPLEMENTED:
        notes.append(f"rope_scaling {kind!r} is not implemented by the draft runtime: run as default RoPE "
                     f"(theta {theta}); positions beyond the original context are approximated")
        return theta, None, notes
    get = lambda key, default: float(params[key]) if params.get(key) is not None else default  # noqa: E731
    rope = RopeScaling(kind, get("factor", 1.0), get("low_freq_factor", 1.0), get("high_freq_factor", 4.0),
                       int(get("original_max_position_embeddings", 8192)), get("beta_fast", 32.0),
                       get("beta_slow", 1.0), get("mscale", 1.0), get("mscale_all_dim", 0.0))
    return theta, rope, notes


def weights_attention(names: Sequence[str]) -> str:
    """The decoder attention a checkpoint's weights are for: MLA projections, per-head q/k norms, or plain GQA."""
    names = {canonical_weight(n) for n in names}
    if any(n.endswith(("self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_b_proj.weight")) for n in names):
        return "mla"
    if any(n.endswith("self_attn.q_norm.weight") for n in names):
        return "qwen3"
    return "llama"


def arch_from_spec(spec: DraftSpec, target_hidden: int, target_vocab: int,
                   rope_applied: Sequence[str] = ROPE_IMPLEMENTED, attention: str | None = None) -> DraftArch:
    """``attention``: the decoder attention of the draft class that runs it (an engine's); None: as the
    weights are (a trainer trains the layer its checkpoint holds)."""
    cfg = dict(spec.config)
    if spec.layout == "speculators" and isinstance(cfg.get("transformer_layer_config"), Mapping):
        cfg = {**cfg, **cfg["transformer_layer_config"]}
    H = spec.hidden_size
    Ht = spec.target_hidden_size or target_hidden
    heads = int(cfg.get("num_attention_heads") or max(1, H // 64))
    hd = int(cfg.get("head_dim") or H // heads)
    theta, rope, notes = rope_params(cfg, rope_applied)
    dvs = cfg.get("draft_vocab_size")
    held = weights_attention(spec.weight_names) if spec.weight_names else "llama"
    kind = attention or held
    if "mla" in (kind, held) and kind != held:
        raise BadCheckpoint(f"{spec.path}: the draft's weights are for {held} attention, the draft class serving it "
                            f"runs {kind} attention: the engine cannot load this draft (the draft runtime cannot run it)")
    if kind == "llama" and held == "qwen3":
        notes.append("the draft's q_norm/k_norm weights are not used by this side's draft class (Llama attention)")
    if kind == "qwen3" and held == "llama":
        notes.append("this side's draft class (Qwen3 attention) applies per-head q/k RMSNorm; the checkpoint has no "
                     "q_norm/k_norm weights, so they keep their initial weight 1")
    mla = None
    if kind == "mla":
        try:
            mla = MlaDims(int(cfg["q_lora_rank"]) if cfg.get("q_lora_rank") else None, int(cfg["kv_lora_rank"]),
                          int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"]),
                          bool(cfg.get("rope_interleave", True)))
        except (KeyError, TypeError, ValueError):
            raise BadCheckpoint(f"{spec.path}: an MLA draft config needs kv_lora_rank, qk_nope_head_dim, "
                                "qk_rope_head_dim and v_head_dim") from None
    return DraftArch(
        hidden_size=H, target_hidden_size=int(Ht), num_aux=max(1, spec.fc_in // int(Ht)), num_layers=spec.num_layers,
        num_heads=heads, num_kv_heads=int(cfg.get("num_key_value_heads") or heads), head_dim=hd,
        intermediate_size=int(cfg.get("intermediate_size") or 4 * H), eps=float(cfg.get("rms_norm_eps") or 1e-6),
        rope_theta=theta, vocab_size=int(cfg.get("vocab_size") or target_vocab),
        draft_vocab_size=int(dvs or target_vocab), tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        head_from_target=dvs is None and "lm_head.weight" not in spec.weight_names, rope=rope, notes=tuple(notes),
        no_fc=not spec.use_aux_hidden_state, attention=kind, attention_bias=bool(cfg.get("attention_bias", False)),
        mla=mla)
