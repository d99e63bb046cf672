"""The served comparison: what a running engine really captures for the draft, against the local capture.

* :mod:`.compare`: each served slot against the local capture of every boundary, and the findings
  ``ENGINE_STATE_MISMATCH`` / ``ENGINE_STATE_SHIFTED``;
* :mod:`.run`: the served comparison end to end (``layers --server`` and ``check``'s served stage), built on it and the state sources (the ``server`` one is :mod:`eagle_audit.source.server`).

How to talk to each engine (launch lines, states readers, acceptance) is :mod:`eagle_audit.engines`;
docs/server.md cites every engine fact with its file:line in the ``sglang==0.5.23`` / ``vllm==0.33.0`` wheels.
"""
