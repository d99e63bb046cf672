"""`eagle-audit layers`: compare what a draft was trained on with what an engine feeds it.

``checks`` (the registry of checks and the context they read), ``diagnose`` (slots and findings, the
registered checks; ``diagnose_block``: the DFlash / DSpark ones), ``fix``
(the engine rule inverted: a config patch), ``result`` (the frozen result objects, finding codes, schema),
``run`` (end to end: inputs, measured slots, result), ``render`` (the terminal table).
"""
