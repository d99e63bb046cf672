"""A toy draft family, made for the tests, as a new family is made (docs/layout.md, "A new draft family"): this one
folder and one entry in each floor's registry (:data:`eagle_audit.kinds.PLACES`). Its drafts are EAGLE-3 drafts
whose config carries ``toy_config``; its network, simulation and scorer run the EAGLE-3 ones under the family's own
name, and each entry records in :data:`CALLS` that it ran, so a test can tell the registries were asked."""

from __future__ import annotations

import importlib
from contextlib import contextmanager

from eagle_audit.kinds import PLACES, DraftKind, register as register_kind, unregister as unregister_kind

from .entries import CALLS, ENTRIES, FAMILY

KIND = DraftKind("toy", "Toy", lambda config: isinstance(config.get("toy_config"), dict), family=FAMILY)


def registry(place: str):
    module, attr = place.split(":")
    return getattr(importlib.import_module(module), attr)


@contextmanager
def toy_family():
    """The toy kind and its family registered for the duration (one entry per registry), then taken out again."""
    CALLS.clear()
    register_kind(KIND)
    for place in PLACES:
        registry(place).register(FAMILY, ENTRIES[place]())
    try:
        yield KIND
    finally:
        for place in PLACES:
            registry(place).unregister(FAMILY)
        unregister_kind(KIND.name)
