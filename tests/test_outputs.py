"""eagle_audit.outputs: an output is never an input (symlinks resolved), is writable, and is written
atomically; a canary directory is replaced only when eagle-audit wrote it."""

import os

import pytest

from eagle_audit import outputs
from eagle_audit.errors import OutputRefused


@pytest.fixture
def draft(tmp_path):
    d = tmp_path / "draft"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"weights")
    return d


def test_output_that_is_an_input_or_inside_one_is_refused(draft, tmp_path):
    with pytest.raises(OutputRefused, match="is the input draft"):
        outputs.check_output(draft, {"draft": draft}, "--report", kind="dir")
    with pytest.raises(OutputRefused, match="is the input draft"):
        outputs.check_output(draft / "config.json", {"draft": draft / "config.json"}, "--json")
    with pytest.raises(OutputRefused, match="lies inside the input draft"):
        outputs.check_output(draft / "config.json", {"draft": draft}, "--json")
    with pytest.raises(OutputRefused, match="lies inside"):
        outputs.check_output(draft / "fixed" / "deeper", [draft], "--write-fixed-config", kind="new_dir")
    assert outputs.check_output(tmp_path / "result.json", {"draft": draft}, "--json") == outputs.real(
        tmp_path / "result.json")


def test_symlinks_are_resolved_before_comparing(draft, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(draft)
    with pytest.raises(OutputRefused, match="lies inside"):
        outputs.check_output(link / "config.json", {"draft": draft}, "--json")
    with pytest.raises(OutputRefused, match="is the input"):
        outputs.check_output(draft, {"draft": link}, "--out", kind="dir")


def test_unwritable_or_wrong_kind_outputs_are_refused(draft, tmp_path):
    with pytest.raises(OutputRefused, match="is a directory"):
        outputs.check_output(tmp_path, [], "--json")
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputRefused, match="is a file, not a directory"):
        outputs.check_output(tmp_path / "f", [], "--report", kind="dir")
    with pytest.raises(OutputRefused, match="is a file, not a directory"):
        outputs.check_output(tmp_path / "f" / "sub" / "x.json", [], "--json")
    with pytest.raises(OutputRefused, match="holds files eagle-audit did not write"):
        outputs.check_output(draft.parent, [], "--write-fixed-config", kind="new_dir")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OutputRefused, match="loop"):
        outputs.check_output(loop, [], "--json")
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(OutputRefused, match="not writable"):
            outputs.check_output(ro / "x.json", [], "--json")


def test_canary_out_rules(draft, tmp_path):
    assert outputs.check_canary_out(tmp_path / "new", [])
    (tmp_path / "empty").mkdir()
    assert outputs.check_canary_out(tmp_path / "empty", [])
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(OutputRefused, match="not empty") as info:
        outputs.check_canary_out(busy, [], "--out", force_label="--force")
    assert "--force" in info.value.hint
    assert outputs.check_canary_out(busy, [], force=True)
    with pytest.raises(OutputRefused, match="checkpoint"):  # someone's model: never, even forced
        outputs.check_canary_out(draft, [], force=True)
    gguf_dir = tmp_path / "gguf"
    gguf_dir.mkdir()
    (gguf_dir / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(OutputRefused, match="checkpoint"):
        outputs.check_canary_out(gguf_dir, [], force=True)
    with pytest.raises(OutputRefused, match="is the input target"):
        outputs.check_canary_out(busy, {"target": busy}, force=True)
    outputs.mark_canary(draft, {"written_by": "test"})  # a canary eagle-audit wrote may be replaced
    assert outputs.check_canary_out(draft, [])


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "out.json"
    p.write_text("old")
    p.chmod(0o640)
    outputs.write_text(p, "new")
    assert p.read_text() == "new" and (p.stat().st_mode & 0o777) == 0o640
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json"]


def test_new_directory_appears_whole_or_not_at_all(tmp_path):
    with outputs.new_directory(tmp_path / "d") as tmp:
        (tmp / "a").write_text("1")
        assert not (tmp_path / "d").exists()
    assert (tmp_path / "d" / "a").read_text() == "1"
    with pytest.raises(RuntimeError):
        with outputs.new_directory(tmp_path / "e") as tmp:
            (tmp / "a").write_text("1")
            raise RuntimeError("killed half-way")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d"]


def test_an_output_in_a_folder_nothing_can_be_created_in_is_refused(tmp_path):
    """root passes os.access() in /proc; only a real attempt tells (issue 28.5). A missing folder that can be
    made is fine: it is made when the output is written."""
    import os

    if os.path.isdir("/proc"):
        with pytest.raises(OutputRefused, match="nothing can be written in /proc"):
            outputs.check_output("/proc/nope/result.json", [], "--json")
    outputs.check_output(tmp_path / "new" / "sub" / "r.json", [], "--json")
    outputs.write_text(tmp_path / "new" / "sub" / "r.json", "{}")
    assert (tmp_path / "new" / "sub" / "r.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["new"]  # the probe file is gone
