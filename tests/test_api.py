"""The Python API (eagle_audit.api, exported lazily by the package): typed inputs, the same result objects
the CLI writes as JSON, errors that name parameters and never flags, and README's Python example."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import eagle_audit
from eagle_audit import State, audit_layers, capture, load_target
from eagle_audit.errors import AuditError
from eagle_audit.layers.result import LayersResult

ROOT = Path(__file__).resolve().parent.parent
FAST = dict(max_prompts=2, max_tokens=32, use_installed_engine=False)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_audit_layers_returns_what_the_cli_writes(tiny_targets, make_draft, cli):
    target, draft = tiny_targets["llama"].path, make_draft()
    result = audit_layers(target, draft, trained_boundaries=[0, State(3), 6], **FAST)
    assert isinstance(result, LayersResult) and result.verdict == "mismatch"
    assert [s.label() for s in result.trained.states] == ["B0", "B3", "B6"]
    res = cli("-t", target, "-d", draft, "--trained-boundaries", "0,3,6", "--max-prompts", 2, "--max-tokens", 32,
              "--builtin-rules", "--json", "-")
    assert res.exit_code == 1, res.output
    written = json.loads(res.stdout)
    from types import SimpleNamespace

    import typer.main

    from eagle_audit.cli.flags import flagged
    from eagle_audit.cli.main import app

    layers_command = SimpleNamespace(command=typer.main.get_command(app).commands["layers"])
    mine = json.loads(json.dumps(result.to_json(), default=str))
    assert mine != flagged(mine, layers_command)  # the library names parameters; the CLI's JSON shows its flags
    mine = flagged(mine, layers_command)
    assert mine["provenance"].pop("command") is None  # a library call has no command line
    written["provenance"].pop("command")
    assert mine == written


def test_static_audit_with_paths_and_ids(tiny_targets, make_draft):
    result = audit_layers(Path(tiny_targets["deepseek_v3"].path), make_draft(nested_ids=[1, 29, 57]),
                          trainer="specforge", trained_ids=[1, 29, 57], static=True, use_installed_engine=False)
    assert result.verdict == "match" and result.heatmap is None
    assert [s.cosine for s in result.slots] == [None] * 3


@pytest.mark.parametrize("kwargs, name", [
    (dict(trained_boundaries="0,3,6"), "trained_boundaries"),
    (dict(trained_ids="1,2,3"), "trained_ids"),
    (dict(trained_ids=[1.0, 2, 3]), "trained_ids"),
    (dict(prompts=["a prompt"]), "prompts"),
])
def test_cli_strings_and_wrong_types_are_refused(tiny_targets, make_draft, kwargs, name):
    from eagle_audit.errors import BadArgument

    with pytest.raises(BadArgument, match=f"^`{name}`: expected") as info:  # the package's own error, a TypeError too
        audit_layers(tiny_targets["llama"].path, make_draft(), static=True, **kwargs)
    assert isinstance(info.value, TypeError) and isinstance(info.value, AuditError)


@pytest.mark.parametrize("call, message", [
    (lambda t, d: eagle_audit.fingerprint(t, 5), "`draft`: expected a str or os.PathLike, got int"),
    (lambda t, d: eagle_audit.fingerprint(t, d, max_prompts=0), "`max_prompts`: must be an integer >= 1, got 0"),
    (lambda t, d: eagle_audit.fingerprint(t, d, ttt_steps=9), "`ttt_steps`: must be an integer in 1..8, got 9"),
    (lambda t, d: audit_layers(t, d, static=True, max_tokens="x"), "`max_tokens`: expected an int, got str"),
    (lambda t, d: audit_layers(t, d, engine=5, static=True), "`engine`: expected a str or os.PathLike, got int"),
    (lambda t, d: audit_layers(t, d, max_prompts=0, static=True), "`max_prompts`: must be an integer >= 1, got 0"),
    (lambda t, d: eagle_audit.accept_rate(t, d, max_prompts=0), "`max_prompts`: must be an integer >= 1, got 0"),
    (lambda t, d: eagle_audit.check(t, d, static=True, max_tokens=-1), "`max_tokens`: must be an integer >= 1, got -1"),
    (lambda t, d: capture(t, 123), "`inputs`: expected a text or a sequence of token ids, got int"),
])
def test_bad_arguments_raise_the_packages_error_with_the_cli_message(tiny_targets, make_draft, call, message):
    """Issue 28.6: ``fingerprint(None, None)`` raised a raw TypeError from pathlib; every public function takes what
    its docs say and refuses the rest with an AuditError whose message the CLI would print (``max_prompts`` shown
    as ``--max-prompts`` there), before any work."""
    with pytest.raises(AuditError) as info:
        call(tiny_targets["llama"].path, make_draft())
    assert str(info.value) == message


def test_fingerprint_none_means_the_demo(audit_cache):
    """docs/python-api.md: None means the demo, for fingerprint too (it raised TypeError from pathlib)."""
    from eagle_audit.demo import demo_draft
    from eagle_audit.target import default_target

    result = eagle_audit.fingerprint(None, None, max_prompts=2, max_new_tokens=8, more_prompts=0)
    assert result.target["name"] == default_target() and result.draft["path"] == demo_draft()
    assert len(result.slots) == 3


def test_library_errors_name_parameters_not_flags(tiny_targets, make_draft):
    target, draft = tiny_targets["llama"].path, make_draft()
    errors = []
    for call in (lambda: audit_layers(target, draft, trained_boundaries=[0, 3, 99], static=True),
                 lambda: audit_layers(target, draft, trained_boundaries=[State(3, normed=True)], static=True),
                 lambda: audit_layers(target, draft, dtype="int8", **FAST),
                 lambda: audit_layers(target, draft, device="tpu", **FAST),
                 lambda: eagle_audit.accept_rate(target, draft, num_steps=0),
                 lambda: eagle_audit.accept_rate(target, draft, topk=4),
                 lambda: eagle_audit.accept_rate(target, draft, topk=2, num_draft_tokens=9, live=True)):
        with pytest.raises(AuditError) as info:
            call()
        errors.append(str(info.value))
    assert errors[0] == "`trained_boundaries`: boundary 99 is outside 0..8"
    assert errors[4].startswith("`num_steps`: must be an integer in 1..")
    assert errors[5].startswith("`topk=4`: tree drafts need `num_draft_tokens`")
    flags = [e for e in errors if re.search(r"(?<![\w-])--(?!speculative)", e)]
    assert flags == [], "library errors name CLI flags"


def test_the_cli_writes_the_parameter_as_its_flag(tiny_targets, make_draft, cli):
    res = cli("-t", tiny_targets["llama"].path, "-d", make_draft(), "--trained-boundaries", "0,3,99", "--static",
              "--builtin-rules")
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[0] == "error: --trained-boundaries: boundary 99 is outside 0..8"


def test_capture_text_or_ids_with_states_or_ints(tiny_targets):
    path = tiny_targets["llama"].path
    loaded = load_target(path)
    states = capture(loaded, "hello world", [0, State(3), State(8, normed=True)])
    assert list(states) == [State(0), State(3), State(8, normed=True)]
    ids = loaded.tokenizer("hello world", add_special_tokens=False)["input_ids"]
    assert all(t.shape == (len(ids), 32) for t in states.values())
    with torch.inference_mode():
        ref = loaded.model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    assert torch.allclose(states[State(0)], ref[0][0]) and torch.allclose(states[State(3)], ref[3][0])
    assert torch.allclose(states[State(8, normed=True)], ref[8][0])  # HF's last entry is post-norm
    again = capture(str(path), ids)  # a path, token ids, every state
    assert len(again) == 8 + 2 and torch.allclose(again[State(3)], states[State(3)])


def test_accept_does_not_import_the_layers_orchestrator():
    """accept/ and layers share eagle_audit.inputs; the dependency runs one way (nothing under accept/ imports
    eagle_audit.layers.run)."""
    offenders = []
    for path in sorted((ROOT / "eagle_audit" / "accept").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "audit" and node.level:
                offenders.append(path.name)
            if isinstance(node, ast.Import) and any(a.name == "eagle_audit.layers.run" for a in node.names):
                offenders.append(path.name)
    assert offenders == []


def test_import_is_light_and_exports_are_lazy():
    code = "import sys, eagle_audit; print('torch' in sys.modules, eagle_audit.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", eagle_audit.__version__]
    assert set(eagle_audit.__all__) >= {"audit_layers", "accept_rate", "capture", "fingerprint", "State"}
    with pytest.raises(AttributeError):
        eagle_audit.no_such_name  # noqa: B018


def test_fingerprint_is_exported_where_it_exists():
    """Where the fingerprint command is installed (eagle_audit/fingerprint/), the package exports its Python
    entry point; elsewhere the name fails with a plain AttributeError."""
    if not (ROOT / "eagle_audit" / "fingerprint").is_dir():
        with pytest.raises(AttributeError, match="not available"):
            eagle_audit.fingerprint  # noqa: B018
        return
    fn = eagle_audit.fingerprint
    # the module of that name, callable as the API function (eagle_audit.ApiModule): both uses work
    assert callable(fn) and fn.__name__ == "eagle_audit.fingerprint" and fn.__wrapped__.__name__ == "fingerprint"


def readme_python() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(blocks) == 1, "README.md has one Python example"
    return blocks[0]


def test_readme_python_example_runs(audit_cache, capsys):
    exec(compile(readme_python(), "README.md (Python example)", "exec"), {})
    out = capsys.readouterr().out
    assert "mismatch" in out and "LAYER_OFFSET" in out and "eagle_config" in out


def test_api_names_survive_importing_submodules_of_the_same_name():
    code = ("import eagle_audit.capture, eagle_audit.layers.run\n"
            "import eagle_audit.check.run as m\n"
            "import eagle_audit.fingerprint.run as f\n"
            "from eagle_audit import capture, check\n"
            "from eagle_audit.capture import capture_states\n"
            "import eagle_audit, inspect\n"
            "print(callable(capture), callable(check), eagle_audit.capture is capture, capture_states.__name__,\n"
            "      m.run_check.__name__, f.run_fingerprint.__name__, list(inspect.signature(check).parameters)[:2])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True", "capture_states", "run_check", "run_fingerprint",
                                  "['target',", "'draft']"]


def _public():
    """Every public function of the package (``eagle_audit.__all__``), with its signature."""
    import inspect

    for name in eagle_audit.__all__:
        obj = getattr(eagle_audit, name)
        if name in ("__version__", "AuditError", "State"):
            continue
        yield name, obj, inspect.signature(obj)


def _wrong_values(annotation: str, default):
    """Values of the wrong type for a parameter annotated ``annotation``: a string where a boolean belongs, None
    where None is not allowed, a number where a path, text or callable belongs, an object where anything does."""
    parts = {p.strip() for p in annotation.split("|")}
    out = [object()]
    if "None" not in parts and default is not None:
        out.append(None)
    if "bool" in parts:
        out += ["yes", 1]
    if parts & {"int", "float"}:
        out += ["3", True]
    if parts & {"str", "PathLike"}:
        out += [5, b"x"]
    if "Progress" in parts:
        out += [5, "print"]
    return out


def test_every_public_signature_refuses_wrong_types_before_any_work():
    """Issue 35: a walk over every public signature: each parameter given values of the wrong type raises the
    package's own error, one line naming the parameter (and a TypeError), before a model is loaded. The demo's
    inputs stand for the others (target=None, draft=None); ``capture`` is given a path it never loads."""
    from eagle_audit.errors import BadArgument

    walked = 0
    for name, fn, sig in _public():
        for pname, p in sig.parameters.items():
            if pname in ("target", "draft") and name != "capture":
                continue  # None is the demo: a value the checks never reach here would load it
            for value in _wrong_values(str(p.annotation), p.default):
                args = {"inputs": [1, 2]} if name == "capture" and pname != "inputs" else {}
                if name == "capture" and pname != "target":
                    args["target"] = "/nonexistent/never-loaded"
                args[pname] = value
                with pytest.raises(BadArgument) as info:
                    fn(**args)
                msg = str(info.value)
                assert msg.startswith(f"`{pname}`") or msg.startswith(f"{name}():"), (name, pname, value, msg)
                assert "\n" not in msg
                walked += 1
    assert walked > 150


@pytest.mark.parametrize("call, message", [
    (lambda: eagle_audit.fingerprint(max_prompts=None), "`max_prompts`: expected an int, got NoneType"),
    (lambda: audit_layers(progress=5), "`progress`: expected a callable progress(done, total), got int"),
    (lambda: audit_layers(static="yes"), "`static`: expected True or False, got str"),
    (lambda: eagle_audit.accept_rate(num_steps=0), "`num_steps`: must be an integer in 1..32, got 0"),
    (lambda: eagle_audit.accept_rate(tolerance=-0.5), "`tolerance`: must be a number >= 0, got -0.5"),
    (lambda: eagle_audit.check(fail_under=float("nan")), "`fail_under`: must be a number >= 0, got nan"),
    (lambda: audit_layers(None, None, None), "audit_layers(): too many positional arguments"),
])
def test_the_issue_s_raw_errors_are_the_package_s(call, message):
    """Each raised a raw TypeError (or was taken as True) before: now one line naming the parameter."""
    with pytest.raises(AuditError) as info:
        call()
    assert str(info.value) == message


def test_capture_refuses_token_ids_outside_the_vocabulary(tiny_targets):
    """``capture(None, [1, 2, 99999999], [0])`` raised IndexError "index out of range in self" from the embedding."""
    from eagle_audit.errors import OutOfRange

    loaded = load_target(tiny_targets["llama"].path)
    v = loaded.info.vocab_size
    with pytest.raises(OutOfRange, match=rf"^`inputs`: token id {v} is outside the target's vocabulary \(0..{v - 1}\)$"):
        capture(loaded, [1, 2, v], [0])
    with pytest.raises(OutOfRange, match="token id -1"):
        capture(loaded, [-1], [0])
    assert capture(loaded, [1, v - 1], [0])[State(0)].shape[0] == 2
