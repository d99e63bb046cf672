"""The served comparison: what a running engine really captures for the draft, against the local capture.

* :mod:`.source`: the ``server`` state source (every target state from a running server; the no-weights
  mode), asking the engine's folder under :mod:`eagle_audit.engines` how to read it;
* :mod:`.compare`: each served slot against the local capture of every boundary, and the findings
  ``ENGINE_STATE_MISMATCH`` / ``ENGINE_STATE_SHIFTED``;
* :mod:`.check`: ``layers --server``'s served check, built on both.

How to talk to each engine (launch lines, states readers, acceptance) is :mod:`eagle_audit.engines`;
docs/server.md cites every engine fact with its file:line in the ``sglang==0.5.23`` / ``vllm==0.33.0`` wheels.
"""
