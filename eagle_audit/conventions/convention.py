"""The :class:`Convention`: one trainer or engine, and :meth:`Convention.resolve`, the only place where a
pipeline's bare layer ids become canonical :class:`~eagle_audit.states.State` boundaries (each pipeline's
ids and rules are declared once, in its file under ``probes/``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import expr
from ..errors import UnknownArchitecture
from ..kinds import kind
from ..states import State
from .draft_classes import ArchitectureRename, DraftClass, SpeculatorsLoader
from .places import EAGLE_PLACES, ID_PLACES, draft_layer_count, place_key, read_ids, uses_aux
from .rules import CaptureRule, DraftRefusal, EngineFailure, FlagRule, IdCheck, IdRead, TreeDrafts, Wiring

#: the keys of a decoder layer's config (a Llama/Qwen3 ``PretrainedConfig``) a draft config can carry at its top level:
#: what a ``transformer_layer_config`` written for a speculators loader takes from there (an assumption, named:
#: every other top-level key is EAGLE-3 / speculators bookkeeping)
LAYER_CONFIG_KEYS = ("model_type", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                     "head_dim", "num_hidden_layers", "hidden_act", "rms_norm_eps", "vocab_size",
                     "max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "tie_word_embeddings",
                     "attention_bias", "mlp_bias", "attention_dropout", "bos_token_id", "eos_token_id", "pad_token_id")


def release_label(title: str, version: str, how: str = "") -> str:
    """'SGLang 0.5.6 (given)' from title 'SGLang', 'vLLM 0.33.0 (V2 model runner; assumed)' from 'vLLM (V2 model
    runner)': the release number after the engine's name, the title's detail and how it was chosen in brackets."""
    head, _, rest = title.partition(" (")
    inside = "; ".join(x for x in (rest.rstrip(")"), how) if x)
    return f"{head} {version}" + (f" ({inside})" if inside else "")


def merge(config: Mapping[str, Any], patch: Mapping[str, Any]) -> dict:
    """RFC 7386 JSON merge patch, one level (None deletes a key)."""
    out = dict(config)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class Convention:
    name: str
    kind: str
    title: str
    version: str
    source: str
    ids_from: tuple[str, ...]  # place names, in reading order (``id_reads`` says how each is read)
    order: str
    rules: Mapping[str, CaptureRule]
    architectures: Mapping[str, str]
    fallback_rule: str | None
    unsupported: Mapping[str, str] = field(default_factory=dict)
    aux_count_from: tuple[Any, ...] = ("num_aux_hidden_states", "nested", "top_level", 3)
    draft_flags: Mapping[str, FlagRule] = field(default_factory=dict)
    fc_skip_when_width_equals_hidden: bool = False
    notes: tuple[str, ...] = ()
    path: str = ""
    tree_drafts: TreeDrafts | None = None  # None: not declared
    id_reads: tuple[IdRead, ...] = ()  # how each place of ``ids_from`` is read (default: taken as given)
    empty_capture: EngineFailure | None = None
    draft_kinds: tuple[str, ...] = ("eagle3",)
    id_checks: tuple[IdCheck, ...] = ()
    width_check: EngineFailure | None = None

    def reads(self) -> tuple[IdRead, ...]:
        return self.id_reads or tuple(IdRead(p) for p in self.ids_from)

    def supported(self, near: str = "", shown: int = 6) -> str:
        """Which architectures this engine captures for, in words (for ENGINE_UNSUPPORTED): the ``shown`` nearest
        to ``near`` by name (the target's family first), then how many more and where they are all listed."""
        if self.fallback_rule is not None:
            others = f"; every other architecture by rule {self.fallback_rule}"
        else:
            others = ""
        names = sorted(self.architectures)
        if not names:
            return f"{self.title} {self.version}: every architecture by rule {self.fallback_rule}"
        family = near.split("For", 1)[0].rstrip("0123456789V").lower()
        nearest = sorted(names, key=lambda n: (-_common(n.lower(), family), n))[:shown]
        more = (f", and {len(names) - len(nearest)} more (every one in the finding's why)"
                if len(names) > len(nearest) else "")
        return f"{self.title} {self.version} captures for {len(names)} architecture(s): {', '.join(nearest)}{more}{others}"
    rope_scaling: tuple[str, ...] = ("linear", "llama3", "yarn")
    captures_through: Mapping[str, str] | None = None
    draft_classes: tuple[DraftClass, ...] = ()  # .draft_classes (engines)
    draft_class_fallback: str | None = None
    speculators_loader: SpeculatorsLoader | None = None
    draft_architecture_rename: ArchitectureRename | None = None  # a plain draft config's architecture, renamed
    draft_class: DraftClass | None = None  # set by for_draft: the class this draft is served by
    draft_class_how: str = ""  # how it was picked, or why none was
    base: "Convention | None" = field(default=None, repr=False, compare=False)  # before for_draft
    no_aux: Mapping[str, str] | None = None  # reads use_aux_hidden_state: false -> the post-norm final state
    ids_accepted: EngineFailure | None = None  # trainers: explicit ids outside ``when`` are refused
    refuses: tuple[DraftRefusal, ...] = ()  # drafts the engine refuses whatever their ids (the first that applies)
    # how the engine loads an EAGLE-3 draft's own embed_tokens / lm_head: weight -> {"policy", "source"}
    draft_weights: Mapping[str, Mapping[str, str]] | None = None
    #: engines: how this release was chosen (:mod:`.releases`: given, nearest known, detected from the server,
    #: installed, newest built in, assumed) and, where it is not the release asked for, why this one
    release_how: str = ""
    release_note: str = ""
    release_span: tuple[str, ...] = ()  # a range given: its known releases, oldest first (this one is the newest)

    def label(self) -> str:
        """'SGLang 0.5.6 (given)', 'vLLM 0.33.0 (V2 model runner, default; assumed)': the release these rules speak
        for, and how it was chosen."""
        return release_label(self.title, self.version, self.release_how)

    def view(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """The draft config as this side's draft class reads it (a speculators config through the engine's
        config loader; anything else as written)."""
        if self.speculators_loader is not None and self.speculators_loader.applies(config):
            out, _ = self.speculators_loader.view(config)
            return out if out is not None else config
        return config

    def pick_draft_class(self, config: Mapping[str, Any]) -> tuple[DraftClass | None, str]:
        """The draft class this engine serves ``config`` with (None: it cannot load it), and how it was picked."""
        root = self.base or self
        if not root.draft_classes:
            return None, ""
        loaded, plain = "", ""
        if root.speculators_loader is not None and root.speculators_loader.applies(config):
            view, loaded = root.speculators_loader.view(config)
            if view is None:
                return None, f"{root.title} {root.version} cannot load this draft: {loaded}"
            config = view
        elif root.speculators_loader is not None:
            plain = root.speculators_loader.why_not(config)
        archs = config.get("architectures") or []
        arch = archs[0] if archs else None
        written = arch
        if not loaded and arch is not None and root.draft_architecture_rename is not None:
            arch = root.draft_architecture_rename.apply(arch)
        renamed = (f"{written} read as {arch} ({root.draft_architecture_rename.source})"
                   if written != arch and root.draft_architecture_rename else "")
        for c in root.draft_classes:
            if arch in c.architectures:
                how = f"{renamed or arch} -> {c.name}" + (f" (via {loaded})" if loaded else "")
                return c, f"{root.title} {root.version} serves it with {c.name} ({how}; {c.source})"
        fallback = next((c for c in root.draft_classes if c.name == root.draft_class_fallback), None)
        registered = sorted({a for c in root.draft_classes for a in c.architectures})
        if fallback is None:
            why = f"{plain}; " if plain else ""
            if renamed:
                why += f"architecture {renamed}, "
            if arch is None:
                return None, (f"{root.title} {root.version} cannot load this draft: {why}its config names no "
                              f"architectures (it registers {', '.join(registered)})")
            rename = root.draft_architecture_rename
            said = f": the engine stops with \"{rename.error.format(arch=repr(arch))}\"" if rename and rename.error else ""
            return None, (f"{root.title} {root.version} cannot load this draft: {why}it registers no EAGLE-3 draft "
                          f"class for architecture {arch!r} (it registers {', '.join(registered)}){said}")
        return fallback, (f"architecture {arch!r} is not an EAGLE-3 draft class {root.title} {root.version} "
                          f"registers ({', '.join(registered)}): audited with its {fallback.name} class, as after "
                          f"editing architectures to {fallback.architectures[0]}")

    def load_patch(self, config: Mapping[str, Any]) -> tuple[dict, str]:
        """A JSON merge patch after which this engine loads ``config`` as the draft class it is audited with ({}:
        it loads it as written), and why. Two cases, both from the engine's own loading code:

        * a speculators config its speculators loader does not take because of a top-level key it must not have
          (vLLM: ``model_type``, ``speculators_loader.used_when``): that key removed;
        * an architecture no class registers, audited with ``draft_class_fallback`` (SGLang): ``architectures``
          set to the fallback class's first; a speculators-layout config's ``transformer_layer_config`` keys
          lifted to the top level where absent (such an engine reads a plain config: ``model_type``,
          ``hidden_size``, ... at the top level)."""
        root = self.base or self
        if not root.draft_classes:
            return {}, ""
        loader = root.speculators_loader
        if loader is not None and config.get("speculators_model_type") and not loader.applies(config):
            drop = [k for k in loader.absent if config.get(k) is not None]
            if drop and all(config.get(k) is not None for k in loader.present):
                patch: dict = {k: None for k in drop}
                why = (f"remove the top-level {', '.join(drop)}: {root.title} {root.version} reads a speculators "
                       f"config through its loader only without it ({loader.used_when_source})")
                if not isinstance(config.get("transformer_layer_config"), Mapping):
                    # the loader builds the draft's config from transformer_layer_config alone (base.py:58-63)
                    patch["transformer_layer_config"] = {k: config[k] for k in LAYER_CONFIG_KEYS if k in config}
                    why += "; and write transformer_layer_config from the top-level layer keys, the only place it reads them"
                patched = {k: v for k, v in merge(config, patch).items()}
                cls, _ = root.pick_draft_class(patched)
                if cls is not None:
                    return patch, why
            return {}, ""
        cls, _ = root.pick_draft_class(config)
        archs = config.get("architectures") or []
        if cls is None or cls.name != root.draft_class_fallback or (archs and archs[0] in cls.architectures):
            return {}, ""
        patch: dict = {"architectures": [cls.architectures[0]]}
        layer = config.get("transformer_layer_config")
        if isinstance(layer, Mapping):
            patch.update({k: layer[k] for k in LAYER_CONFIG_KEYS if layer.get(k) is not None and k not in config})
        why = (f"set architectures to {cls.architectures[0]!r}: {root.title} {root.version} registers no draft class "
               f"for {archs[0] if archs else None!r}")
        if len(patch) > 1:
            why += ("; and copy the decoder keys of transformer_layer_config (model_type, hidden_size, ...) to the top "
                    "level, where that class reads a plain config's")
        return patch, why

    def for_draft(self, config: Mapping[str, Any]) -> "Convention":
        """This convention with its draft side replaced by that of the draft class serving ``config``."""
        from dataclasses import replace

        root = self.base or self
        if not root.draft_classes:
            return self
        cls, how = root.pick_draft_class(config)
        if cls is None:
            return replace(root, draft_class=None, draft_class_how=how, base=root)
        return replace(
            root, draft_class=cls, draft_class_how=how, base=root,
            aux_count_from=cls.aux_count_from if cls.aux_count_from is not None else root.aux_count_from,
            draft_flags=cls.draft_flags if cls.draft_flags is not None else root.draft_flags,
            fc_skip_when_width_equals_hidden=(cls.fc_skip_when_width_equals_hidden
                                              if cls.fc_skip_when_width_equals_hidden is not None
                                              else root.fc_skip_when_width_equals_hidden))

    def rule_for(self, architecture: str) -> CaptureRule:
        if architecture in self.unsupported:
            raise UnknownArchitecture(
                f"{self.title} {self.version} has no {self.capture_name} capture for {architecture}: "
                f"{self.unsupported[architecture]}")
        name = self.architectures.get(architecture, self.fallback_rule)
        if name is None:
            known = ", ".join(sorted(self.architectures)) or "none"
            raise UnknownArchitecture(
                f"{self.title} {self.version} ({self.path}) declares no capture rule for architecture {architecture}",
                hint=f"declared: {known}")
        return self.rules[name]

    def unsupported_reason(self, architecture: str) -> str | None:
        """Why this engine has no capture for ``architecture`` (None: it has one)."""
        if architecture in self.unsupported:
            return self.unsupported[architecture]
        if architecture not in self.architectures and self.fallback_rule is None:
            return (f"{self.path or self.name} declares no capture rule for it (not registered with {self.capture_name} "
                    "capture)")
        return None

    def read_draft_ids(self, draft_config: Mapping[str, Any]) -> tuple[tuple[int, ...] | None, str, int]:
        """(ids as written, the place they came from or "default", the shift that place adds)."""
        for r in self.reads():
            if r.skipped(draft_config):
                continue
            found = read_ids(draft_config, r.place)
            if found is None or (not found and r.empty == "absent"):
                continue
            shift = 0 if draft_config.get("model_type") in r.verbatim_model_types else r.shift
            return found, r.place, shift
        return None, "default", 0

    def resolve(self, draft_config: Mapping[str, Any], architecture: str, num_layers: int,
                override_ids: tuple[int, ...] | None = None) -> Wiring:
        """What this convention feeds. An architecture without capture gives a Wiring with no states and
        ``unsupported`` set (an engine that cannot feed the draft is a finding, not bad input)."""
        if self.no_aux is not None and not uses_aux(draft_config):  # no capture at all: no rule needed
            return Wiring(self.name, self.kind, self.version, "no_aux", None, "use_aux_hidden_state",
                          f"eagle_config.use_aux_hidden_state: false: {self.no_aux.get('what', '')}".rstrip(": "),
                          (), (State(num_layers, normed=True),))
        # a refused draft stops the engine before it loads the target (so before an architecture without capture)
        refused = next((r.failure for r in self.refuses if r.applies(draft_config)), None)
        why = self.unsupported_reason(architecture) if self.kind == "engine" else None
        if why is not None:
            return Wiring(self.name, self.kind, self.version, "none", None, "default", "no capture", (), (),
                          failure=refused, unsupported=why)
        rule = self.rule_for(architecture)
        ids, source, place_shift = None, "default", 0
        if override_ids is not None:
            ids, source = tuple(override_ids), "override"
        else:
            ids, source, place_shift = self.read_draft_ids(draft_config)
        ignored = tuple(p for p in self.kind_places() if p not in self.ids_from
                        and read_ids(draft_config, p) is not None)
        setter_ids = None if ids is None else tuple(i + place_shift for i in ids)
        failure = refused
        if failure is None and setter_ids is not None:
            failure = next((f for c in self.id_checks if (f := c.fails(setter_ids, num_layers, source))), None)
        draft_layers = draft_layer_count(draft_config)
        shift = rule.draft_shift
        archs = draft_config.get("architectures") or ()
        extra = shift.shift if shift and isinstance(archs, list) and set(shift.architectures) & set(archs) else 0
        if extra and setter_ids is None and rule.default_explicit:
            setter_ids = tuple(int(v) for v in expr.evaluate(rule.default_ids, N=num_layers, D=draft_layers))
        if extra and setter_ids is not None:
            setter_ids = tuple(i + extra for i in setter_ids)
        if failure is None and setter_ids is not None:
            failure = next((f for c in rule.id_checks
                            if (f := c.fails(ids if c.as_read and ids is not None else setter_ids, num_layers, source))),
                           None)
        indices, case = rule.indices(setter_ids, num_layers, draft_layers)
        if extra:
            case = f"{extra:+d} for a {'/'.join(shift.architectures)} draft, then {case}"
        if place_shift:
            case = f"{place_key(source)} {place_shift:+d} as read, then {case}"
        if failure is None:
            failure = rule.failure_for(indices, num_layers)
        if failure is None and self.ids_accepted is not None:  # the trainer's own check, on its default too
            checked = (list(ids) if ids is not None
                       else [int(v) for v in expr.evaluate(rule.default_ids, N=num_layers, D=draft_layers)])
            if not expr.evaluate(self.ids_accepted.when, ids=checked, N=num_layers):
                failure = self.ids_accepted.format(ids=checked)
        lo, hi = rule.reachable(num_layers)
        placed = [num_layers + k if rule.wraps_negative and -num_layers <= k < 0 else k for k in indices]
        kept = [k for k in placed if lo <= k <= hi]
        dropped = tuple(k for k, p in zip(indices, placed) if not lo <= p <= hi)
        if self.order == "ascending":
            kept = sorted(set(kept))
        if failure is None and not kept and self.empty_capture is not None:
            failure = self.empty_capture
        if failure is None and rule.count_check is not None and kept and len(kept) != len(indices):
            failure = rule.count_check.format(captured=len(kept), expected=len(indices))
        width = self.aux_count(draft_config) if self.width_check is not None else None
        if failure is None and width is not None and kept and len(kept) != width:
            failure = self.width_check.format(captured=len(kept), expected=width)
        feeds = tuple((k, what) for k in kept if (what := rule.feed(k, num_layers)) is not None)
        return Wiring(self.name, self.kind, self.version, rule.name, ids, source, case, tuple(indices),
                      tuple(State(k, normed=rule.final_normed and k == num_layers) for k in kept), dropped, ignored,
                      failure, feeds)

    @property
    def capture_name(self) -> str:
        """The drafts this convention captures for, in words: "EAGLE-3", "DFlash", "DSpark", "DFlash / DSpark"."""
        if "eagle3" in self.draft_kinds:
            return "EAGLE-3"
        return " / ".join(kind(k).title for k in self.draft_kinds)

    def kind_places(self) -> tuple[str, ...]:
        """The places that hold ids of the drafts this convention describes (IDS_NOT_READ looks at these)."""
        if "eagle3" in self.draft_kinds:
            return EAGLE_PLACES
        return ("dflash_target_layer_ids", "target_layer_ids", "dspark_target_layer_ids", "dspark_config_ids")

    def aux_count(self, draft_config: Mapping[str, Any]) -> int:
        """How many aux states the engine's draft side sizes fc for."""
        zero_ok = self.draft_class is not None and self.draft_class.aux_count_empty == "zero"
        draft_config = self.view(draft_config)
        for item in self.aux_count_from:
            if isinstance(item, int):
                return item
            if item in ID_PLACES:
                ids = read_ids(draft_config, item)
                # `len(layer_ids) if layer_ids else 3`: an empty list counts as absent (llama_eagle3 of both
                # engines); kimi_k25_eagle3.py:55-59 tests `is None`, so an empty list sizes fc for 0
                if ids or (zero_ok and ids is not None):
                    return len(ids)
            elif draft_config.get(item) is not None:
                return int(draft_config[item])
        return 3

    def flag(self, name: str, draft_config: Mapping[str, Any]) -> Any:
        """The value of a draft flag as this convention uses it (None: not honoured -> off)."""
        rule = self.draft_flags.get(name)
        if rule is None or not rule.honoured:
            return False
        return rule.value(self.view(draft_config), name)

    def to_json(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "title": self.title, "version": self.version,
               "source": self.source, "path": self.path}
        if self.release_how:
            out["release"] = {"version": self.version, "how": self.release_how, "note": self.release_note or None}
        if self.captures_through:
            out["captures_through"] = dict(self.captures_through)
        if self.draft_class is not None or self.draft_class_how:
            out["draft_class"] = self.draft_class.name if self.draft_class else None
            out["draft_class_how"] = self.draft_class_how
        return out


def _common(a: str, b: str) -> int:
    """The length of the common prefix of two names."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
