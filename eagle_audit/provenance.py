"""What every result records about how it was made, and which engine rules it used."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Mapping

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


def engine_convention(name: str | None, use_installed: bool, notes: list[str], server=None) -> Convention:
    """The engine's rules at the release they speak for, chosen in this order (``Convention.release_how`` says
    which, ``notes`` says it in words):

    1. a release given (``sglang@0.5.6``, a range, or a file);
    2. the release a ``server`` (:class:`eagle_audit.engines.options.Server`) the command talks to reports, where
       it runs the engine named (or no engine was named);
    3. the installed engine, probed (with ``use_installed``);
    4. the newest built-in release of the engine named, or, no engine named, of SGLang ("assumed")."""
    import os
    from dataclasses import replace

    from .conventions.releases import INSTALLED, SERVER, known

    if name is not None and ("@" in name or name.endswith(".json") or os.sep in name):
        conv = get_convention(name, "engine")
        notes.append(_said(conv))
        return conv
    base = name.strip().lower() if name is not None else None
    if server is not None:
        conv = _from_server(base, server, notes, SERVER, known)
        if conv is not None:
            return conv
    if use_installed and base is not None:
        from .probe import installed_convention

        conv = installed_convention(base)
        if conv is not None:
            conv = replace(conv, release_how=INSTALLED)
            notes.append(f"engine rules probed from the installed {conv.title} {conv.version}")
            return conv
    conv = get_convention(base, "engine")
    notes.append(_said(conv))
    return conv


def engine_label(prov: Mapping[str, Any]) -> str | None:
    """'SGLang 0.5.6 (given)': the engine release a result's provenance speaks for and how it was chosen (None: no
    engine rules recorded)."""
    from .conventions.convention import release_label

    rules = prov.get("engine_rules") or {}
    if not rules:
        return None
    return release_label(rules.get("title") or rules.get("name") or "?", rules.get("version") or "?",
                         (rules.get("release") or {}).get("how") or "")


def _said(conv: Convention) -> str:
    where = conv.path.rsplit("/", 1)[-1] if conv.path else conv.name
    out = f"engine rules: {conv.label()} ({where})"
    if conv.release_how == "assumed":
        out += ": no engine was named, so the slots below are SGLang's; the verdict names each engine's"
    return out + (f"; {conv.release_note}" if conv.release_note else "")


def _from_server(base: str | None, server, notes: list[str], how: str, known) -> Convention | None:
    """The named engine (or the server's) at the release the server reports; None where it reports none, runs
    another engine, or cannot be asked (said in ``notes``)."""
    from .conventions.registry import release_convention
    from .errors import AuditError

    from .engines.http import ServerError

    try:
        from .engines.options import server_release

        kind, version, where = server_release(server)
    except ServerError as e:  # a server the command needs and cannot reach: said now, before any target loads
        if "unreachable" in e.message or "does not answer" in e.message:
            raise ServerError(e.message, hint=(e.hint or "") + " (checked before the target loads; start the server, "
                              "correct the URL, or leave the server out to capture here)") from None
        notes.append(f"the server's release was not read ({e.message})")
        return None
    except AuditError as e:
        notes.append(f"the server's release was not read ({e.message})")
        return None
    name = base or kind
    if name != kind and not name.startswith(kind + "-"):
        notes.append(f"the server at {server.url} runs {kind} {version or ''}, not {name}: its release is not used".replace("  ", " "))
        return None
    if version is None:
        notes.append(f"the {kind} server at {server.url} does not say its release ({where})")
        return None
    public = version.split("+")[0]
    if not known(name):
        notes.append(f"the {kind} server runs {version} ({where}); no release data for {name}")
        return None
    conv = release_convention(name, public, how)
    notes.append(f"engine rules: {conv.label()}: {kind} {version} read from {where}"
                 + (f"; {conv.release_note}" if conv.release_note else ""))
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
