"""eagle_audit/cli/invocation.py: the command a result records (``provenance.command``) reproduces the run, naming
only what differs from the defaults."""

from __future__ import annotations

import json
import shlex


def _without_command(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["provenance"].pop("command")
    return doc


def test_the_recorded_command_reproduces_the_result(cli, config_only_target, make_draft, tmp_path):
    target, draft = config_only_target("LlamaForCausalLM", 32), make_draft(top_level_ids=[0, 3, 16])
    first = tmp_path / "first.json"
    res = cli("-t", target, "-d", draft, "--static", "--engine", "vllm", "--builtin-rules", "--json", first)
    assert res.exit_code == 1, res.output  # a mismatch: its findings and fix are part of what must reproduce
    doc = json.loads(first.read_text())
    words = shlex.split(doc["provenance"]["command"])
    assert words[:2] == ["eagle-audit", "layers"]
    assert {"--static", "--builtin-rules"} <= set(words) and words[words.index("--engine") + 1] == "vllm"
    assert "--max-prompts" not in words and "--trainer" not in words  # defaults are not repeated
    # the same command, its output moved: the same result
    second = tmp_path / "second.json"
    args = words[2:]
    args[args.index("--json") + 1] = str(second)
    again = cli(*args)
    assert again.exit_code == res.exit_code, again.output
    assert _without_command(json.loads(second.read_text())) == _without_command(doc)
