"""eagle-audit: find train/serve hidden-state wiring mismatches of EAGLE-3 drafts.

The Python API (docs/python-api.md), imported on first use so that ``import eagle_audit`` stays light::

    from eagle_audit import State, accept_rate, audit_layers, capture, check, fingerprint, load_target

``eagle_audit.capture``, ``eagle_audit.check`` and ``eagle_audit.fingerprint`` are the API functions,
although modules of those names exist (the capture hooks, the fingerprint command): import from the modules explicitly
(``from eagle_audit.capture import capture_states``), which keeps working.
"""

import sys as _sys
import types as _types

__version__ = "0.1.0"

_API = {"audit_layers": ".api", "accept_rate": ".api", "capture": ".api", "check": ".api", "load_target": ".api",
        "fingerprint": ".api",
        "State": ".states", "AuditError": ".errors"}
#: API names that are also submodule names: importing the submodule must not replace the function here.
_SHADOWED = {"capture", "check", "fingerprint"}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """Lazy exports: the API functions import torch and transformers only when first used."""
    import importlib

    if name in _API:
        value = getattr(importlib.import_module(_API[name], __name__), name)
    else:
        raise AttributeError(f"module 'eagle_audit' has no attribute {name!r}")
    globals()[name] = value
    return value


class _Package(_types.ModuleType):
    """The package module: Python's import system sets ``eagle_audit.<sub>`` to a submodule once it is
    imported; for the names in _SHADOWED that would replace the API function, so it is skipped (the
    submodule stays in sys.modules, where ``from eagle_audit.capture import ...`` finds it)."""

    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
