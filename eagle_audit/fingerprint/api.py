"""The fingerprint's Python entry point: :func:`fingerprint` (paths or hub ids, as the CLI). An audit's trained
side measured on the weights (trainer ``fingerprint``) is :func:`eagle_audit.fingerprint.measured.resolve_measured`."""

from __future__ import annotations

from typing import Sequence

from .defaults import CONFIRM_PROMPTS, MORE_PROMPTS
from .options import FingerprintOptions
from .result import FingerprintResult
from .run import run_fingerprint


def fingerprint(target: str, draft: str, *, engine: str = "sglang", trainer: str | None = None,
                prompts: str | None = None, prompt_ids: Sequence[Sequence[int]] | None = None, max_prompts: int = 8,
                max_tokens: int = 256, max_new_tokens: int = 64, device: str = "cpu", dtype: str = "auto",
                use_installed_engine: bool = True, states_server=None, ttt_steps: int | None = None,
                more_prompts: int = MORE_PROMPTS, confirm_prompts: int = CONFIRM_PROMPTS,
                confirm_prompt_ids: Sequence[Sequence[int]] | None = None) -> FingerprintResult:
    """Read the trained wiring off ``draft``'s weights against ``target`` (paths or hub ids). ``states_server``: a
    reference SGLang or vLLM server (URL or :class:`eagle_audit.engines.options.Server`) to take every target
    state and the argmax at every position from, for a ``target`` directory without weights. ``confirm_prompts``:
    prompts after the search's that judge its pick again (``eagle_audit.fingerprint.confirm``); with
    ``prompt_ids``, ``confirm_prompt_ids`` gives them."""
    if isinstance(states_server, str):
        from ..engines.options import Server

        states_server = Server(states_server)
    return run_fingerprint(FingerprintOptions(
        target=target, draft=draft, engine=engine, trainer=trainer, prompts=prompts, max_prompts=max_prompts,
        max_tokens=max_tokens, device=device, dtype=dtype, use_installed_engine=use_installed_engine,
        max_new_tokens=max_new_tokens, states_server=states_server, ttt_steps=ttt_steps, more_prompts=more_prompts,
        confirm_prompts=confirm_prompts,
        confirm_prompt_ids=tuple(tuple(p) for p in confirm_prompt_ids) if confirm_prompt_ids is not None else None,
        prompt_ids=tuple(tuple(p) for p in prompt_ids) if prompt_ids is not None else None))
