"""`eagle-audit fingerprint`: read the wiring a draft was trained on off its weights.

``score`` (teacher-forced corpus of every state, per-slot fc products, scoring a wiring), ``search``
(coordinate search, the per-slot judgement), ``intervals`` (its statistics: units, t quantile, paired
cluster-robust interval), ``run`` (end to end, claims and findings), ``result``
(the frozen result). The public names below load lazily, so that importing ``defaults`` (the CLI's) or
``render`` does not import torch. The trainer name ``fingerprint``
is :data:`eagle_audit.resolution.MEASURED`, torch-free, below every analysis.
"""

from __future__ import annotations

_PUBLIC = {"FINGERPRINT_SCHEMA": "result", "FingerprintResult": "result", "FingerprintOptions": "run",
           "Inference": "run", "fingerprint": "run", "infer_wiring": "run", "prepare_corpus": "run",
           "run_fingerprint": "run"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
