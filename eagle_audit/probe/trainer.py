"""Trainers that capture through an engine: their convention derived from that engine's probe.

SpecForge 0.2.0 has no capture code of its own for EAGLE-3: its only target backend is SGLang
(``config/schema.py`` ``target_backend: Literal["sglang"]``), and it hands its resolved ids to the pinned
SGLang's ``set_eagle3_layers_to_capture`` (``offline_capture/sglang_backend/capture.py``; the server
path patches the same model). So it trains on exactly what that SGLang version's setter and capture
loop produce for the ids it passes: the per-architecture rules, the ascending order and the reach all
come from the engine. :func:`trainer_convention_data` takes the engine's :class:`ProbeResult` (from
``eagle-audit probe <engine> --source <wheel>``) and adds only what is the trainer's own: where it reads
the ids, its default ids (passed to the engine as explicit ids), and its draft semantics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..version import __version__
from ..conventions import SCHEMA, Convention, parse_convention
from ..errors import AuditError, param
from .emit import to_convention_data
from .results import ProbeResult


@dataclass(frozen=True)
class DelegatingTrainer:
    """What a trainer that captures through an engine adds to that engine's rules."""

    name: str
    title: str
    version: str
    engine: str
    engine_version: str
    source: str
    ids_from: tuple[str, ...]
    default_ids: str  # computed by the trainer and passed to the engine's setter as explicit ids
    draft_flags: dict[str, dict[str, Any]]
    rope_scaling: tuple[str, ...]
    aux_count_from: tuple[Any, ...]
    notes: tuple[str, ...] = field(default=())
    ids_accepted: dict[str, str] | None = None  # explicit ids the trainer trains on (others it refuses)


SPECFORGE = DelegatingTrainer(
    name="specforge", title="SpecForge", version="0.2.0", engine="sglang", engine_version="0.5.14",
    source="specforge==0.2.0 PyPI wheel (= sgl-project/SpecForge a6b6b02): algorithms/model_providers.py "
           "resolve_eagle_capture_layers (ids: run override, else eagle_config.eagle_aux_hidden_state_layer_ids, "
           "else [1, N//2-1, N-4]; exactly 3, each >= 0), offline_capture/sglang_backend/capture.py "
           "set_eagle3_capture_layers -> the pinned sglang's set_eagle3_layers_to_capture; draft forward "
           "modeling/draft/llama3_eagle.py LlamaForCausalLMEagle3 driven by algorithms/eagle3/model.py "
           "OnlineEagle3Model",
    ids_from=("nested",), default_ids="[1, N // 2 - 1, N - 4]",
    draft_flags={
        # llama3_eagle.py: no input_norm exists; residual = un-normed fc output (midlayer.forward)
        "norm_before_fc": {"honoured": False, "default": False},
        # read as attributes of the LlamaConfig built from config.json: top level only
        "fc_norm": {"honoured": True, "default": False, "read": ["top_level"]},
        # llama3_eagle.py:1690 getattr(config, "norm_output", True); compute_logits norms only before lm_head,
        # algorithms/eagle3/model.py carries the backbone output (pre-norm) to the next TTT step
        "norm_output": {"honoured": True, "default": True, "read": ["top_level"], "semantics": "head"},
        "norm_before_residual": {"honoured": False, "default": False},
    },
    # llama3_eagle.py LlamaAttention._init_rope: default, linear, dynamic, llama3, mrope, yarn
    rope_scaling=("linear", "llama3", "yarn", "dynamic", "mrope"),
    aux_count_from=(3,),  # llama3_eagle.py: fc = Linear(target_hidden_size * 3, hidden_size)
    ids_accepted={"when": "len(ids) == 3 and min(ids) >= 0", "error": "ValueError",
                  "message": "resolved EAGLE capture layers must contain exactly three non-negative integers, got {ids}",
                  "at": "start-up", "source": "specforge==0.2.0: algorithms/model_providers.py:205-210 "
                  "resolve_eagle_capture_layers (distinctness is not checked: duplicates collapse in SGLang's capture "
                  "and stop at the width assert)"},
    notes=(
        "A run override of the ids (model.aux_hidden_state_layer_ids) is not written into the exported config: "
        f"pass it with {param('trained_ids')}.",
        "fc is always applied to the target's states (project_hidden_states has no width rule); the carried "
        "hidden never goes through fc.",
        "Ids whose capture index the engine's loop never reaches leave fewer than 3 states: SpecForge then stops "
        "on the width assert in llama3_eagle.py project_hidden_states.",
        "The older HF-hook backend (config order, +1 for every architecture) is the trainer 'specforge-hf'.",
    ),
)

#: Trainers whose convention is derived from an engine probe: name -> what they add.
DELEGATING_TRAINERS: dict[str, DelegatingTrainer] = {SPECFORGE.name: SPECFORGE}


def trainer_convention_data(trainer: DelegatingTrainer, engine: ProbeResult) -> dict:
    """The trainer's convention file (a JSON-ready dict): the engine's probed rules, each with the
    trainer's default ids passed as explicit ids; the engine's order, reach and per-architecture map."""
    if engine.engine != trainer.engine or engine.version != trainer.engine_version:
        raise AuditError(f"{trainer.title} {trainer.version} captures through {trainer.engine} "
                         f"{trainer.engine_version}, but the source given is {engine.engine} {engine.version}",
                         hint=f"probe the {trainer.engine}=={trainer.engine_version} wheel")
    eng = to_convention_data(engine)
    rules = {}
    for name, rule in eng["rules"].items():
        rules[name] = {"default_ids": trainer.default_ids, "default_explicit": True, "explicit": rule["explicit"],
                       "min_capture": rule["min_capture"], "max_capture": rule["max_capture"],
                       "source": f"{trainer.engine} {engine.version}: {rule['source']}"}
    return {
        "schema": SCHEMA, "name": trainer.name, "kind": "trainer", "title": trainer.title,
        "version": trainer.version, "source": trainer.source,
        "generated_by": f"eagle-audit {__version__} probe {trainer.name}",
        "captures_through": {"engine": trainer.engine, "version": engine.version,
                             "source": f"{trainer.engine}=={engine.version}: {trainer.engine}/srt/models/*.py "
                                       "set_eagle3_layers_to_capture and capture loops, read with ast by "
                                       f"`eagle-audit probe {trainer.engine}`"},
        "ids_from": list(trainer.ids_from), "order": eng["order"], "rules": rules,
        "architectures": eng["architectures"], "fallback_rule": eng["fallback_rule"],
        "unsupported": eng["unsupported"], "aux_count_from": list(trainer.aux_count_from),
        "draft_flags": trainer.draft_flags, "fc_skip_when_width_equals_hidden": False,
        "rope_scaling": list(trainer.rope_scaling),
        **({"ids_accepted": dict(trainer.ids_accepted)} if trainer.ids_accepted else {}),
        "notes": [f"Capture rules, order and reach derived by `eagle-audit probe {trainer.name} --source "
                  f"<{trainer.engine}=={engine.version} wheel>`: {trainer.title} {trainer.version} passes its ids to "
                  f"{trainer.engine} {engine.version}'s own set_eagle3_layers_to_capture, so every rule is that "
                  "engine's, applied to the ids the trainer passes (its default included)."] + list(trainer.notes),
    }


def trainer_convention(trainer: DelegatingTrainer, engine: ProbeResult) -> Convention:
    return parse_convention(trainer_convention_data(trainer, engine), f"probe:{trainer.name}")
