"""Where an engine reads the draft's ids: the ``ids_from`` places, from the reader's source."""

from __future__ import annotations

import textwrap

from eagle_audit.probe.ids_reader import read_id_places, read_ids_from

NESTED_ONLY = '''
def resolve(config, draft):
    try:
        eagle_config = getattr(draft.hf_config, "eagle_config", None)
        config.ids = eagle_config["eagle_aux_hidden_state_layer_ids"]
    except Exception:
        config.ids = None
'''

TOP_THEN_LOOP = '''
def resolve(hf_config):
    ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not ids:
        for name in ("other_config", "eagle_config"):
            cfg = getattr(hf_config, name, None)
            if cfg:
                ids = cfg.get("layer_ids")
    return ids


def unrelated(hf_config):
    return hf_config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
'''


def test_nested_only():
    places, site = read_ids_from("reader.py", textwrap.dedent(NESTED_ONLY), "resolve")
    assert places == ("nested",) and site.line == 5


def test_top_level_then_nested_layer_ids_through_a_loop_over_names():
    places, _ = read_ids_from("reader.py", TOP_THEN_LOOP, "resolve")
    assert places == ("top_level", "nested_layer_ids")
    everywhere, _ = read_ids_from("reader.py", TOP_THEN_LOOP)  # no function named: every function
    assert everywhere == ("top_level", "nested_layer_ids", "nested")


def test_no_reader():
    assert read_ids_from("reader.py", "def f():\n    return 1\n") is None
    assert read_ids_from("reader.py", "def f(:\n") is None


EXTRA_KEYS = '''
def resolve(hf_config):
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        dflash = getattr(hf_config, "dflash_config", None)
        if dflash:
            layer_ids = [i + 1 for i in (dflash.get("target_layer_ids") or [])]
    if not layer_ids:
        spark = getattr(hf_config, "dspark_target_layer_ids", None)
        if spark:
            if getattr(hf_config, "model_type", None) == "v9":
                layer_ids = list(spark)
            else:
                layer_ids = [i + 1 for i in spark]
    return layer_ids


def taken(config, draft):
    eagle_config = getattr(draft, "eagle_config", None)
    config.ids = eagle_config["eagle_aux_hidden_state_layer_ids"]
'''


def test_how_each_place_is_read():
    reads, site = read_id_places("reader.py", EXTRA_KEYS, "resolve")
    assert reads == ({"place": "top_level", "shift": 0, "empty": "absent"},
                     {"place": "dflash_target_layer_ids", "shift": 1, "empty": "absent"},
                     {"place": "dspark_target_layer_ids", "shift": 1, "empty": "absent", "verbatim_model_types": ["v9"]})
    assert site.line == 3
    (taken,), _ = read_id_places("reader.py", EXTRA_KEYS, "taken")
    assert taken == {"place": "nested", "shift": 0, "empty": "read"}  # an empty list is handed on as it is
