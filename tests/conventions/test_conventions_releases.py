"""Engine releases as data (eagle_audit/conventions/releases.py, pack.py; probes/releases/*.json): the packed form
rebuilds every release's convention file exactly and loads; the shipped files are what the packer writes from them;
a release is chosen as given, nearest known (said), or by range; and the facts the field depends on are pinned per
release (issue 41: the seed's DeepSeek rule, the vLLM DFlash boundaries)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle_audit.conventions import get_convention, parse_convention
from eagle_audit.conventions.pack import render
from eagle_audit.conventions.releases import (NEAREST, apply_delta, choose, convention_data, delta, known, pack, packs,
                                              skeleton, spans, text_diff, apply_text)
from eagle_audit.errors import UnknownConvention


def _all(packed):
    return [(v, n) for v, r in packed["releases"].items() for n in r]


@pytest.mark.parametrize("path,packed", packs(), ids=lambda x: Path(x).name if isinstance(x, str) else "")
def test_the_shipped_data_is_what_the_packer_writes_and_every_release_loads(path, packed):
    files = [convention_data(packed, v, n) for v, n in _all(packed)]
    for data, (v, n) in zip(files, _all(packed)):
        assert (data["name"], str(data["version"])) == (n, v)
        parse_convention(data, f"{path}#{v}/{n}")  # loads as a convention
    again = pack(files, packed["engine"], packed["missing"], packed["generated_by"])
    assert render(again) == Path(path).read_text()  # reproducible: re-packing changes nothing


def test_text_and_delta_round_trip():
    a = {"name": "x", "version": "1", "rules": {"r": {"default_ids": "[2, N // 2, N - 3]", "source": "a.py:10-12"}},
         "unsupported": {"A": "a.py:3 has none", "B": "b.py:4"}, "fallback_rule": None}
    b = {"name": "x", "version": "2", "rules": {"r": {"default_ids": "[2, N // 2, N - 3]", "source": "a.py:11-13"}},
         "unsupported": {"A": "a.py:5 has none", "B": "b.py:4"}, "fallback_rule": None}
    assert skeleton(a) == skeleton(b)  # only text differs: one rule set
    assert apply_text(a, text_diff(a, b)) == b
    c = {**b, "rules": {"r": {"default_ids": "[1, N // 2 - 1, N - 4]", "source": "a.py:11-13"}}, "unsupported": {"B": "b"}}
    assert skeleton(c) != skeleton(b)  # an expression changed: another set
    assert apply_delta(b, delta(b, c)) == c and apply_delta(c, delta(c, b)) == b


def test_choosing_a_release():
    assert get_convention("SGLang@0.5.6", "engine").label() == "SGLang 0.5.6 (given)"  # names in any case
    assert get_convention("SGLang", "engine").label() == "SGLang 0.5.23 (newest built in)"
    assert get_convention(None, "engine").label() == "SGLang 0.5.23 (assumed)"
    v1 = get_convention("vllm-v1@0.20.0", "engine")
    assert (v1.name, v1.version, v1.release_how) == ("vllm-v1", "0.20.0", "given")
    newer = choose("sglang", "9.9.9")
    assert newer.how == f"{NEAREST} to 9.9.9" and newer.version == known("sglang")[-1] and "newer than every release" in newer.note
    within = choose("sglang", "0.5.13.post9")  # between two releases: the one before it, and whether they differ
    assert within.version.startswith("0.5.13") and within.how == "nearest known to 0.5.13.post9" and "0.5.14" in within.note
    span = choose("sglang", "0.5.6..0.5.14")
    assert span.version == "0.5.14" and span.span[0] == "0.5.6" and "rule set(s)" in span.note
    assert choose("sglang", ">=0.5.20").span == ("0.5.20", "0.5.21", "0.5.22", "0.5.23")
    with pytest.raises(UnknownConvention, match="older than every release with sglang rules"):
        choose("sglang", "0.3.0")
    with pytest.raises(UnknownConvention, match="not a release number"):
        choose("sglang", "latest")
    with pytest.raises(UnknownConvention, match="no rules: .*serves no DFlash drafts"):
        get_convention("sglang-dflash@0.5.6", "engine")
    old = get_convention("vllm@0.10.0", "engine")  # before the V2 runner's rules: the V1 runner's, said
    assert old.name == "vllm-v1" and "vllm-v1 rules apply" in old.release_note
    assert "rule sets" in spans("vllm")


def _served(spec: str, ids, arch="DeepseekV3ForCausalLM", n=61):
    conv = get_convention(spec, "engine")
    return [s.label() for s in conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}, arch, n).states]


def test_the_seeds_deepseek_rule_per_release():
    """SGLang deepseek_v2.py set_eagle3_layers_to_capture: explicit ids always +1 up to 0.5.12 (the seed's
    release fed B3, B31, B59 for [2, 30, 58]); from 0.5.13 (PR #25454) +1 only when ids[0] == 1."""
    for old in ("0.5.6", "0.5.12"):
        assert _served(f"sglang@{old}", [2, 30, 58]) == ["B3", "B31", "B59"]
    for new in ("0.5.13", "0.5.14", "0.5.23"):
        assert _served(f"sglang@{new}", [2, 30, 58]) == ["B2", "B30", "B58"]
        assert _served(f"sglang@{new}", [1, 30, 58]) == ["B2", "B31", "B59"]


@pytest.mark.parametrize("spec,place,shift", [
    ("vllm-v1-dflash@0.20.0", "dflash_target_layer_ids", 0),  # the V1 runner read them verbatim (vLLM PR #40727)
    ("vllm-v1-dflash@0.22.0", "dflash_target_layer_ids", 1),
    ("vllm-dflash@0.22.0", "default", 0),  # the V2 runner read no DFlash ids up to 0.22
    ("vllm-dflash@0.24.0", "dflash_target_layer_ids", 1),
])
def test_vllm_dflash_boundaries_per_release(spec, place, shift):
    conv = get_convention(spec, "engine")
    _, where, by = conv.read_draft_ids({"dflash_config": {"target_layer_ids": [1, 17, 33]}})
    assert (where, by) == (place, shift)


def test_a_release_data_file_is_json_a_line_per_release():
    for path, packed in packs():
        text = Path(path).read_text()
        block = text[text.index('"releases": {'):text.index('"sets": {')].splitlines()
        assert [json.loads(line.split(":", 1)[0]) for line in block[1:-1]] == list(packed["releases"])
        assert json.loads(text) == packed and "/work/" not in text  # no folder of the machine that packed it
