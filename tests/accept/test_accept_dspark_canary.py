"""accept-rate on a trained DSpark draft: the SmolLM2 DSpark canary (tests/accept/dspark_canary.py, SpecForge 0.2.0's
own DSpark training; block 4, so 4 drafts a verify), on its training prompts 9-12, 48 new tokens
(bench/evidence/dspark_accept.py measures the same, held-out prompts too; docs/accept-rate.md, "DSpark").

Fed its trained wiring it accepts far more than fed states 3-8 layers away; drafted from the DFlash rows
(``sample_from_anchor`` false, what SpecForge's own ``spec_generate`` drafts) instead of the anchor's row first, the
rows its objective trains and both engines draft by default, it accepts almost nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eagle_audit.accept.run import AcceptOptions, run_accept
from eagle_audit.prompts import encode, load_prompts
from eagle_audit.states import State

from tests.accept.dspark_canary import fill_in_copy, train_dspark_canary

pytestmark = pytest.mark.full


def test_the_dspark_canary_accepts_from_the_anchor_rows_and_its_trained_wiring(smol_target, tmp_path):
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    canary = train_dspark_canary(smol_target, cache, log=lambda m: None)
    ids = tuple(map(tuple, encode(load_prompts(None)[8:12], smol_target.tokenizer)))
    base = dict(target=str(smol_target.info.name), prompt_ids=ids, max_new_tokens=48, use_installed_engine=False)
    right = run_accept(AcceptOptions(**base, draft=str(canary)), source=smol_target)
    assert right.settings.num_steps == 4 and [s.label() for s in right.trained.states] == ["B2", "B15", "B27"]
    wrong = run_accept(AcceptOptions(**base, draft=str(canary), trained_boundaries=(State(5), State(20), State(24))),
                       source=smol_target)
    fill_in = run_accept(AcceptOptions(**base, draft=str(fill_in_copy(canary, tmp_path / "fill-in"))),
                         source=smol_target)
    al = {k: r.stats["trained"].accept_length for k, r in (("right", right), ("wrong", wrong), ("fill_in", fill_in))}
    assert al["right"] > 3.5 and al["wrong"] < 2.2 and al["fill_in"] < 1.3, al  # measured: 3.93, 1.71, 1.07
    assert min(right.stats["trained"].per_position) > 0.5  # every position drafts, the last one too
