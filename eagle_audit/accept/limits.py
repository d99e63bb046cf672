"""Bounds of the draft settings of an accept-rate run, shared by the library checks and the CLI options
(this module imports nothing heavy, so ``--help`` stays fast). Sane limits, not SGLang's: a tree costs
memory quadratically in topk, and every step runs the draft once more."""

MAX_NUM_STEPS = 32
MAX_TOPK = 64
MAX_NEW_TOKENS = 100_000
