"""What every result records about how it was made, and which engine rules it used."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .version import __version__
from .conventions import Convention, get_convention


def package_version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """The versions every record names: eagle-audit, torch, transformers, Python. A process that never imported torch
    (``layers --static``) reads torch's version from the package metadata instead of importing it."""
    import sys

    torch = sys.modules.get("torch")
    return {"eagle_audit": __version__, "torch": torch.__version__ if torch else package_version("torch"),
            "transformers": package_version("transformers"), "python": platform.python_version()}


def engine_convention(name: str, use_installed: bool, notes: list[str]) -> Convention:
    """The engine's rules: probed from the installed engine when there is one (and ``use_installed``),
    else the built-in convention file. Which one is said in ``notes``."""
    if use_installed:
        from .probe import installed_convention

        conv = installed_convention(name)
        if conv is not None:
            notes.append(f"engine rules probed from the installed {conv.title} {conv.version}")
            return conv
    conv = get_convention(name, "engine")
    notes.append(f"engine rules: built-in {conv.title} {conv.version} ({conv.path})")
    return conv


def provenance(*, command: str | None, engine: Convention, trainer: Convention | None, target, prompts: str | None,
               num_prompts: int, tokens: int, notes: list[str], static: bool = False) -> dict[str, Any]:
    """The provenance block shared by every result schema. ``target`` is a LoadedTarget or None (static)."""
    return {
        **versions(), "command": command,
        "engine_rules": engine.to_json(), "trainer_rules": trainer.to_json() if trainer else None,
        "device": target.device if target else None, "dtype": target.dtype if target else None,
        "static": static, "prompts": prompts or "built-in chat set", "num_prompts": num_prompts,
        "tokens": tokens, "notes": list(notes),
        # where the target's states came from (eagle_audit.source: local, device-map, or a server)
        "source": target.spec.to_json() if target is not None and hasattr(target, "spec") else None,
    }
