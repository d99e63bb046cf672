"""Serving engines as eagle-audit meets them running: each engine's folder (``sglang/``, ``vllm/``: its HTTP
API in ``wire.py``, its accept-length reading, its states reader, its launch lines) behind one
:class:`~eagle_audit.engines.registry.Engine`, and the shared pieces they stand on (``http``, ``options``,
``launch``, ``reading``, ``states``, ``prometheus``). Importing this package imports no torch.
"""
