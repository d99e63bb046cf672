"""The fixed copy travels (issue 42 item 7): its weights are links by a relative path (a tar or an ``rsync -a`` of the
folder holding the draft and the copy keeps them valid) or, by choice, copies (the copy travels alone); the marker
names the draft relatively too. eagle_audit/layers/fixed_copy.py, and `layers --fixed-weights`."""

from __future__ import annotations

import json
import os
import shutil
import tarfile

import pytest

from eagle_audit.layers.fixed_copy import populate


def _draft(make_draft, tmp_path):
    # SGLang reads nested ids only: top-level ids [1, 3, 4] under SGLang is IDS_NOT_READ, fixed by nesting them
    d = make_draft(top_level_ids=[1, 3, 4], name="d")
    dest = tmp_path / "drafts"
    dest.mkdir()
    return shutil.move(str(d), dest / "d")


def test_links_are_relative_and_survive_a_tar(tmp_path, make_draft, tiny_targets, cli):
    work = tmp_path / "work"
    work.mkdir()
    draft = _draft(make_draft, work)
    fixed = work / "out" / "fixed"
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--trainer", "speculators", "--static", "--engine", "sglang",
              "--write-fixed-config", fixed)
    assert res.exit_code == 1, res.output
    link = fixed / "model.safetensors"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert os.readlink(link) == os.path.join("..", "..", "drafts", "d", "model.safetensors")
    marker = json.loads((fixed / ".eagle-audit-output").read_text())
    assert marker["draft"] == os.path.join("..", "drafts", "d") and marker["weights"] == "link"
    with tarfile.open(tmp_path / "both.tar", "w") as tar:  # what goes to the serving host
        tar.add(work, arcname="work")
    shutil.rmtree(work)
    with tarfile.open(tmp_path / "both.tar") as tar:
        tar.extractall(tmp_path / "host", filter="tar")
    moved = tmp_path / "host" / "work" / "out" / "fixed"
    assert (moved / "model.safetensors").is_file()  # the link resolves on the other side
    again = cli("-t", tiny_targets["llama"], "-d", moved, "--trainer", "speculators", "--static", "--engine", "sglang")
    assert again.exit_code == 0, again.output


def test_copies_by_choice(tmp_path, make_draft, tiny_targets, cli):
    draft = _draft(make_draft, tmp_path)
    fixed = tmp_path / "fixed"
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--trainer", "speculators", "--static", "--engine", "sglang",
              "--write-fixed-config", fixed, "--fixed-weights", "copy")
    assert res.exit_code == 1 and "weights copied from" in " ".join(res.stderr.split())
    assert not (fixed / "model.safetensors").is_symlink()
    assert (fixed / "model.safetensors").read_bytes() == (draft / "model.safetensors").read_bytes()
    shutil.rmtree(draft)  # the copy travels alone
    assert cli("-t", tiny_targets["llama"], "-d", fixed, "--trainer", "speculators", "--static",
               "--engine", "sglang").exit_code == 0


def test_a_bad_or_unused_choice_is_one_line(tmp_path, make_draft, tiny_targets, cli):
    draft = _draft(make_draft, tmp_path)
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--static", "--write-fixed-config", tmp_path / "f",
              "--fixed-weights", "hard")
    assert res.exit_code == 2 and "--fixed-weights 'hard': one of link, copy" in res.stderr
    res = cli("-t", tiny_targets["llama"], "-d", draft, "--static", "--fixed-weights", "copy")
    assert res.exit_code == 2 and "--fixed-weights does nothing here" in res.stderr


def test_populate_refuses_an_unknown_mode(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "dest").mkdir()
    with pytest.raises(ValueError, match="weights must be one of"):
        populate(tmp_path / "src", tmp_path / "dest", {}, "hardlink")
