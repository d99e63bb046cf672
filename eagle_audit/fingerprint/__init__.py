"""`eagle-audit fingerprint`: read the wiring a draft was trained on off its weights.

By concern: ``options`` (what a run starts from), ``corpus`` (the text and every state captured on it),
``score`` (per-slot fc products, scoring a wiring), ``search`` (coordinate search, the per-slot judgement),
``intervals`` (its statistics: units, t quantile, paired cluster-robust interval), ``infer`` (the search on a
loaded target), ``verdict`` (what the weights say of a claimed wiring), ``second`` (the second round), ``claims``
(claims, findings, fix), ``confirm`` (the pick judged again, in simulated accept length, on prompts that did not
choose it), ``run`` (end to end), ``api`` (the Python entry point), ``measured`` (trainer ``fingerprint`` for other
audits), ``result`` (the frozen result). The public names below load lazily, so that importing ``defaults`` (the CLI's) or
``render`` does not import torch. The trainer name ``fingerprint``
is :data:`eagle_audit.resolution.MEASURED`, torch-free, below every analysis.
"""

from __future__ import annotations

_PUBLIC = {"FINGERPRINT_SCHEMA": "result", "FingerprintResult": "result", "FingerprintOptions": "options",
           "Inference": "verdict", "fingerprint": "api", "infer_wiring": "infer", "prepare_corpus": "corpus",
           "run_fingerprint": "run"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from .. import api_module as _api_module  # noqa: E402

_api_module(__name__)  # callable as eagle_audit.api.fingerprint
