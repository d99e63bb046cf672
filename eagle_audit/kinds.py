"""Draft kinds, in one registry: what each kind of draft is, how a config says it is one, and what each command
can do with it. A new kind is one :class:`DraftKind` and one :func:`register` call (its own rules, if any, in its
own folder); nothing else compares kind names. Torch-free, below every floor that reads a draft.

Every kind belongs to a *draft family* (:attr:`DraftKind.family`): how it drafts, and so which network, simulation,
scorer and reading each floor runs for it. EAGLE-3 (``eagle3``: a chain or tree, one token a draft forward) and the
block drafts (``block``: DFlash, DSpark, a block of positions a forward) are the two built in. Each floor keeps its
own :class:`FamilyRegistry`, keyed by family, and :data:`PLACES` lists them all (tests/test_kinds.py holds that
every family a kind names has an entry in each); no code outside them compares kind names, flags or types to pick
a family. A new family is its modules (one folder) and one entry in each registry (docs/layout.md, "A new draft
family").

Detection order: the kinds are asked in :data:`KINDS` order, last registered first, and the first whose
``declares`` takes the config wins; ``eagle3`` takes every config (the fallback), so it is asked last.

Assumptions, named: a config declares at most one kind (a mixed DSpark + EAGLE-3 config is DSpark: its EAGLE-3
ids are read as extra places by :mod:`eagle_audit.draft.block`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .errors import AuditError


@dataclass(frozen=True)
class DraftKind:
    name: str  # DraftSpec.kind, the conventions' "draft_kinds" entries
    title: str  # for messages ("DFlash")
    declares: Callable[[Mapping[str, Any]], bool]  # does a draft config declare this kind?
    #: the draft family: the key of every floor's :class:`FamilyRegistry` (:data:`PLACES`); ``block`` proposes a
    #: block of mask-token positions per forward with the target's states as context (eagle_audit/runtime/block.py),
    #: ``eagle3`` a chain/tree of one token per draft forward
    family: str = "eagle3"
    #: a block draft whose block is drafted token by token, each draft from the one before (DSpark: through its
    #: Markov head, if any, from the anchor's row when ``sample_from_anchor``); else every draft in one pass (DFlash)
    token_by_token: bool = False
    #: accept-rate simulates its drafting (and so check's accept stage and the fingerprint's confirmation run)
    simulated: bool = True
    #: (layout) -> the trainer assumed when none is given (None: the layout's default trainer)
    trainer_by_layout: Mapping[str, str] = field(default_factory=dict)
    #: pipeline -> the convention holding that pipeline's rules for this kind (absent: the pipeline's own)
    conventions: Mapping[str, str] = field(default_factory=dict)
    #: why accept-rate cannot simulate it (when not ``simulated``)
    not_simulated: str = ""

    def convention_name(self, pipeline: str) -> str | None:
        return self.conventions.get(pipeline)


def _dspark(config: Mapping[str, Any]) -> bool:
    archs = [a for a in (config.get("architectures") or ()) if isinstance(a, str)]
    return ("dspark_target_layer_ids" in config or isinstance(config.get("dspark_config"), Mapping)
            or any("DSpark" in a for a in archs) or config.get("speculators_model_type") == "dspark")


#: architecture name parts that make a draft DFlash
DFLASH_ARCHS = ("DFlash", "MuseGlimmerAssistantModel")


def _dflash(config: Mapping[str, Any]) -> bool:
    archs = [a for a in (config.get("architectures") or ()) if isinstance(a, str)]
    return (isinstance(config.get("dflash_config"), Mapping) or any(m in a for a in archs for m in DFLASH_ARCHS)
            or config.get("speculators_model_type") in ("dflash", "dflash2"))


#: every kind, by name, in detection order (the fallback last)
KINDS: dict[str, DraftKind] = {k.name: k for k in (
    DraftKind("dspark", "DSpark", _dspark, family="block", token_by_token=True,
              trainer_by_layout={"dflash": "specforge-dflash", "speculators": "speculators-dflash"},
              conventions={"sglang": "sglang-dspark", "vllm": "vllm-dflash", "vllm-v1": "vllm-v1-dflash",
                           "specforge": "specforge-dflash", "speculators": "speculators-dflash"}),
    DraftKind("dflash", "DFlash", _dflash, family="block",
              trainer_by_layout={"dflash": "dflash", "speculators": "speculators-dflash"},
              conventions={"sglang": "sglang-dflash", "vllm": "vllm-dflash", "vllm-v1": "vllm-v1-dflash",
                           "specforge": "specforge-dflash", "speculators": "speculators-dflash",
                           "modelopt": "modelopt-dflash"}),
    DraftKind("eagle3", "EAGLE-3", lambda config: True),
)}
#: the kind every config falls back to
FALLBACK = "eagle3"


def register(kind: DraftKind) -> None:
    """Add ``kind`` (asked before every kind registered earlier; a name already taken is replaced)."""
    KINDS.pop(kind.name, None)
    rest = dict(KINDS)
    KINDS.clear()
    KINDS.update({kind.name: kind, **rest})


def unregister(name: str) -> None:
    if name == FALLBACK:
        raise ValueError(f"{FALLBACK} is the fallback kind and stays")
    KINDS.pop(name, None)


def kind(name: str) -> DraftKind:
    """The kind called ``name``; an unknown name is bad input that lists the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise AuditError(f"draft kind {name!r}: not one eagle-audit knows (known: {', '.join(KINDS)})") from None


def detect(config: Mapping[str, Any]) -> DraftKind:
    """The kind a draft config declares (:data:`FALLBACK` when none other does)."""
    return next((k for k in KINDS.values() if k.name != FALLBACK and k.declares(config)), KINDS[FALLBACK])


# ----------------------------------------------------------------------------- draft families


class FamilyRegistry:
    """What one floor needs per draft family (its network, its simulation, ...), keyed by family name. Each
    registry is a module attribute named in :data:`PLACES`; an entry is registered once, by the module that
    defines it (the built-ins) or by whoever adds a family (tests/test_kinds.py's toy)."""

    def __init__(self, floor: str, what: str):
        self.floor, self.what = floor, what
        self._entries: dict[str, Any] = {}

    def register(self, family: str, entry: Any) -> None:
        self._entries[family] = entry

    def unregister(self, family: str) -> None:
        self._entries.pop(family, None)

    def __contains__(self, family: str) -> bool:
        return family in self._entries

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def of(self, kind: DraftKind | str) -> Any:
        """The entry of ``kind``'s family (a :class:`DraftKind`, or a family name); a family with no entry here
        is a family added without this floor: one line naming the floor."""
        family = kind.family if isinstance(kind, DraftKind) else kind
        try:
            return self._entries[family]
        except KeyError:
            raise AuditError(f"draft family {family!r}: the {self.floor} floor has no {self.what} for it (known: "
                             f"{', '.join(self._entries)})") from None


#: every floor's family registry, "module:attribute", from the ground up (read by tests/test_kinds.py, which holds
#: that each family a kind names has an entry in each, and that no FamilyRegistry is made outside this list)
PLACES = ("eagle_audit.draft.family:DRAFT_FAMILIES", "eagle_audit.runtime.load:NETWORKS",
          "eagle_audit.simulate.wiring:SIMULATIONS", "eagle_audit.accept.family:ACCEPT_FAMILIES",
          "eagle_audit.fingerprint.score:SCORERS")


def families() -> tuple[str, ...]:
    """The families the registered kinds name, in :data:`KINDS` order."""
    return tuple(dict.fromkeys(k.family for k in KINDS.values()))
