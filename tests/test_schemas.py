"""The `--json` schema compatibility promise (docs/ci.md): the schema ids and each document's top-level keys
are pinned here, so removing or renaming a key (or changing an id) cannot land without this file, the
version bump and the docs. Adding a key means adding it here (no bump)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCHEMAS = {
    "layers": "eagle-audit/layers/1",
    "accept-rate": "eagle-audit/accept-rate/1",
    "fingerprint": "eagle-audit/fingerprint/2",  # 2: inferred.states guarded per slot (issue 18)
    "check": "eagle-audit/check/1",
    "report": "eagle-audit/report/1",
}

LAYERS_KEYS = {"schema", "verdict", "target", "draft", "trained", "served", "slots", "findings", "fix", "heatmap",
               "provenance", "suggestions", "served_states", "engines"}  # served_states: layers --server (issue 16); engines: issue 41
CHECK_KEYS = {"schema", "verdict", "stages", "source", "gate", "provenance"}
CHECK_VERDICT_KEYS = {"status", "summary", "problems", "sure", "evidence", "grade", "grade_why", "cost", "fix",
                      "fix_from", "gate"}
CHECK_STAGE_KEYS = {"name", "ran", "why", "evidence", "verdict", "seconds", "result"}
ACCEPT_KEYS = {"schema", "verdict", "target", "draft", "wirings", "accept_length", "request_accept_length",
               "per_position", "histogram", "verify_steps", "attribution", "tolerance", "failures", "draft_flags",
               "settings", "live", "server", "arbiter", "provenance"}


def test_schema_ids_are_stable():
    from eagle_audit.accept.run import ACCEPT_SCHEMA
    from eagle_audit.check.result import CHECK_SCHEMA
    from eagle_audit.fingerprint.result import FINGERPRINT_SCHEMA
    from eagle_audit.report import results as inputs
    from eagle_audit.layers.result import LAYERS_SCHEMA

    assert {"layers": LAYERS_SCHEMA, "accept-rate": ACCEPT_SCHEMA, "fingerprint": FINGERPRINT_SCHEMA,
            "check": CHECK_SCHEMA, "report": inputs.REPORT_SCHEMA} == SCHEMAS
    assert (inputs.ACCEPT_SCHEMA, inputs.FINGERPRINT_SCHEMA, inputs.CHECK_SCHEMA) == (
        ACCEPT_SCHEMA, FINGERPRINT_SCHEMA, CHECK_SCHEMA)  # the report reads what the commands write
    doc = (ROOT / "docs" / "ci.md").read_text()
    for schema in SCHEMAS.values():
        assert f"`{schema}`" in doc, schema


def test_layers_and_check_documents_keep_their_keys(tiny_targets, make_draft, config_only_target):
    from eagle_audit.layers.run import LayersOptions, run_layers
    from eagle_audit.check.run import CheckOptions, run_check

    draft = make_draft(nested_ids=[1, 3, 5])
    layers = run_layers(LayersOptions(target=str(tiny_targets["llama"]), draft=str(draft), static=True,
                                      use_installed_engine=False)).to_json()
    assert set(layers) == LAYERS_KEYS and layers["schema"] == SCHEMAS["layers"]
    check = run_check(CheckOptions(target=str(config_only_target(num_layers=8)), draft=str(draft),
                                   use_installed_engine=False)).to_json()
    assert set(check) == CHECK_KEYS and check["schema"] == SCHEMAS["check"]
    assert set(check["verdict"]) == CHECK_VERDICT_KEYS
    assert [set(s) for s in check["stages"]] == [CHECK_STAGE_KEYS] * 5
    assert set(check["stages"][0]["result"]) == LAYERS_KEYS
    json.dumps(check)  # plain JSON


@pytest.mark.usefixtures("one_thread")
def test_accept_rate_document_keeps_its_keys(tiny_targets, make_draft):
    from eagle_audit.accept.run import AcceptOptions, run_accept

    r = run_accept(AcceptOptions(target=str(tiny_targets["llama"]), draft=str(make_draft(nested_ids=[1, 3, 5])),
                                 use_installed_engine=False, max_prompts=1, max_tokens=12, max_new_tokens=4))
    data = r.to_json()
    assert set(data) == ACCEPT_KEYS and data["schema"] == SCHEMAS["accept-rate"]
