"""One resolved wiring per (draft, target, trainer, engine): every fact the audit needs, asked of the
conventions exactly once.

:func:`resolve_audit` turns the two conventions into a frozen :class:`Resolution` holding a
:class:`SideWiring` for the trained and for the served side: the states in concatenation order, the
order rule, the capture rule and its reach, how many aux states the side sizes ``fc`` for, which id
places it reads and which it ignores, and the draft semantics it runs (:class:`DraftFlags`).
``layers``, ``accept-rate``, :mod:`eagle_audit.layers.diagnose`, :mod:`eagle_audit.layers.fix` and the draft runtime
read this object; nothing else asks a :class:`~eagle_audit.conventions.Convention` again (the one
exception is :meth:`SideWiring.reresolve`, with which :mod:`eagle_audit.layers.fix` checks a patched config
against the same rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from . import expr
from .conventions import DRAFT_FLAGS, CaptureRule, Convention, EngineFailure, Wiring, get_convention, read_ids, uses_aux
from .draft.read import DraftSpec
from .errors import AuditError, BadCheckpoint, param
from .states import TRAINED_BOUNDARIES, State, as_states, parse_states
from .target import TargetInfo

#: The config key where ``train-canary`` records a canary's true training wiring (boundaries).
CANARY_KEY = "eagle_audit_canary"
#: The config key where a fix eagle-audit proposes pins the trained states it was proven for (written only where the
#: trainer's convention reads what the fix edits: re-read, the trained side would move with every re-audit). Honoured
#: before the trainer's convention, unless trained states or ids are given (:func:`pinned_side`).
FIX_KEY = "eagle_audit_fix"
#: The trainer name with which ``layers``, ``accept-rate`` and ``check`` measure the trained wiring on the draft's
#: weights instead of assuming it (:func:`eagle_audit.fingerprint.measured.resolve_measured`, asked by
#: :func:`eagle_audit.inputs.prepare`).
MEASURED = "fingerprint"

#: The trainer assumed from a draft's layout when neither ``trainer`` nor ``trained_boundaries`` is given.
TRAINER_BY_LAYOUT = {"sglang": "specforge", "speculators": "speculators", "eagle": "eagle"}
#: When the assumed trainer cannot have trained for the target's architecture, the older release assumed instead
#: (SpecForge 0.2.0 captures only where SGLang 0.5.14 does; its removed HF backend hooked any decoder).
TRAINER_FALLBACK = {"specforge": "specforge-hf"}
#: A trainer named without a version that has pipelines of different id conventions: the pipeline the config's
#: ids admit (an expression over ids and N, the convention taken when it holds, why). Only the first match is used.
TRAINER_PIPELINES = {
    "modelopt": (("N in ids", "modelopt-offline",
                  "its ids contain N = {N}, the last layer's output, which only the offline pipeline on vLLM-dumped "
                  "states (IN-k ids) captures; the online pipeline's ids are OUT-k (id N would be past the last "
                  "layer)"),),
}
#: How a user tells the pipelines of TRAINER_PIPELINES apart (printed with the assumption).
PIPELINE_TELL = {
    "modelopt": ("The online and offline pipelines differ by one layer for ids below N and cannot be told apart from "
                 "the config: an offline run trains on .pt files written by compute_hidden_states_vllm.py (it prints "
                 "'Extracting hidden states from layers [...] (last = final output)'); pass "
                 f"{param('trainer', 'modelopt-offline')} or {param('trainer', 'modelopt')} for the one that trained "
                 "it, or measure it with `eagle-audit fingerprint`"),
}


@dataclass(frozen=True)
class DraftFlags:
    """How one side (trainer or engine) runs the draft: its semantics applied to this draft's flags.

    ``norm_output``: the hidden carried to the next draft step is the normed one. ``head_norm``: the final
    norm runs before ``lm_head`` (SpecForge 0.2.0 skips it when the config says ``norm_output: false``).
    ``semantics``: ``"sglang"`` (layer 0's residual is the un-normed fc output) or ``"vllm"`` (honours
    ``norm_before_residual``). ``fc_skip_at_hidden_width``: ``fc`` runs only when the incoming width
    differs from the draft hidden size (SGLang ``llama_eagle3.py``); otherwise it always runs on the
    target's states. ``rope_scaling``: the ``rope_scaling`` types this side applies."""

    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    norm_before_residual: bool = False
    semantics: str = "sglang"
    fc_skip_at_hidden_width: bool = True
    head_norm: bool = True
    rope_scaling: tuple[str, ...] = ("linear", "llama3", "yarn")
    attention: str | None = None  # the draft class's decoder attention ("llama", "qwen3", "mla"); None: as the weights are
    parallel_drafting: bool = False  # P-EAGLE: several tokens per forward (the runtime drafts one at a time)

    def to_json(self) -> dict:
        out = dict(self.__dict__)
        out["rope_scaling"] = list(self.rope_scaling)
        return out


@dataclass(frozen=True)
class Block:
    """One part of the draft forward a flag switches, and what each value does there."""

    attr: str  # the DraftFlags field
    flag: str  # the config flag that switches it
    where: str  # which block or step differs when the two sides disagree
    on: str
    off: str


#: Every semantic switch of the draft forward, in forward order.
BLOCKS = (
    Block("norm_before_fc", "norm_before_fc", "the norm over fc's whole input (every step fed target states)",
          "normalises fc's whole n x H_t input (input_norm)", "feeds fc the raw concatenated states"),
    Block("fc_norm", "fc_norm", "the per-slot norms before fc (every step fed target states)",
          "normalises each slot before fc (fc_norm.i)", "feeds each slot to fc un-normed"),
    Block("norm_before_residual", "norm_before_residual", "layer 0's residual (every draft step)",
          "makes layer 0's residual the normed hidden", "keeps layer 0's residual the un-normed hidden"),
    Block("head_norm", "norm_output", "the final norm before lm_head (every draft step, from step 0)",
          "applies the final norm before lm_head", "applies no final norm before lm_head"),
    Block("norm_output", "norm_output", "the hidden carried to the next draft step (draft steps >= 1)",
          "carries the normed hidden to the next draft step", "carries the pre-norm hidden to the next draft step"),
)


def flags_as_written(draft: DraftSpec) -> DraftFlags:
    """The flags as the draft config states them, run the SGLang way (the trainer is not known), with
    ``fc`` always applied to the target's states (every trainer does)."""
    get = lambda name: bool(draft.flags.get(name))  # noqa: E731
    nbr = get("norm_before_residual")
    return DraftFlags(get("norm_before_fc"), get("fc_norm"), get("norm_output"), nbr, "vllm" if nbr else "sglang",
                      fc_skip_at_hidden_width=False)


def flags_of(conv: Convention, config: Mapping[str, Any]) -> DraftFlags:
    """The flags as ``conv`` runs them: honoured flags read from the config (or defaulted), the rest off,
    ``norm_output`` read with the side's own semantics; an engine's as the draft class serving this config
    runs them (:meth:`Convention.for_draft`)."""
    conv = conv.for_draft(config)
    cls = conv.draft_class
    nbr_rule = conv.draft_flags.get("norm_before_residual")
    semantics = "vllm" if nbr_rule is not None and nbr_rule.honoured else "sglang"
    out_rule = conv.draft_flags.get("norm_output")
    norm_output = bool(conv.flag("norm_output", config))
    if out_rule is not None and out_rule.semantics == "head":
        carried, head = False, norm_output
    else:
        carried, head = norm_output, True
    return DraftFlags(bool(conv.flag("norm_before_fc", config)), bool(conv.flag("fc_norm", config)), carried,
                      bool(conv.flag("norm_before_residual", config)) if semantics == "vllm" else False, semantics,
                      conv.fc_skip_when_width_equals_hidden, head, tuple(conv.rope_scaling),
                      cls.attention if cls else None,
                      bool(conv.speculators_loader and conv.speculators_loader.parallel_drafting(config)))


@dataclass(frozen=True)
class SideWiring:
    """One side (trainer or engine) of a resolved pair. ``wiring`` holds the states in order and how the
    ids got there; the rest is what the side does with them."""

    wiring: Wiring
    title: str  # for messages: "SGLang 0.5.23"
    order: str | None  # "ascending", "config"; None where the states were given directly
    rule: CaptureRule | None
    reach: tuple[int, int] | None  # lowest and highest capture index the rule reaches
    aux_count: int | None  # how many aux states this side sizes fc for (None: taken from fc.weight)
    aux_count_from: tuple[Any, ...]
    id_places: tuple[str, ...]  # places it reads ids from, first present wins
    flags: DraftFlags
    implements: frozenset[str]  # draft flags this side implements at all
    source: Mapping[str, Any] | None = None  # the convention's identity (provenance)
    convention: Convention | None = field(default=None, repr=False, compare=False)

    @property
    def states(self) -> tuple[State, ...]:
        return self.wiring.states

    @property
    def dropped(self) -> tuple[int, ...]:
        return self.wiring.dropped

    def setting_for(self, block: Block, want: DraftFlags, config: Mapping[str, Any]) -> bool | None:
        """The value of ``block.flag`` in ``config`` after which this side runs every block of that flag
        as ``want`` does; None when no value does (or the states were given directly)."""
        if self.convention is None or block.flag not in self.implements:
            return None
        place = self.convention.draft_flags[block.flag].read[0]
        for value in (False, True):
            if place == "top_level":
                patched = {**config, block.flag: value}
            else:
                patched = {**config, "eagle_config": {**(config.get("eagle_config") or {}), block.flag: value}}
            got = flags_of(self.convention, patched)
            if all(getattr(got, b.attr) == getattr(want, b.attr) for b in BLOCKS if b.flag == block.flag):
                return value
        return None

    def reresolve(self, config: Mapping[str, Any], architecture: str, num_layers: int) -> SideWiring:
        """The same side's rules applied to another config (a candidate fix)."""
        if self.convention is None:
            raise ValueError(f"{self.title}: states were given directly; there is no rule to re-apply")
        return side_of(self.convention, config, architecture, num_layers)


def side_of(conv: Convention, config: Mapping[str, Any], architecture: str, num_layers: int,
            override_ids: tuple[int, ...] | None = None, where: str = "the draft's config.json") -> SideWiring:
    """Resolve one convention against a draft config, once. An engine without capture for the architecture
    gives a side with no rule, no reach and no states (``wiring.unsupported`` says why). ``where``: the config's
    file, for the one line when a rule needs a value the config lacks."""
    conv = conv.for_draft(config)  # an engine's draft side is that of the class serving this draft
    try:
        wiring = conv.resolve(config, architecture, num_layers, override_ids)
    except expr.MissingName as e:  # a default over the draft's layer count D, which this config does not give
        if e.name != "D":
            raise
        raise BadCheckpoint(f"{where}: {conv.title} {conv.version}'s default ids need the draft's own layer count "
                            "(num_hidden_layers, at the top level or in text_config), which this config does not "
                            "give", hint="give the ids explicitly where this engine reads them, or num_hidden_layers"
                            ) from None
    no_aux = wiring.ids_source == "use_aux_hidden_state"
    rule = None if wiring.unsupported or no_aux else conv.rule_for(architecture)
    implements = frozenset(f for f, r in conv.draft_flags.items() if r.honoured)
    cls = conv.draft_class
    if no_aux and cls is not None and cls.use_aux_hidden_state == "ignored":
        wiring = replace(wiring, failure=EngineFailure(
            "RuntimeError", "mat1 and mat2 shapes cannot be multiplied (fc takes n_aux x target hidden; it is fed "
            "the target hidden-wide final state)", "first forward",
            f"{cls.name} does not read use_aux_hidden_state and applies fc regardless ({cls.source})"))
    return SideWiring(wiring, f"{conv.title} {conv.version}", conv.order, rule,
                      rule.reachable(num_layers) if rule else None,
                      None if no_aux else conv.aux_count(config), conv.aux_count_from, conv.ids_from,
                      flags_of(conv, config), implements, conv.to_json(), conv)


def given_side(wiring: Wiring, draft: DraftSpec, trainer: Convention | None) -> SideWiring:
    """A trained side whose states were given directly (or recorded by a canary): the trainer's draft
    semantics when one is named, else the flags as written."""
    if trainer is not None and trainer.draft_flags:
        flags, implements = flags_of(trainer, draft.config), frozenset(
            f for f, r in trainer.draft_flags.items() if r.honoured)
    else:
        flags, implements = flags_as_written(draft), frozenset(DRAFT_FLAGS)
    return SideWiring(wiring, wiring.convention, None, None, None, None, (), (), flags, implements,
                      trainer.to_json() if trainer else None, None)


@dataclass(frozen=True)
class Resolution:
    """The trained and the served side of one audit, resolved once."""

    trained: SideWiring
    served: SideWiring | None  # None: the engine refuses the draft (resolve_audit's served_optional)
    architecture: str
    num_layers: int


def resolve_trained(draft: DraftSpec, info: TargetInfo, notes: list[str], trainer: str | None = None,
                    trained_boundaries: str | Sequence[State | int] | None = None, trained_ids: tuple[int, ...] | None = None
                    ) -> tuple[SideWiring, Convention | None]:
    """What the draft was trained on: boundaries given directly (text such as "0,3,31", or states / boundary
    ints); else a canary's recorded boundaries; else
    the trainer's convention (given, or assumed from the draft layout, which ``notes`` records) applied
    to the draft config."""
    if trained_boundaries is not None and len(trained_boundaries):
        states = (parse_states(trained_boundaries, info.num_layers) if isinstance(trained_boundaries, str)
                  else as_states(trained_boundaries, info.num_layers))
        conv = trainer_convention(trainer, notes) if trainer else None
        notes.append(f"trained states given directly: {[s.label() for s in states]}")
        wiring = Wiring("user", "trainer", "-", "given", None, "boundaries", TRAINED_BOUNDARIES,
                        tuple(s.boundary for s in states), states)
        return given_side(wiring, draft, conv), conv
    if trained_ids is None and draft.config.get(FIX_KEY) is not None:
        pinned = pinned_side(draft, info, trainer_convention(trainer, notes) if trainer else None, notes)
        if pinned is not None:
            return pinned
    record = draft.config.get(CANARY_KEY) or {}
    recorded = record.get("trained_boundaries")
    if trainer is None and trained_ids is None and recorded:
        labels = record.get("trained_states")  # written since the post-norm canaries: "B30+norm"
        states = (parse_states(",".join(str(x).removeprefix("B") for x in labels), info.num_layers,
                               f"{draft.path}: {CANARY_KEY}.trained_states")
                  if labels else tuple(State(int(b)) for b in recorded))
        notes.append(f"trained states read from the canary record {CANARY_KEY}.trained_boundaries: "
                     f"{[s.label() for s in states]}")
        wiring = Wiring("canary", "trainer", "-", "recorded", None, "boundaries", f"{CANARY_KEY}.trained_boundaries",
                        tuple(recorded), states)
        return given_side(wiring, draft, None), None
    assumed = trainer is None
    if assumed:
        if draft.draft_kind.trainer_by_layout:
            trainer = draft.draft_kind.trainer_by_layout.get(draft.layout) or TRAINER_BY_LAYOUT[draft.layout]
            notes.append(f"trainer not given: assumed {trainer} from the draft's {draft.layout} layout ({draft.kind} draft)")
        else:
            trainer = assumed_trainer(draft, info, trained_ids, notes)
    from .draft.family import draft_family

    if draft_family(draft.draft_kind).kind_conventions:  # the trainer's rules: that pipeline's convention for the kind
        from .draft.block import convention_for

        conv = convention_for(trainer_convention(trainer, notes), draft.kind, notes)
    else:
        pipeline = pick_pipeline(trainer, draft, info, trained_ids, notes) or pick_export(trainer, draft, notes)
        conv = trainer_convention(pipeline or trainer, notes)
    if assumed and trainer in TRAINER_FALLBACK and conv.unsupported_reason(info.architecture) is not None:
        older = get_convention(TRAINER_FALLBACK[trainer], "trainer")
        notes.append(f"{conv.title} {conv.version} cannot capture for {info.architecture} "
                     f"({conv.unsupported_reason(info.architecture)}): assumed {older.title} ({older.name}) instead")
        conv = older
    conv = keep_given_order(conv, trained_ids, notes)
    if getattr(info, "streams", 1) > 1:
        notes.append(f"trainer streams: {conv.title}'s rules say which layers it captured, read here as the mean "
                     f"over the {info.streams} hyper-connection streams (what the engines feed); the trainers' own "
                     "capture code on such a target concatenates the streams unreduced (SpecForge 0.2.0 DFlash, "
                     "ModelOpt 0.47.0 EAGLE-3, run from their wheels: docs/coordinate.md), so what fc saw is not "
                     f"known from the config: pin it with {param('trained_boundaries')} (Bk.s0, Bk.mix) or "
                     f"{param('trainer')} fingerprint")
    return side_of(conv, draft.config, info.architecture, info.num_layers, trained_ids,
                   f"{draft.path}/config.json"), conv


def keep_given_order(conv: Convention, trained_ids: tuple[int, ...] | None, notes: list[str]) -> Convention:
    """``conv`` with its states concatenated in the order ``trained_ids`` are given, where the user gave ids out of
    layer order to a convention that sorts them (``order: ascending``): such ids ask whether the trainer
    concatenated them in that order (modelopt's Megatron plugin builds its default ids with ``list(set(...))``,
    which need not be sorted: [1, 76, 39] on an 80-layer target), so they are never sorted silently. ``notes``
    says so."""
    if trained_ids is None or conv.order != "ascending" or list(trained_ids) == sorted(trained_ids):
        return conv
    notes.append(f"{param('trained_ids')} {list(trained_ids)}: kept in the order given (concatenated in that order), "
                 f"although {conv.title} {conv.version} captures in layer order; give them sorted for its own order")
    return replace(conv, order="config")


def pinned_side(draft: DraftSpec, info: TargetInfo, trainer: Convention | None, notes: list[str]
                ) -> tuple[SideWiring, Convention | None] | None:
    """The trained states a fix pinned in the config (:data:`FIX_KEY`), with the trainer's draft semantics (``trainer``,
    else the one the record names); None where the config pins none."""
    record = draft.config.get(FIX_KEY)
    if not isinstance(record, Mapping) or not record.get("trained_states"):
        return None
    where = f"{draft.path}/config.json: {FIX_KEY}.trained_states"
    labels = record["trained_states"]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise BadCheckpoint(f"{where}: expected a list of states such as [\"B0\", \"B3\", \"B31\"]")
    states = parse_states(",".join(x.removeprefix("B") for x in labels), info.num_layers, where)
    if trainer is None and isinstance(record.get("trainer"), str):
        try:
            trainer = get_convention(record["trainer"], "trainer")
        except AuditError:
            trainer = None
    notes.append(f"trained states pinned by {FIX_KEY}.trained_states {labels} (written with the fix proven under "
                 f"{record.get('engine', 'an engine')}, trainer {record.get('trainer', 'unnamed')})")
    wiring = Wiring("fix", "trainer", "-", "pinned", None, "boundaries", f"{FIX_KEY}.trained_states",
                    tuple(s.boundary for s in states), states)
    side = given_side(wiring, draft, trainer)
    flags = record.get("trained_flags")  # the draft semantics training ran, where the fix edits a flag it reads
    if isinstance(flags, Mapping):
        known = {b.attr for b in BLOCKS}
        side = replace(side, flags=replace(side.flags, **{k: bool(v) for k, v in flags.items() if k in known}))
    return side, trainer


#: Layouts that a conversion also produces: the trainer assumed from them may not be the one that trained the draft.
CONVERTED_LAYOUTS = {
    "speculators": ("speculators 0.9.0's `speculators convert` (convert/eagle/eagle3_converter.py:35-101) writes this "
                    "layout from a SpecForge or SGLang-layout draft, dropping the source's ids (vLLM's default "
                    "[2, N//2, N-3] then applies) and never translating SGLang's +1"),
}


def assumed_trainer(draft: DraftSpec, info: TargetInfo, trained_ids: tuple[int, ...] | None, notes: list[str]) -> str:
    """The trainer assumed when none is given: the one the draft's layout implies, unless the config rules it
    out (no aux states: modelopt exports such drafts; an id equal to N: SpecForge cannot capture it). Says why in
    ``notes``, and where a conversion also produces the layout."""
    trainer = TRAINER_BY_LAYOUT[draft.layout]
    why = f"from the draft's {draft.layout} layout"
    ids = trained_ids if trained_ids is not None else read_ids(draft.config, "nested")
    if draft.config.get(TORCHSPEC_MARK) is not None:
        trainer, why = "torchspec-hf", (f"its config carries {TORCHSPEC_MARK}, which TorchSpec's tools/convert_to_hf.py "
                                        "writes into every export (lightseekorg/TorchSpec@6f21829 :270-273, :333-336)")
    elif not uses_aux(draft.config):
        trainer, why = "modelopt", ("eagle_config.use_aux_hidden_state is false (no fc, the last state only): modelopt "
                                    "exports such drafts (hf_eagle.py:488-494)")
    elif draft.layout == "sglang" and ids and info.num_layers in ids:
        trainer, why = "modelopt-offline", (f"its nested ids {list(ids)} contain N = {info.num_layers}: SpecForge 0.2.0 "
                                            "never captures index N (SGLang 0.5.14's loop stops at N-1), so an IN-k "
                                            "pipeline trained it (modelopt offline on vLLM-dumped states)")
    notes.append(f"trainer not given: assumed {trainer} {why}" if why.startswith("from ")
                 else f"trainer not given: assumed {trainer}: {why}")
    if draft.layout in CONVERTED_LAYOUTS:
        notes.append(f"the {draft.layout} layout is also what a conversion writes: "
                     f"{CONVERTED_LAYOUTS[draft.layout]}; nothing in the config can tell (a converted config and a "
                     "trained one share Eagle3SpeculatorConfig's fields; no provenance field exists). If the draft "
                     "was converted, its trained wiring is the source trainer's: name it with --trainer, or measure "
                     "it with `eagle-audit fingerprint`")
    return trainer


#: the key TorchSpec's exporter writes into every exported draft config (tools/convert_to_hf.py:270-273, :333-336)
TORCHSPEC_MARK = "_torchspec_version"
#: model types whose ids TorchSpec's ``convert_to_hf.py --vllm`` rewrites (+1, :146-158)
TORCHSPEC_REWRITTEN = ("kimi_k2",)


def pick_export(trainer: str, draft: DraftSpec, notes: list[str]) -> str | None:
    """The export layout of a trainer whose exporter rewrites ids, chosen from what the draft's files show (None:
    the draft is as trained). TorchSpec (``torchspec-hf``): ``convert_to_hf.py --vllm`` writes a ``kimi_k2`` draft's
    ids + 1 and renames its weights ``midlayer.*`` -> ``layers.0.*`` (:131, :146-158, :250-256), so a ``kimi_k2``
    draft whose decoder weights are ``layers.0.*`` is that export (``midlayer.*``: the native export, ids as trained);
    a config-only one is the export when its first id is not 1 (TorchSpec's default starts at 1, the export at 2:
    sglang PR #25454 on lightseekorg/kimi-k2.5-eagle3-mla). ``notes`` says which and why."""
    if trainer.partition("@")[0] != "torchspec-hf" or draft.config.get("model_type") not in TORCHSPEC_REWRITTEN:
        return None
    names = draft.weight_names
    ids = read_ids(draft.config, "nested") or read_ids(draft.config, "top_level")
    if any(n.startswith("layers.0.") for n in names):
        why = "its decoder weights are named layers.0.* (the --vllm export's rename; the native export keeps midlayer.*)"
    elif any(n.startswith("midlayer.") for n in names):
        notes.append(f"{param('trainer', trainer)}: a kimi_k2 draft with midlayer.* weights is TorchSpec's native export "
                     "(tools/convert_to_hf.py without --vllm): its ids are the training ids")
        return None
    elif not draft.has_weights and ids and ids[0] != 1:
        why = (f"its first id is {ids[0]}, not 1 (TorchSpec's default [1, N//2-1, N-4] starts at 1, its --vllm export "
               f"at 2); a config-only draft shows no weight names: pass {param('trainer', 'torchspec-hf-vllm-export')} "
               f"or {param('trainer', 'torchspec-hf')} to say which")
    else:
        return None
    notes.append(f"{param('trainer', trainer)}: the draft is TorchSpec's export for vLLM (tools/convert_to_hf.py --vllm, "
                 f"which writes a kimi_k2 draft's ids + 1): {why}; audited as torchspec-hf-vllm-export, whose config ids "
                 "are the training ids + 1")
    return "torchspec-hf-vllm-export"


def pick_pipeline(trainer: str, draft: DraftSpec, info: TargetInfo, trained_ids: tuple[int, ...] | None,
                  notes: list[str]) -> str | None:
    """For a trainer named without a version whose pipelines differ (TRAINER_PIPELINES), the pipeline the
    config's ids admit (None: the named convention itself); ``notes`` says which was assumed and why."""
    choices = TRAINER_PIPELINES.get(trainer)
    if not choices:
        return None
    conv = get_convention(trainer, "trainer")
    ids = trained_ids
    if ids is None:
        ids, _, _ = conv.read_draft_ids(draft.config)
    for when, name, why in choices:
        if expr.evaluate(when, ids=list(ids or ()), N=info.num_layers):
            notes.append(f"{param('trainer', trainer)}: assumed its pipeline {name}: {why.format(N=info.num_layers)}. "
                         f"{PIPELINE_TELL.get(trainer, '')}")
            return name
    notes.append(f"{param('trainer', trainer)}: assumed its pipeline {trainer} (no id equals N = {info.num_layers}); "
                 f"{PIPELINE_TELL.get(trainer, '')}")
    return None


def trainer_convention(name: str, notes: list[str]) -> Convention:
    """A trainer by name, ``name@version``, or a convention file. A version the built-in convention was not
    checked against still gets that convention's facts, and ``notes`` says which version's facts were used."""
    base, _, version = name.partition("@") if not name.endswith(".json") else (name, "", "")
    conv = get_convention(base, "trainer")
    if version and version != conv.version:
        notes.append(f"{conv.title} {version} is not a version eagle-audit knows: used the facts of {conv.title} "
                     f"{conv.version} ({conv.path})")
    elif conv.captures_through:
        through = conv.captures_through
        notes.append(f"trainer rules: {conv.title} {conv.version}, capturing through {through['engine']} "
                     f"{through['version']} (rules derived by eagle-audit probe from that engine's source)")
    return conv


def resolve_audit(draft: DraftSpec, info: TargetInfo, engine: Convention, notes: list[str], trainer: str | None = None,
                  trained_boundaries: str | Sequence[State | int] | None = None, trained_ids: tuple[int, ...] | None = None,
                  served_optional: bool = False) -> tuple[Resolution, Convention | None]:
    """Both sides of an audit; also the trainer convention (for provenance), None where none was used.
    ``served_optional``: an engine that refuses the draft leaves the served side None, said in ``notes`` (the
    fingerprint reads the trained wiring whatever the engine does); else its refusal is raised, first."""
    try:
        served = side_of(engine, draft.config, info.architecture, info.num_layers, where=f"{draft.path}/config.json")
    except AuditError as e:
        if not served_optional:
            raise
        served = None
        notes.append(f"engine: {e.message}")
    if served is not None and served.convention is not None and served.convention.draft_class_how:
        notes.append(f"draft class: {served.convention.draft_class_how}")
    trained, conv = resolve_trained(draft, info, notes, trainer, trained_boundaries, trained_ids)
    return Resolution(trained, served, info.architecture, info.num_layers), conv
