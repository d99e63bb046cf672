"""Block drafting simulated as the engines run it (eagle_audit/simulate/block.py).

DFlash: one block ``[bonus, mask x (B-1)]`` a round over the committed context, the leading run of drafts equal to
the target's greedy tokens accepted, the target's next token the new bonus. DSpark: gamma = B drafts a round, the
block's rows drafted left to right through the Markov head (the anchor's row first with ``sample_from_anchor``), the
same verify.

The simulation reads every anchor's block from one masked forward over the whole case (and, for DSpark, picks every
anchor's drafts together, step by step); the reference here (tests/accept/block_tiny.py) runs the rounds one at a
time as an engine does, each block over only the context committed before its bonus, on a continuation built so that
each round accepts a known number of drafts."""

from __future__ import annotations

import pytest

from eagle_audit.simulate.block import block_steps, layout_note, simulate_block

from tests.accept.block_tiny import BLOCK, STATES, built_case, drafts_per_round, tiny_draft

pytestmark = pytest.mark.usefixtures("one_thread")

DRAFTS = {"dflash": {}, "dflash-causal": {"causal": True},
          "dspark-vanilla": {"markov": "vanilla"}, "dspark-gated": {"markov": "gated"}, "dspark-rnn": {"markov": "rnn"},
          "dspark-rnn-causal": {"markov": "rnn", "causal": True},
          "dspark-fill-in": {"markov": "gated", "sample_from_anchor": False}, "dspark-no-head": {"dspark": True}}


@pytest.mark.parametrize("name", list(DRAFTS))
def test_each_round_accepts_what_the_engine_accepts(name):
    draft = tiny_draft(**DRAFTS[name])
    case, caps, ks = built_case(draft)
    st = simulate_block(draft, [case], [caps], STATES)
    n = drafts_per_round(draft)
    assert block_steps(draft) == n and st.verify_steps == len(ks) and len(st.histogram) == n + 1
    assert list(st.gains[0]) == [k + 1 for k in ks]
    assert sum(st.gains[0]) == len(case.continuation) - 1  # every generated token after the prefill's
    assert st.accept_length == pytest.approx(sum(k + 1 for k in ks) / len(ks))
    assert st.per_position[0] == pytest.approx(sum(k > 0 for k in ks) / len(ks))
    assert any(k > 0 for k in ks) and any(k == 0 for k in ks) and n in ks  # a full block accepted too


def test_another_wiring_reads_other_states():
    """The same case fed the slots swapped: the drafts change, so the known acceptance is lost."""
    for kw in ({}, {"markov": "rnn"}):
        draft = tiny_draft(**kw)
        case, caps, ks = built_case(draft)
        swapped = simulate_block(draft, [case], [caps], STATES[::-1])
        assert list(swapped.gains[0]) != [k + 1 for k in ks]
        assert swapped.accept_length < sum(k + 1 for k in ks) / len(ks)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_the_markov_head_drafts_every_position(kind):
    """The case built on a DSpark draft's rounds is not the one its backbone alone drafts (no Markov bias), nor the
    one with the bias of the first drafted token only: the later positions' bias, from the draft's own previous
    draft, is simulated."""
    draft = tiny_draft(markov=kind)
    case, caps, ks = built_case(draft, total=80)
    full = simulate_block(draft, [case], [caps], STATES).gains[0]
    head, draft.markov_head = draft.markov_head, None  # the backbone's argmax: DSpark without the head
    bare = simulate_block(draft, [case], [caps], STATES).gains[0]
    draft.markov_head = head
    assert list(full) == [k + 1 for k in ks] and list(bare) != list(full)


def test_sample_from_anchor_reads_other_rows():
    """The same weights drafting from rows 1..gamma (sample_from_anchor false) draft otherwise."""
    anchor = tiny_draft(markov="vanilla")
    case, caps, ks = built_case(anchor)
    fill_in = tiny_draft(markov="vanilla", sample_from_anchor=False)
    assert list(simulate_block(fill_in, [case], [caps], STATES).gains[0]) != [k + 1 for k in ks]


def test_layout_notes():
    assert layout_note(tiny_draft()).startswith(f"DFlash block drafting: {BLOCK}-token blocks [bonus, {BLOCK - 1} masks]")
    note = layout_note(tiny_draft(markov="rnn"))
    assert f"{BLOCK}-token blocks [bonus, {BLOCK - 1} masks], every row drafting" in note and "rnn Markov head" in note
    assert f"{BLOCK} drafts a verify" in note
    assert f"{BLOCK + 1}-token blocks" in layout_note(tiny_draft(markov="gated", sample_from_anchor=False))
