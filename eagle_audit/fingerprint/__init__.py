"""`eagle-audit fingerprint`: read the wiring a draft was trained on off its weights.

``score`` (teacher-forced corpus of every state, per-slot fc products, scoring a wiring), ``search``
(coordinate search, the per-slot judgement), ``intervals`` (its statistics: units, t quantile, paired
cluster-robust interval), ``run`` (end to end, claims and findings), ``result``
(the frozen result), ``suggest`` (torch-free: the ``fingerprint`` trainer name, when ``layers`` suggests it).
The public names below load lazily, so that importing ``suggest`` does not import torch.
"""

from __future__ import annotations

_PUBLIC = {"FINGERPRINT_SCHEMA": "result", "FingerprintResult": "result", "FingerprintOptions": "run",
           "Inference": "run", "fingerprint": "run", "infer_wiring": "run", "prepare_corpus": "run",
           "run_fingerprint": "run", "MEASURED": "suggest"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
