"""The toy family's entry for each floor (keyed by :data:`eagle_audit.kinds.PLACES`), each a thin wrapper over the
EAGLE-3 code that records its call. Made lazily: an entry imports only the floor it serves."""

from __future__ import annotations

FAMILY = "toy"
#: what ran, in order: "read", "network", "simulate", "score"
CALLS: list[str] = []


def _draft():
    from eagle_audit.draft.family import DraftFamily

    def read(config, where):
        CALLS.append("read")
        return None  # nothing beyond the EAGLE-3 reading

    return DraftFamily(read=read, config_keys=True)


def _network():
    from eagle_audit.runtime.eagle3 import load_draft_model
    from eagle_audit.runtime.load import Network

    def load(spec, target, flags, dtype):
        CALLS.append("network")
        return load_draft_model(spec, target, flags, dtype)

    return Network(load)


def _simulation():
    from eagle_audit.simulate.accept import simulate
    from eagle_audit.simulate.wiring import Simulation

    def run(*args):
        CALLS.append("simulate")
        return simulate(*args)

    return Simulation(run)


def _accept():
    from eagle_audit.accept.family import AcceptFamily

    return AcceptFamily(no_tree="a {title} draft is simulated as a chain only (a family made for the tests)")


def _scoring():
    from eagle_audit.fingerprint.score import Scorer, Scoring

    def scorer(draft, corpus):
        CALLS.append("score")
        return Scorer(draft, corpus)

    return Scoring(scorer, True, lambda kind, flags: f"{kind.name} draft: scored as an EAGLE-3 draft (the toy family)")


ENTRIES = {"eagle_audit.draft.family:DRAFT_FAMILIES": _draft, "eagle_audit.runtime.load:NETWORKS": _network,
           "eagle_audit.simulate.wiring:SIMULATIONS": _simulation, "eagle_audit.accept.family:ACCEPT_FAMILIES": _accept,
           "eagle_audit.fingerprint.score:SCORERS": _scoring}
