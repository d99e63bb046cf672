"""Drafts on disk: ``read`` (the three EAGLE-3 layouts into a frozen :class:`~eagle_audit.draft.read.DraftSpec`,
headers only), ``block`` (DFlash / DSpark drafts: kind, ids, the convention for their kind), ``write``
(SGLang-layout drafts: the demo, canaries, test fixtures; imports torch).
"""
