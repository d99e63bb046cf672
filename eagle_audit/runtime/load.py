"""The runtime floor's entry per draft family (:class:`eagle_audit.kinds.FamilyRegistry` ``NETWORKS``): the draft
network a family runs, loaded with the target's embedding and head, and what is checked before anything loads.
``eagle3``: the EAGLE-3 chain draft (:mod:`.eagle3`), run with a side's draft flags; ``block``: the DFlash / DSpark
block draft (:mod:`.block`), one forward whatever the flags. :func:`load_draft` is the one place a draft's network
is chosen; the network it returns carries its family (``.family``), which the simulation and the scorer are chosen
by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..kinds import DraftKind, FamilyRegistry


@dataclass(frozen=True)
class Network:
    #: (spec, target, flags, dtype) -> the draft network of ``spec`` for ``target`` (a loaded target or state source)
    load: Callable
    #: spec -> None, or bad input (one line) for a draft this network cannot run, before the target loads
    check: Callable | None = None
    #: the draft flags an engine or trainer runs change the network (EAGLE-3); False: one forward whatever the
    #: flags, so both sides and every candidate wiring run one model
    flags_apply: bool = True


def _eagle3(spec, target, flags, dtype):
    from .eagle3 import load_draft_model

    return load_draft_model(spec, target, flags, dtype)


def _block(spec, target, flags, dtype):
    from .block import load_dflash_draft

    return load_dflash_draft(spec, target, dtype)


def _block_check(spec) -> None:
    from .block import dflash_arch

    dflash_arch(spec, spec.hidden_size)


NETWORKS = FamilyRegistry("runtime", "network")
NETWORKS.register("eagle3", Network(_eagle3))
NETWORKS.register("block", Network(_block, _block_check, flags_apply=False))


def network(kind: DraftKind) -> Network:
    """The runtime entry of ``kind``'s family."""
    return NETWORKS.of(kind)


def check_runnable(spec) -> None:
    """Bad input (one line) for a draft its family's network cannot run, before any loading."""
    check = NETWORKS.of(spec.draft_kind).check
    if check is not None:
        check(spec)


def load_draft(spec, target, flags, dtype=None):
    """The draft network of ``spec`` for ``target``; ``flags`` (the draft semantics an engine or trainer runs) apply
    where the family's network takes them; ``dtype``: float32 unless given. The network is tagged with its family
    (``.family``). Importing this module loads no torch (the registry is read by torch-free floors above it)."""
    if dtype is None:
        import torch

        dtype = torch.float32
    model = NETWORKS.of(spec.draft_kind).load(spec, target, flags, dtype)
    model.family = spec.draft_kind.family
    return model
