"""Prompts for capture and acceptance runs.

Sources: the built-in chat set (``eagle_audit/data/chat_prompts.jsonl``), or ``--prompts FILE``:

* JSONL, one object a line, with a ``text`` or ``prompt`` string, a ``messages`` list
  (``[{"role", "content"}]``), MT-bench's ``turns`` (the first turn is used) or ShareGPT's
  ``conversations`` (``[{"from": "human"|"gpt", "value"}]``; the turns up to the first human one);
* otherwise plain text, one prompt a line.

Chat prompts are rendered with the target's chat template (with the generation prompt); plain
``text`` is tokenised as is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import AuditError, BadPrompts, InputNotFound, shown
from .jsonfile import loads_bounded


@dataclass(frozen=True)
class Prompt:
    messages: tuple[tuple[str, str], ...] | None = None  # ((role, content), ...)
    text: str | None = None

    def render(self, tokenizer) -> str:
        if self.text is not None:
            return self.text
        msgs = [{"role": r, "content": c} for r, c in self.messages]
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return "\n".join(f"{r}: {c}" for r, c in self.messages) + "\nassistant:"


_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def _text(value, where: str, field: str) -> str:
    if not isinstance(value, str):
        raise BadPrompts(f"{where}: {field} must be a string, got {shown(value)}")
    return value


def _from_object(obj: dict, where: str) -> Prompt:
    if "messages" in obj:
        msgs = obj["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise BadPrompts(f"{where}: messages must be a non-empty list of {{role, content}} objects, got {shown(msgs)}")
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise BadPrompts(f"{where}: messages[{i}] must be an object with role and content, got {shown(m)}")
        return Prompt(messages=tuple((_text(m["role"], where, f"messages[{i}].role"),
                                      _text(m["content"], where, f"messages[{i}].content")) for i, m in enumerate(msgs)))
    if "turns" in obj:  # MT-bench question.jsonl
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            raise BadPrompts(f"{where}: turns must be a non-empty list of strings, got {shown(turns)}")
        return Prompt(messages=(("user", _text(turns[0], where, "turns[0]")),))
    if "conversations" in obj:  # ShareGPT
        conv = obj["conversations"]
        if not isinstance(conv, list):
            raise BadPrompts(f"{where}: conversations must be a list of turns, got {shown(conv)}")
        msgs = []
        for i, turn in enumerate(conv):
            if not isinstance(turn, dict):
                raise BadPrompts(f"{where}: conversations[{i}] must be an object, got {shown(turn)}")
            speaker = turn.get("from") or turn.get("role")
            role = _SHAREGPT_ROLES.get(speaker, "user") if isinstance(speaker, str) else "user"
            msgs.append((role, _text(turn.get("value") or turn.get("content") or "", where, f"conversations[{i}].value")))
            if role == "user":
                break
        if msgs:
            return Prompt(messages=tuple(msgs))
    for key in ("prompt", "text"):
        if key in obj:
            value = _text(obj[key], where, key)
            return Prompt(messages=(("user", value),)) if key == "prompt" else Prompt(text=value)
    raise BadPrompts(f"{where}: no text, prompt, messages, turns or conversations field")


def load_prompts(path: str | None = None, limit: int | None = None) -> tuple[Prompt, ...]:
    if path is None:
        text = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text()
        where = "built-in chat prompts"
    else:
        p = Path(path)
        if not p.is_file():
            if p.is_dir():
                raise BadPrompts(f"{path}: a directory, not a prompts file")
            if os.path.lexists(p):
                raise InputNotFound(f"{path}: a broken symbolic link or a symbolic-link loop, not a prompts file")
            raise InputNotFound(f"{path}: no such prompts file")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise BadPrompts(f"{path}: not a text file (UTF-8 expected)") from None
        except OSError as e:
            raise BadPrompts(f"{path}: cannot be read ({e.strerror or e})") from None
        where = str(path)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise BadPrompts(f"{where}: no prompts in the file")
    prompts = []
    if lines[0].lstrip().startswith(("{", "[")):
        for i, line in enumerate(lines, 1):
            obj = loads_bounded(line, f"{where}:{i}", BadPrompts)
            if not isinstance(obj, dict):
                raise BadPrompts(f"{where}:{i}: expected a JSON object")
            prompts.append(_from_object(obj, f"{where}:{i}"))
    else:
        prompts = [Prompt(messages=(("user", ln.strip()),)) for ln in lines]
    return tuple(prompts[:limit] if limit else prompts)


def encode(prompts, tokenizer, max_tokens: int | None = None) -> list[list[int]]:
    """Token ids of each rendered prompt (truncated to ``max_tokens``)."""
    if tokenizer is None:
        raise BadPrompts("the target has no tokenizer: prompts cannot be encoded")
    out = []
    for p in prompts:
        ids = tokenizer(p.render(tokenizer), add_special_tokens=p.text is not None)["input_ids"]
        if not ids:  # transformers builds an empty tokenizer for some models saved without one
            raise BadPrompts(f"a prompt encodes to no tokens with the target's tokenizer ({type(tokenizer).__name__}, "
                             f"{len(tokenizer)} entries): the tokenizer is missing or empty, or the prompt is blank")
        out.append(list(ids[:max_tokens] if max_tokens else ids))
    return out


def token_ids(given, prompts, tokenizer, max_tokens: int | None = None, what: str = "prompts") -> list[list[int]]:
    """The token ids an analysis runs on: ``given`` (token-id lists, the Python API's ``prompt_ids``) as they are,
    else ``prompts`` encoded (:func:`encode`). The one check every command makes of them: at least one prompt,
    and every prompt at least 2 tokens (a first prediction needs a token before it)."""
    ids = [list(p) for p in given] if given is not None else encode(prompts, tokenizer, max_tokens)
    if not ids or any(len(p) < 2 for p in ids):
        raise AuditError(f"{what}: every prompt needs at least 2 tokens")
    return ids
