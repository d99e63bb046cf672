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


def test_a_file_eagle_audit_did_not_write_is_never_replaced(tmp_path):
    """issue 42 item 7: --json FILE and report --md FILE overwrote a file the tool did not write."""
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"my": "notes"}\n')
    with pytest.raises(OutputRefused, match="eagle-audit did not write it"):
        outputs.check_output(foreign, [], "--json")
    md = tmp_path / "notes.md"
    md.write_text("# my notes\n")
    with pytest.raises(OutputRefused, match="never overwritten"):
        outputs.check_output(md, [], "--md")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    ours = {"result.json": '{\n  "schema": "eagle-audit/layers/1",\n  "verdict": "match"\n}\n',
            "report.md": "### eagle-audit\n\n<sub>eagle-audit 0.1.0</sub>\n",
            "report.html": '<!doctype html><html><head><meta name="generator" content="eagle-audit 0.1.0"></head></html>'}
    for name, text in ours.items():
        (tmp_path / name).write_text(text)
        assert outputs.check_output(tmp_path / name, [], "--out") == outputs.real(tmp_path / name)
    assert outputs.check_output(empty, [], "--json") == outputs.real(empty)


def test_the_cli_refuses_a_foreign_file_and_replaces_its_own(tmp_path, tiny_targets, make_draft, cli, digest):
    foreign = tmp_path / "out.json"
    foreign.write_text("keep me\n")
    t, d = tiny_targets["llama"], make_draft(nested_ids=[1, 3, 4])
    res = cli("-t", t, "-d", d, "--static", "--json", foreign)
    assert res.exit_code == 2 and "eagle-audit did not write it" in res.stderr and foreign.read_text() == "keep me\n"
    mine = tmp_path / "mine.json"
    for _ in range(2):  # written, then replaced: it is eagle-audit's
        assert cli("-t", t, "-d", d, "--static", "--json", mine).exit_code == 0
    md = tmp_path / "comment.md"
    md.write_text("my PR text\n")
    res = cli(mine, "--md", md, command="report")
    assert res.exit_code == 2 and md.read_text() == "my PR text\n"
    md.unlink()
    for _ in range(2):
        assert cli(mine, "--md", md, command="report").exit_code == 0
