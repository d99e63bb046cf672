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


# ----------------------------------------------------------------------------- draft families


def _families_missing() -> list[str]:
    from tests.toy_family import registry

    return [f"{place}: {family}" for place in kinds.PLACES for family in kinds.families()
            if family not in registry(place)]


def test_every_family_a_kind_names_has_an_entry_in_every_floor_s_registry():
    """kinds.PLACES lists every floor's FamilyRegistry (none is made elsewhere in the package), and each holds an
    entry for every family a registered kind names."""
    import ast
    from pathlib import Path

    from tests.toy_family import registry

    assert set(kinds.families()) == {"eagle3", "block"}
    assert all(isinstance(registry(p), kinds.FamilyRegistry) for p in kinds.PLACES)
    assert _families_missing() == []
    pkg = Path(kinds.__file__).parent
    made = set()
    for path in pkg.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and ast.unparse(node.value.func).endswith("FamilyRegistry"):
                module = ".".join(path.relative_to(pkg.parent).with_suffix("").parts)
                made |= {f"{module}:{t.id}" for t in node.targets if isinstance(t, ast.Name)}
    assert made == set(kinds.PLACES)


def test_a_family_left_out_of_a_floor_is_found_and_is_one_line():
    from eagle_audit.simulate.wiring import SIMULATIONS
    from tests.toy_family import toy_family

    with toy_family() as toy:
        assert "toy" in kinds.families() and _families_missing() == []
        SIMULATIONS.unregister("toy")
        assert _families_missing() == ["eagle_audit.simulate.wiring:SIMULATIONS: toy"]
        with pytest.raises(kinds.AuditError, match=r"^draft family 'toy': the simulate floor has no simulation for it "
                                                   r"\(known: eagle3, block\)$"):
            SIMULATIONS.of(toy)
    assert _families_missing() == [] and "toy" not in kinds.families()


def test_a_new_family_runs_end_to_end(make_draft, tiny_targets, cli, tmp_path):
    """The toy family (tests/toy_family/: one folder, one entry per registry) the whole way, no family compared
    anywhere else: read (its reading asked), accept-rate (its network and simulation run, tree refused in its own
    words), fingerprint (its scorer runs), and both results reported."""
    from eagle_audit.conventions.registry import probes_dir
    from eagle_audit.draft.read import read_draft
    from tests.toy_family import CALLS, toy_family

    engine = json.loads((probes_dir() / "sglang.json").read_text())
    engine["name"], engine["draft_kinds"] = "toy-engine", ["toy"]
    (tmp_path / "toy-engine.json").write_text(json.dumps(engine))
    with toy_family():
        draft = make_draft(nested_ids=[0, 2, 3], extra={"toy_config": {}})
        spec = read_draft(str(draft))
        assert spec.kind == "toy" and spec.draft_kind.family == "toy" and CALLS == ["read"]
        base = ("-t", tiny_targets["llama"].path, "-d", draft, "--engine", tmp_path / "toy-engine.json",
                "--max-prompts", "2", "--max-new-tokens", "8")
        r = cli(*base, "--topk", "2", "--num-draft-tokens", "3", command="accept-rate")
        assert r.exit_code == 2 and "a Toy draft is simulated as a chain only" in r.stderr, r.output
        CALLS.clear()
        r = cli(*base, "--json", tmp_path / "accept.json", command="accept-rate")
        assert r.exit_code in (0, 1), r.output
        acc = json.loads((tmp_path / "accept.json").read_text())
        assert acc["draft"]["kind"] == "toy" and acc["accept_length"]["trained"] is not None
        assert {"read", "network", "simulate"} <= set(CALLS) and "score" not in CALLS
        CALLS.clear()
        r = cli(*base, "--confirm-prompts", "2", "--json", tmp_path / "fingerprint.json", command="fingerprint")
        assert r.exit_code in (0, 1), r.output
        fp = json.loads((tmp_path / "fingerprint.json").read_text())
        assert fp["draft"]["kind"] == "toy"  # a random draft: the search may name no slot; the plumbing is the point
        assert {"read", "network", "score"} <= set(CALLS)
        assert any("toy draft: scored as an EAGLE-3 draft" in n for n in fp["provenance"]["notes"])
    for name in ("accept", "fingerprint"):
        r = cli(tmp_path / f"{name}.json", "--md", tmp_path / f"{name}.md", command="report")
        assert r.exit_code == 0, r.output
        assert "toy draft" in (tmp_path / f"{name}.md").read_text()
