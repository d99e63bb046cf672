"""The accept floor's entry per draft family (:class:`eagle_audit.kinds.FamilyRegistry` ``ACCEPT_FAMILIES``): what
`accept-rate` runs of each family beyond its simulation (``simulate/wiring.py``), and what it refuses up front.
``eagle3``: the live loop (:mod:`.live`) and draft trees; ``block``: neither (a block draft drafts one block a
round; the live loop drafts EAGLE-3 chains)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BadOption, param
from ..kinds import DraftKind, FamilyRegistry


@dataclass(frozen=True)
class AcceptFamily:
    #: why ``--live`` is refused for the family's drafts (``{title}``: the kind's), or None: the live loop runs them
    no_live: str | None = None
    #: why ``--topk`` > 1 is refused (``{title}``), or None: a draft tree is simulated
    no_tree: str | None = None

    def refuse(self, kind: DraftKind, live: bool, topk: int) -> None:
        """Bad input (one line) for what accept-rate does not run for ``kind``'s drafts."""
        if live and self.no_live is not None:
            raise BadOption(f"{param('live')}: {self.no_live.format(title=kind.title, server=param('server'))}")
        if topk > 1 and self.no_tree is not None:
            raise BadOption(f"{param('topk', topk)}: {self.no_tree.format(title=kind.title)}")


ACCEPT_FAMILIES = FamilyRegistry("accept", "accept-rate entry")
ACCEPT_FAMILIES.register("eagle3", AcceptFamily())
ACCEPT_FAMILIES.register("block", AcceptFamily(
    "not with a {title} draft yet (accept-rate simulates its block drafting; the live loop is for EAGLE-3 drafts; "
    "{server} reads a server's)", "a {title} draft drafts one block a round, no tree"))
