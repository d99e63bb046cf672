"""Prompt files for capture: the accepted formats, rendering with a chat template, and bad files."""

import json

import pytest

from eagle_audit.errors import BadPrompts, InputNotFound
from eagle_audit.prompts import Prompt, encode, load_prompts


def write(tmp_path, lines, name="p.jsonl"):
    f = tmp_path / name
    f.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    return str(f)


def test_builtin_chat_set():
    prompts = load_prompts(None, 3)
    assert len(prompts) == 3 and all(p.messages and p.messages[0][0] == "user" for p in prompts)
    assert len(load_prompts()) > 3


def test_jsonl_formats(tmp_path):
    path = write(tmp_path, [
        {"text": "raw text"},
        {"prompt": "a question"},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
        {"turns": ["first turn", "second turn"]},
        {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"},
                           {"from": "gpt", "value": "a"}]},
    ])
    assert load_prompts(path) == (
        Prompt(text="raw text"),
        Prompt(messages=(("user", "a question"),)),
        Prompt(messages=(("system", "be brief"), ("user", "hi"))),
        Prompt(messages=(("user", "first turn"),)),
        Prompt(messages=(("system", "s"), ("user", "q"))),
    )
    assert len(load_prompts(path, limit=2)) == 2


def test_plain_text_is_one_prompt_a_line(tmp_path):
    path = write(tmp_path, ["first prompt", "", "  second prompt  "], name="p.txt")
    assert load_prompts(path) == (Prompt(messages=(("user", "first prompt"),)),
                                  Prompt(messages=(("user", "second prompt"),)))


@pytest.mark.parametrize("lines, message", [
    ([" ", ""], "no prompts in the file"),
    ([{"text": "ok"}, "{broken"], ":2: not valid JSON"),
    ([{"text": "ok"}, "[1, 2]"], ":2: expected a JSON object"),
    ([{"answer": "x"}], ":1: no text, prompt, messages, turns or conversations field"),
])
def test_bad_prompt_files_name_the_file_and_line(tmp_path, lines, message):
    path = write(tmp_path, lines)
    with pytest.raises(BadPrompts, match=message) as info:
        load_prompts(path)
    assert info.value.message.startswith(path)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(InputNotFound, match="no such prompts file"):
        load_prompts(str(tmp_path / "absent.jsonl"))
    f = tmp_path / "bin.jsonl"
    f.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(BadPrompts, match="not a text file"):
        load_prompts(str(f))


def test_encode_renders_the_chat_template_and_truncates(tiny_targets):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_targets["llama"]))
    chat, text = Prompt(messages=(("user", "hi"),)), Prompt(text="hi")
    assert chat.render(tok) == "<|bos|>user: hi\nassistant:"
    assert chat.render(None) == "user: hi\nassistant:"
    assert text.render(tok) == "hi"
    ids = encode([chat, text], tok)
    assert ids[0][0] == tok.convert_tokens_to_ids("<|bos|>") and len(ids[0]) == 1 + len("user: hi\nassistant:")
    assert len(ids[1]) == 2
    assert encode([chat], tok, max_tokens=4) == [ids[0][:4]]
    with pytest.raises(BadPrompts, match="the target has no tokenizer"):
        encode([chat], None)
    with pytest.raises(BadPrompts, match="encodes to no tokens"):
        encode([Prompt(text="")], tok)
