"""The probe on a synthetic source tree: every rule shape it knows, and the ones it must not guess."""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

import pytest

import eagle_audit.probe as probe_pkg
from eagle_audit.errors import InputNotFound
from eagle_audit.probe import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, installed_convention,
                               probe_engine, to_convention)
from eagle_audit.probe.source import BadSource
from tests.probe.probe_tree import FILES, line_of, write_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "src")


@pytest.fixture
def result(tree: Path):
    return probe_engine("sglang", tree)


def test_version_and_ids_from(result):
    assert result.version == "9.9.9"
    assert result.ids_from == ("top_level", "nested")
    assert result.ids_site.path.endswith("spec_aux_hidden_state.py")


def test_inherited_setter_with_len_layers_and_minus_one(result):
    a = result.get("BaseForCausalLM")
    assert a.status == SUPPORTED
    assert a.rule.default_ids == "[1, N - 2]" and a.rule.default_shift == 0
    assert [(c.when, c.shift) for c in a.rule.explicit] == [(None, -1)]
    assert (a.rule.reach.min_capture, a.rule.reach.max_capture) == ("0", "N - 1")
    assert a.rule.n_from == "len(self.model.layers)"
    assert a.setter.short() == f"base_lm.py:{line_of('sglang/srt/models/base_lm.py', 'def set_eagle3')}-" \
                               f"{line_of('sglang/srt/models/base_lm.py', '[v - 1 for v')}"


def test_factory_override_and_super_forward_reach_the_final_boundary(result):
    a = result.get("DerivedForCausalLM")
    assert a.status == SUPPORTED and a.setter.file == "base_lm.py"
    assert a.rule.reach.max_capture == "N"
    assert a.rule.reach.site.line == line_of("sglang/srt/models/base_lm.py", "if num_layers in")


def test_delegation_resolved_through_parameter_default_and_super_init(result):
    wrapper, wrapped = result.get("Wrapper"), result.get("WrappedDerived")
    assert wrapper.status == wrapped.status == SUPPORTED
    assert [s.file for s in wrapper.via] == ["derived.py"] and wrapper.setter.file == "base_lm.py"
    assert wrapper.rule.reach.max_capture == "N - 1"  # the default: BaseForCausalLM
    assert wrapped.rule.reach.max_capture == "N"  # the subclass passes DerivedForCausalLM up
    assert "derived.py" in wrapped.where() and "base_lm.py" in wrapped.where()


def test_unresolved_delegation_names_file_and_line(result):
    a = result.get("Dynamic")
    assert a.status == DELEGATING_UNRESOLVED
    assert f"derived.py:{line_of('sglang/srt/models/derived.py', 'self.model = arch(config)')}" in a.reason


def test_conditional_cases_class_attribute_and_unguarded_inner_setter(result):
    a = result.get("MoeForCausalLM")
    assert a.status == SUPPORTED
    assert a.rule.default_ids == "[2, N // 2, N - 3]"
    assert [(c.when, c.shift) for c in a.rule.explicit] == [("min(ids) == 0", 0), (None, 1)]
    assert a.rule.n_from == "self.config.text_config.num_hidden_layers"
    assert a.rule.reach.max_capture == "N - 1"
    assert a.rule.reach.unguarded.line == line_of("sglang/srt/models/moe.py", "for layer_id in")


def test_unrecognised_rule_shape_reports_file_and_line(result):
    a = result.get("OddForCausalLM")
    assert a.status == UNRECOGNISED and a.rule is None
    line = line_of("sglang/srt/models/odd.py", "sorted(x * 2")
    assert f"sglang/srt/models/odd.py:{line}" in a.reason


def test_unrecognised_capture_test_reports_file_and_line(result):
    a = result.get("ShiftedForCausalLM")
    assert a.status == UNRECOGNISED
    assert f"odd.py:{line_of('sglang/srt/models/odd.py', 'i - 1 in')}" in a.reason


def test_entry_class_without_setter_is_unsupported(result):
    a = result.get("Plain")
    assert a.status == UNSUPPORTED and "derived.py has no set_eagle3_layers_to_capture" in a.reason


def test_emitted_convention_loads(result):
    conv = to_convention(result)
    assert conv.version == "9.9.9" and conv.ids_from == ("top_level", "nested")
    assert set(conv.architectures) == {"BaseForCausalLM", "DerivedForCausalLM", "Wrapper", "WrappedDerived",
                                       "MoeForCausalLM"}
    assert conv.architectures["Wrapper"] == conv.architectures["BaseForCausalLM"]
    assert "Plain" in conv.unsupported
    assert any(n.startswith("OddForCausalLM: unrecognised") for n in conv.notes)
    wiring = conv.resolve({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 5, 9]}}, "MoeForCausalLM", 12)
    assert wiring.capture_indices == (0, 5, 9)  # min(ids) == 0: verbatim
    wiring = conv.resolve({"eagle_aux_hidden_state_layer_ids": [1, 5, 11]}, "MoeForCausalLM", 12)
    assert wiring.capture_indices == (2, 6, 12) and wiring.dropped == (12,)


def test_wheel_gives_the_same_result(tree: Path, tmp_path: Path, result):
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel in FILES:
            zf.write(tree / rel, rel)
    from_wheel = probe_engine("sglang", wheel)
    assert from_wheel.archs == result.archs and from_wheel.version == "9.9.9"


def test_bad_sources(tmp_path: Path):
    with pytest.raises(InputNotFound, match="no sglang source"):
        probe_engine("sglang", tmp_path / "missing")
    with pytest.raises(InputNotFound, match="no sglang source"):
        probe_engine("sglang", tmp_path)  # a folder without sglang/srt/models
    broken = tmp_path / "sglang-1.0-py3-none-any.whl"
    broken.write_bytes(b"not a zip")
    with pytest.raises(BadSource, match="not a readable wheel"):
        probe_engine("sglang", broken)


def test_installed_convention(tree: Path, monkeypatch: pytest.MonkeyPatch):
    assert installed_convention("no-such-engine") is None
    monkeypatch.syspath_prepend(str(tree))  # found by importlib.util.find_spec, never imported
    importlib.invalidate_caches()
    conv = installed_convention("sglang")
    assert conv is not None and conv.version == "9.9.9" and "MoeForCausalLM" in conv.architectures
    assert "sglang" not in __import__("sys").modules
    monkeypatch.setattr(probe_pkg.importlib.util, "find_spec", lambda name: None)
    assert installed_convention("sglang") is None
