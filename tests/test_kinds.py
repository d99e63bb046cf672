"""Draft kinds as a registry (eagle_audit/kinds.py): a new kind is one DraftKind and one register() call. A toy
kind proves it: detected from its config key, named by the draft reading, known to the convention parser,
refused by accept-rate with its own words (it is not simulated), and gone again after unregister()."""

from __future__ import annotations

import json

import pytest

from eagle_audit import kinds
from eagle_audit.kinds import DraftKind, detect, register, unregister


@pytest.fixture
def toy_kind():
    toy = DraftKind("toy", "Toy", lambda config: isinstance(config.get("toy_config"), dict), simulated=False,
                    not_simulated="accept-rate does not simulate toy drafting (a kind made for this test)")
    register(toy)
    try:
        yield toy
    finally:
        unregister("toy")


def test_a_registered_kind_is_detected_first_and_the_fallback_stays_last(toy_kind):
    assert list(kinds.KINDS)[0] == "toy" and list(kinds.KINDS)[-1] == kinds.FALLBACK
    assert detect({"toy_config": {}}) is toy_kind
    assert detect({"dflash_config": {}}).name == "dflash" and detect({}).name == "eagle3"
    assert kinds.kind("toy") is toy_kind


def test_unregister_removes_it_and_an_unknown_kind_is_one_line(toy_kind):
    unregister("toy")
    assert "toy" not in kinds.KINDS and detect({"toy_config": {}}).name == "eagle3"
    with pytest.raises(kinds.AuditError, match=r"draft kind 'toy': not one eagle-audit knows \(known: dspark, dflash"):
        kinds.kind("toy")
    with pytest.raises(ValueError, match="fallback"):
        unregister(kinds.FALLBACK)
    register(toy_kind)  # the fixture unregisters it again


def test_the_draft_reading_and_accept_rate_follow_the_registry(toy_kind, make_draft, tiny_targets, cli, tmp_path):
    """The whole path, with no kind name compared anywhere else: read_draft names the toy kind; an engine with no
    rules for it says so; given an engine convention for toy drafts, accept-rate refuses it in the toy's own words
    (one line each, exit 2)."""
    from eagle_audit.conventions.registry import probes_dir
    from eagle_audit.draft.read import read_draft

    draft = make_draft(extra={"toy_config": {"block": 1}})
    assert read_draft(str(draft)).kind == "toy"
    base = ("-t", tiny_targets["llama"].path, "-d", draft, "--max-prompts", "1", "--max-new-tokens", "4")
    r = cli(*base, command="accept-rate")
    assert r.exit_code == 2 and r.stderr.startswith("error: SGLang 0.5.23 ") and "has no rules for toy drafts" \
        in r.stderr, r.output
    engine = json.loads((probes_dir() / "sglang.json").read_text())
    engine["name"], engine["draft_kinds"] = "toy-engine", ["toy"]
    (tmp_path / "toy-engine.json").write_text(json.dumps(engine))
    r = cli(*base, "--engine", tmp_path / "toy-engine.json", command="accept-rate")
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines()[0] == (f"error: {draft}: a toy draft: accept-rate does not simulate toy "
                                                "drafting (a kind made for this test)"), r.stderr


def test_a_convention_may_name_the_new_kind(toy_kind, tmp_path):
    """The convention parser takes its list of kinds from the registry: a kind registered later is known."""
    from eagle_audit.conventions.registry import load_convention_file, probes_dir

    src = json.loads((probes_dir() / "specforge.json").read_text())
    src["name"], src["draft_kinds"] = "toy-trainer", ["toy"]
    path = tmp_path / "toy-trainer.json"
    path.write_text(json.dumps(src))
    conv = load_convention_file(str(path))
    assert conv.draft_kinds == ("toy",)
