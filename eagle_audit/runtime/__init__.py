"""The draft runtimes: an EAGLE-3 draft's forward (``eagle3``), a DFlash / DSpark block forward (``block``), the
draft's decoder modules (``modules``, ``arch``) and the multi-step rollout the simulations run (``rollout``), all
on states a :mod:`eagle_audit.source` hands out. Importing this package imports no torch; its modules do.
"""
