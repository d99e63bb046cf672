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

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import BadPrompts, InputNotFound


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


def _from_object(obj: dict, where: str) -> Prompt:
    if isinstance(obj.get("messages"), list):
        msgs = tuple((m["role"], m["content"]) for m in obj["messages"])
        return Prompt(messages=msgs)
    if isinstance(obj.get("turns"), list) and obj["turns"]:  # MT-bench question.jsonl
        return Prompt(messages=(("user", str(obj["turns"][0])),))
    if isinstance(obj.get("conversations"), list):  # ShareGPT
        msgs = []
        for turn in obj["conversations"]:
            role = _SHAREGPT_ROLES.get(turn.get("from") or turn.get("role"), "user")
            msgs.append((role, turn.get("value") or turn.get("content") or ""))
            if role == "user":
                break
        if msgs:
            return Prompt(messages=tuple(msgs))
    for key in ("prompt", "text"):
        if isinstance(obj.get(key), str):
            return Prompt(messages=(("user", obj[key]),)) if key == "prompt" else Prompt(text=obj[key])
    raise BadPrompts(f"{where}: no text, prompt, messages, turns or conversations field")


def load_prompts(path: str | None = None, limit: int | None = None) -> tuple[Prompt, ...]:
    if path is None:
        text = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text()
        where = "built-in chat prompts"
    else:
        p = Path(path)
        if not p.is_file():
            raise InputNotFound(f"{path}: no such prompts file")
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            raise BadPrompts(f"{path}: not a text file") from None
        where = str(path)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise BadPrompts(f"{where}: no prompts in the file")
    prompts = []
    if lines[0].lstrip().startswith(("{", "[")):
        for i, line in enumerate(lines, 1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadPrompts(f"{where}:{i}: not valid JSON ({e.msg})") from None
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
