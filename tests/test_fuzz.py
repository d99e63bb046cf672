"""Hostile inputs at every edge (issue 9): each case runs a command in process and asserts its exit code,
that stderr is one ``error:`` line (plus an optional hint) without a traceback, and that every input
file is byte-identical afterwards. Crashes are exit 3, never 1; bad input is exit 2.

Fast: no model weights are loaded (``--static`` on a config-only target, or an input that is refused
before the target loads). The kill and concurrency tests of the cache are in tests/test_cache.py."""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path
from typing import Callable

import pytest

BAD = 2  # exit 3 (internal error) is never expected: it would be a bug
ROOT = Path(__file__).resolve().parent.parent


class Case:
    """What one fuzz case builds: the command line, and the files it reads (checked unchanged)."""

    def __init__(self, tmp: Path, target: Path, make_draft: Callable[..., Path]):
        self.tmp, self.target, self.make_draft = tmp, target, make_draft
        self.inputs: list[Path] = [target]

    def draft(self, **kw) -> Path:
        d = self.make_draft(**kw)
        self.inputs.append(d)
        return d

    def file(self, name: str, data: bytes | str) -> Path:
        p = self.tmp / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        self.inputs.append(p)
        return p

    def layers(self, *args, draft: Path | None = None) -> list[str]:
        return ["layers", "-t", str(self.target), "-d", str(draft or self.draft(nested_ids=[1, 3, 4])),
                "--builtin-rules", *map(str, args)]


def _edit_config(draft: Path, edit: Callable[[dict], None]) -> Path:
    cfg = json.loads((draft / "config.json").read_text())
    edit(cfg)
    (draft / "config.json").write_text(json.dumps(cfg))
    return draft


def _set(*path, value):
    def edit(cfg):
        node = cfg
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = value
    return edit


def _header(draft: Path, edit: Callable[[dict], object]) -> Path:
    """Rewrite the safetensors header of a draft's weights (the data is kept)."""
    f = draft / "model.safetensors"
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    new = json.dumps(edit(header)).encode()
    f.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])
    return draft


def _entry(key, value, name="fc.weight"):
    def edit(h):
        h[name][key] = value
        return h
    return edit


def cfg_case(*path, value):
    def build(c: Case):
        d = c.draft(nested_ids=[1, 3, 4])
        _edit_config(d, _set(*path, value=value))
        return c.layers("--static", draft=d), BAD
    return build


def st_case(edit):
    def build(c: Case):
        d = c.draft(nested_ids=[1, 3, 4])
        _header(d, edit)
        return c.layers("--static", draft=d), BAD
    return build


def raw_config(text: str | bytes):
    def build(c: Case):
        d = c.draft(nested_ids=[1, 3, 4])
        (d / "config.json").write_bytes(text.encode() if isinstance(text, str) else text)
        return c.layers("--static", draft=d), BAD
    return build


def convention(edit, kind="engine"):
    def build(c: Case):
        data = json.loads((ROOT / "probes" / "sglang.json").read_text())
        edit(data)
        p = c.file("conv.json", json.dumps(data))
        flag = "-e" if kind == "engine" else "--trainer"
        return c.layers(flag, p, "--static"), BAD
    return build


def rule_expr(key, text):
    def edit(data):
        for rule in data["rules"].values():
            rule[key] = text
    return convention(edit)


def prompts(text: bytes | str):
    def build(c: Case):  # refused before the target (config only here) would load
        p = c.file("prompts.jsonl", text)
        return c.layers("--prompts", p), BAD
    return build


def gguf(data: bytes):
    def build(c: Case):
        g = c.file("model.gguf", data)
        return ["layers", "-t", str(g), "-d", str(c.draft(nested_ids=[1, 3, 4])), "--static"], BAD
    return build


def report(doc, expect=0):
    def build(c: Case):
        p = c.file("result.json", json.dumps(doc) if not isinstance(doc, (str, bytes)) else doc)
        return ["report", str(p), "--html", str(c.tmp / "o.html"), "--md", str(c.tmp / "o.md")], expect
    return build


def _example() -> dict:
    return json.loads((ROOT / "reports" / "examples" / "canary-miswired.json").read_text())


def mutated(path: tuple, value):
    doc = _example()
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def probe_tree(files: dict[str, bytes], registry: str | None = None):
    """A synthetic SGLang tree with extra model files, or a synthetic vLLM tree with another registry."""
    def build(c: Case):
        root = c.tmp / "src"
        if registry is None:
            from tests.probe.probe_tree import write_tree

            write_tree(root)
            models, engine = root / "sglang" / "srt" / "models", "sglang"
        else:
            from tests.probe.test_probe_vllm import INTERFACES, TINY

            models, engine = root / "vllm" / "model_executor" / "models", "vllm"
            models.mkdir(parents=True)
            (models / "registry.py").write_text(registry)
            (models / "interfaces.py").write_text(INTERFACES)
            (models / "tiny.py").write_text(TINY)
        for rel, data in files.items():
            (models / rel).write_bytes(data)
        c.inputs.append(root)
        return ["probe", engine, "--source", str(root)], BAD if registry is not None else 0
    return build


def output_case(flag_args: Callable[[Case, Path], list]):
    def build(c: Case):
        d = c.draft(nested_ids=[1, 3, 4])
        return c.layers("-e", "vllm-v1", "--static", *flag_args(c, d), draft=d), BAD
    return build


DEEP_ADD = b"x = " + b"+".join([b"a"] * 100_000) + b"\n"

CASES: dict[str, Callable[[Case], tuple[list[str], int]]] = {
    # draft configs with wrong types
    "config hidden_size string": cfg_case("hidden_size", value="abc"),
    "config architectures int": cfg_case("architectures", value=5),
    "config architectures of ints": cfg_case("architectures", value=[5]),
    "config speculators_config string": cfg_case("speculators_config", value="x"),
    "config verifier string": cfg_case("speculators_config", value={"verifier": "x"}),
    "config num_aux string": cfg_case("num_aux_hidden_states", value="3"),
    "config eagle_config list": cfg_case("eagle_config", value=[1]),
    "config negative layers": cfg_case("num_hidden_layers", value=-1),
    "config bool width": cfg_case("target_hidden_size", value=True),
    "config huge vocab": cfg_case("vocab_size", value=10**30),
    "config float vocab": cfg_case("draft_vocab_size", value=1.5),
    "config flag string": cfg_case("norm_before_fc", value="yes"),
    "config ids string": cfg_case("eagle_config", "eagle_aux_hidden_state_layer_ids", value="1,2"),
    "config ids mixed": cfg_case("eagle_aux_hidden_state_layer_ids", value=[1, "2", 3]),
    "config ids huge": cfg_case("eagle_config", "eagle_aux_hidden_state_layer_ids", value=[10**9, 2, 3]),
    "config canary record string": cfg_case("eagle_audit_canary", value={"trained_boundaries": "0,1"}),
    "config canary record empty": cfg_case("eagle_audit_canary", value={"trained_boundaries": []}),
    "config layer config string": cfg_case("transformer_layer_config", value={"hidden_size": "x"}),
    "config deep nesting": raw_config("[" * 100_000 + "]" * 100_000),
    "config NaN": raw_config('{"hidden_size": NaN}'),
    "config Infinity": raw_config('{"rope_theta": 1e999}'),
    "config not JSON": raw_config("{"),
    "config a list": raw_config("[1, 2]"),
    "config not UTF-8": raw_config(b'{"hidden_size": "caf\xe9"}'),
    # safetensors headers
    "safetensors header a list": st_case(lambda h: [1, 2]),
    "safetensors string offsets": st_case(_entry("data_offsets", ["a", "b"])),
    "safetensors offsets a string": st_case(_entry("data_offsets", "ab")),
    "safetensors 3-d fc": st_case(_entry("shape", [32, 96, 1])),
    "safetensors fc 0x0": st_case(lambda h: {**h, "fc.weight": {**h["fc.weight"], "shape": [0, 0],
                                             "data_offsets": [h["fc.weight"]["data_offsets"][0]] * 2}}),
    "safetensors unknown dtype": st_case(_entry("dtype", "Q9")),
    "safetensors dtype a list": st_case(_entry("dtype", ["F32"])),
    "safetensors negative dim": st_case(_entry("shape", [-32, -96])),
    "safetensors d2t 2-d": st_case(_entry("shape", [64, 2], "d2t")),
    "safetensors entry a string": st_case(lambda h: {**h, "fc.weight": "x"}),
    # GGUF targets with --static
    "gguf truncated": gguf(b"GGUF\x03\x00\x00\x00" + b"\x01" * 40),
    "gguf empty": gguf(b""),
    "gguf not gguf": gguf(b"hello world" * 10),
    # convention files: types, expression size and evaluation bounds
    "convention N // 0": rule_expr("default_ids", "N // 0"),
    "convention max()": rule_expr("default_ids", "max()"),
    "convention huge string": rule_expr("default_ids", '"-"*100000+"N"'),
    "convention huge list": rule_expr("default_ids", "[0]*(N*N*N*N*N*N*N)"),
    "convention growing list": rule_expr("max_capture", "[0]*N*N*N*N*N"),
    "convention 5000 chars": rule_expr("default_ids", "N+" * 2500),
    "convention deep parens": rule_expr("default_ids", "(" * 300 + "N" + ")" * 300),
    "convention int ids": rule_expr("default_ids", "N"),
    "convention float": rule_expr("default_ids", "[1.5, 2]"),
    "convention NUL": rule_expr("default_ids", "[2, N // 2, N - 3]\x00"),
    "convention attribute": rule_expr("default_ids", "N.__class__"),
    "convention rules a list": convention(lambda d: d.__setitem__("rules", [])),
    "convention rule a string": convention(lambda d: d["rules"].__setitem__(next(iter(d["rules"])), "x")),
    "convention ids_from a string": convention(lambda d: d.__setitem__("ids_from", "nested")),
    "convention title a list": convention(lambda d: d.__setitem__("title", ["x"])),
    "convention flag not object": convention(lambda d: d.__setitem__("draft_flags", {"fc_norm": True})),
    "convention explicit an int": convention(lambda d: [r.__setitem__("explicit", 5) for r in d["rules"].values()]),
    "convention shift a string": convention(
        lambda d: [r.__setitem__("explicit", [{"shift": "1"}]) for r in d["rules"].values()]),
    "convention when divides by 0": convention(
        lambda d: [r.__setitem__("explicit", [{"shift": 1, "when": "N // 0"}]) for r in d["rules"].values()]),
    "convention ids_from of lists": convention(lambda d: d.__setitem__("ids_from", [["nested"]])),
    "convention place a list": convention(lambda d: d.__setitem__("ids_from", [{"place": ["nested"]}])),
    "convention feeds an int": convention(lambda d: [r.__setitem__("feeds", 5) for r in d["rules"].values()]),
    "convention flag read an int": convention(
        lambda d: d["draft_flags"].__setitem__(next(iter(d["draft_flags"])), {"read": 5})),
    "convention trainer deep": convention(lambda d: d.__setitem__("notes", [[[[]]]]), kind="trainer"),
    # prompts files
    "prompts messages a string": prompts('{"messages": "hi"}\n'),
    "prompts message without role": prompts('{"messages": [{"content": "hi"}]}\n'),
    "prompts content an int": prompts('{"messages": [{"role": "user", "content": 5}]}\n'),
    "prompts text an int": prompts('{"text": 5}\n'),
    "prompts turns empty": prompts('{"turns": []}\n'),
    "prompts conversations of ints": prompts('{"conversations": [1, 2]}\n'),
    "prompts no field": prompts('{"x": 1}\n'),
    "prompts a list line": prompts("[1]\n"),
    "prompts bad JSON": prompts('{"text": \n'),
    "prompts deep": prompts("[" * 10_000 + "]" * 10_000 + "\n"),
    "prompts not UTF-8": prompts(b"caf\xe9\n"),
    "prompts empty": prompts(b"\n\n"),
    # report inputs of the wrong types
    "report schema a list": report({"schema": [1]}, BAD),
    "report Infinity": report('{"schema": "eagle-audit/accept-rate/1", "accept_length": {"trained": Infinity}}'),
    "report not an object": report("[1]", BAD),
    "report slots an int": report(mutated(("layers", "slots"), 5), BAD),
    "report slot index a string": report(mutated(("layers", "slots", 0, "index"), "abc")),
    "report heatmap rows an int": report(mutated(("layers", "heatmap", "rows"), -1)),
    "report heatmap row an int": report(mutated(("layers", "heatmap", "rows", 0), 7)),
    "report trained states an int": report(mutated(("layers", "trained", "states"), -1)),
    "report notes an int": report(mutated(("layers", "provenance", "notes"), -1)),
    "report resolved an int": report(mutated(("layers", "fix", "resolved"), -1)),
    "report attribution an int": report(mutated(("accept_rate", "attribution"), -1)),
    "report sha an int": report(mutated(("layers", "target", "config_sha256"), -1)),
    "report huge number": report(mutated(("accept_rate", "accept_length", "trained"), 1e308)),
    # probe sources
    "probe non-UTF-8 model file": probe_tree({"latin.py": b"# caf\xe9\nclass A:\n    pass\n"}),
    "probe NUL in a model file": probe_tree({"nul.py": b"x = 1\x00\n"}),
    "probe deeply nested model file": probe_tree({"deep.py": b"# SupportsEagle3\n" + DEEP_ADD}),
    "probe registry syntax error": probe_tree({}, registry="_X = {\n"),
    "probe registry NUL": probe_tree({}, registry="_X = {}\n\x00"),
    # outputs that would touch an input
    "output json over the draft config": output_case(lambda c, d: ["--json", d / "config.json"]),
    "output report into the draft": output_case(lambda c, d: ["--report", d]),
    "output fixed config inside the draft": output_case(lambda c, d: ["--write-fixed-config", d / "fixed"]),
    "output fixed config onto a file": output_case(lambda c, d: ["--write-fixed-config", c.file("f", "keep")]),
    "output json into the target": output_case(lambda c, d: ["--json", c.target / "config.json"]),
    "output json a directory": output_case(lambda c, d: ["--json", c.tmp]),
    # paths
    "draft a symlink loop": lambda c: (c.layers("--static", draft=_loop(c.tmp)), BAD),
    "target a symlink loop": lambda c: (["layers", "-t", str(_loop(c.tmp)), "-d", str(c.draft()), "--static"], BAD),
    "draft a file": lambda c: (c.layers("--static", draft=c.file("f", "x")), BAD),
}


def _loop(tmp: Path) -> Path:
    p = tmp / "loop"
    p.symlink_to(p)
    return p


@pytest.fixture(scope="module")
def config_target(tmp_path_factory) -> Path:
    """A Llama target of 8 layers, hidden 32, config only (no weights: nothing here loads them)."""
    path = tmp_path_factory.mktemp("fuzz-target") / "llama"
    path.mkdir()
    cfg = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
               max_position_embeddings=256, architectures=["LlamaForCausalLM"], model_type="llama",
               num_hidden_layers=8)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input(name, cli, config_target, make_draft, digest, tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_AUDIT_CACHE", str(tmp_path / "cache"))
    case = Case(tmp_path, config_target, make_draft)
    args, expect = CASES[name](case)
    before = {str(p): digest(p) if p.is_dir() else p.read_bytes() for p in case.inputs if p.exists()}
    res = cli(*args, command=None)
    assert "Traceback" not in res.output, res.output[-2000:]
    assert res.exit_code == expect, (res.exit_code, res.stderr[-1000:])
    if expect:
        lines = res.stderr.strip().splitlines()
        assert lines and lines[0].startswith("error: "), lines
        assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: ")), lines
        assert len(lines[0]) < 500, len(lines[0])
    after = {str(p): digest(p) if p.is_dir() else p.read_bytes() for p in case.inputs if p.exists()}
    assert after == before, "an input file changed"

