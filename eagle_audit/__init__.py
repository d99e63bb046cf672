"""eagle-audit: find train/serve hidden-state wiring mismatches of EAGLE-3 drafts.

The Python API (docs/python-api.md), imported on first use so that ``import eagle_audit`` stays light::

    from eagle_audit import State, accept_rate, audit_layers, capture, check, fingerprint, load_target

``eagle_audit.capture``, ``eagle_audit.check`` and ``eagle_audit.fingerprint`` are both: the module of that name
(the capture hooks, the check command, the fingerprint command), and callable as the API function. The module's
class is :class:`ApiModule`, whose call is the function of :mod:`eagle_audit.api`, so that
``import eagle_audit.check.run as m``, ``from eagle_audit.capture import capture_states`` and
``eagle_audit.check(target, draft)`` all work, in any order of import.
"""

import sys as _sys
import types as _types

from .version import __version__

_API = {"audit_layers": ".api", "accept_rate": ".api", "load_target": ".api", "write_fixed_config": ".api",
        "State": ".states", "AuditError": ".errors"}
#: API functions that are also module names: the module is callable as the function (:class:`ApiModule`).
_CALLABLE = ("capture", "check", "fingerprint")

__all__ = ["__version__", *_API, *_CALLABLE]


def __getattr__(name: str):
    """Lazy exports: the API functions import torch and transformers only when first used."""
    import importlib

    if name in _API:
        value = getattr(importlib.import_module(_API[name], __name__), name)
    elif name in _CALLABLE:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'eagle_audit' has no attribute {name!r}")
    globals()[name] = value
    return value


class ApiModule(_types.ModuleType):
    """A module that is also an API function: calling it calls :mod:`eagle_audit.api`'s function of the module's
    last name (its signature and help are the function's, as :func:`inspect.signature` and ``help()`` read them)."""

    def _function(self):
        from . import api

        return getattr(api, self.__name__.rpartition(".")[2])

    def __call__(self, *args, **kwargs):
        return self._function()(*args, **kwargs)

    @property
    def __signature__(self):
        import inspect

        return inspect.signature(self._function())

    @property
    def __wrapped__(self):
        return self._function()


def api_module(name: str) -> None:
    """Make the module ``name`` (one of :data:`_CALLABLE`) an :class:`ApiModule`: called from its own body."""
    _sys.modules[name].__class__ = ApiModule
