"""The vLLM reader against a test server that saves states with vLLM 0.33.0's own connector code
(tests/served/vllm_server.py), and the vLLM launch lines against the wheel's config code.

The launch line's JSON is what vLLM's ``--speculative-config`` / ``--kv-transfer-config`` parse with
``json.loads`` (``engine/arg_utils.py:1864-1881``); the test then runs, from the wheel:
``KVTransferConfig.__post_init__`` (``config/kv_transfer.py:110-124``, with the wheel's ``KVRole``),
``ExtractHiddenStatesConfig.__init__`` (``transformers_utils/configs/extract_hidden_states.py``: how the
``draft_model_config.hf_config`` dict becomes the draft config, ``config/speculative.py:1347-1367``), the V2
runner's ids reader ``get_eagle3_aux_layers_from_config`` on it and the architecture's capture
(tests/engine_wheels/vllm_engine.py). Not run, cited: the worker's checks ``num_speculative_tokens == 1``,
``draft_sample_method == "greedy"`` (the default, ``config/speculative.py:634``), no padded-drafter-disable,
ids present (``v1/worker/gpu/spec_decode/extract_hidden_states.py:21-49``): ``ExtractHiddenStatesSpeculator``
subclasses the GPU draft runner; the line's values are asserted against them instead.
"""

from __future__ import annotations

import ast
import json
import typing

import numpy as np
import pytest

from tests.served.served_tiny import HIDDEN, N_LAYERS, prompts
from eagle_audit.engines.http import BadServerReply
from eagle_audit.engines.options import ServerOptions
from eagle_audit.engines.states import BadStates
from eagle_audit.served.compare import compare_slots
from eagle_audit.engines.vllm.states import read_vllm_states
from eagle_audit.engines.vllm.launch import vllm_reference, vllm_serving
from eagle_audit.served.compare import local_boundaries
from eagle_audit.engines.launch import TargetShape
from eagle_audit.engines.vllm.states import locate
from tests.engine_wheels.vllm_engine import ARCHS, EngineRun
from tests.served.vllm_server import FakeVLLM, VFaults, serving
from tests.wheels import WheelSource

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vllm_run(vllm_wheel):
    return EngineRun(vllm_wheel)


def _kv_check(src: WheelSource, kv: dict) -> None:
    tree = src.tree("vllm/config/kv_transfer.py")
    ns: dict = {"Literal": typing.Literal}
    for node in tree.body:  # KVProducer / KVConsumer / KVRole, as the file declares them
        if isinstance(node, ast.Assign) and node.targets[0].id.startswith("KV"):
            exec(compile(ast.Module([node], []), "kv_transfer.py", "exec"), ns)
    post = src.function("vllm/config/kv_transfer.py", "KVTransferConfig.__post_init__",
                        {"get_args": typing.get_args, "KVRole": ns["KVRole"], "uuid": __import__("uuid")})
    post(type("KV", (), {"engine_id": None, "kv_role": kv.get("kv_role"), "kv_connector": kv.get("kv_connector")})())


def _draft_config(src: WheelSource, spec: dict, target_config: dict):
    import transformers

    cls = src.cls("vllm/transformers_utils/configs/extract_hidden_states.py", "ExtractHiddenStatesConfig",
                  ("__init__",), (transformers.PretrainedConfig,), {"PreTrainedConfig": transformers.PretrainedConfig})
    return cls(target_config, **spec["draft_model_config"]["hf_config"])


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_vllm_lines_parse_and_capture_what_they_say(vllm_wheel, vllm_run, arch):
    src = WheelSource(vllm_wheel)
    n = 8
    target = TargetShape("/models/target", arch, n, HIDDEN)
    drafts = [{}, {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}, {"eagle_aux_hidden_state_layer_ids": [0, 4, 8]}]
    launches = [vllm_reference(target, "/srv/hs")] + [vllm_serving(d, target, "/srv/hs") for d in drafts]
    for launch in launches:
        if launch.capture is None:
            assert launch.notes and not launch.argv
            continue
        argv = list(launch.argv)
        assert argv[:3] == ["vllm", "serve", "/models/target"]
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        kv = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        _kv_check(src, kv)
        assert kv["kv_connector"] == "ExampleHiddenStatesConnector" and kv["kv_connector_extra_config"] == {
            "shared_storage_path": "/srv/hs"}
        assert spec["method"] == "extract_hidden_states" and spec["num_speculative_tokens"] == 1
        assert "draft_sample_method" not in spec and "disable_padded_drafter_batch" not in spec
        hf = _draft_config(src, spec, {"num_hidden_layers": n, "hidden_size": HIDDEN})
        assert hf.architectures == ["ExtractHiddenStatesModel"]
        ids = vllm_run.ids_v2({"eagle_aux_hidden_state_layer_ids": hf.eagle_aux_hidden_state_layer_ids})
        assert list(ids) == list(hf.eagle_aux_hidden_state_layer_ids)
        out = vllm_run.run(arch, n, {"eagle_aux_hidden_state_layer_ids": list(ids)})
        assert out.failed_at is None, out
        assert out.captured == tuple(s.label() for s in launch.capture.states), launch.line


@pytest.fixture(scope="module")
def local(served_target):
    from eagle_audit.target import load_target

    return load_target(str(served_target), dtype="float32")


def _fake(vllm_wheel, served_target, launch, storage, faults=VFaults()):
    return FakeVLLM(vllm_wheel, served_target, [s.boundary for s in launch.capture.states], storage, faults)


@pytest.mark.parametrize("n", [1, 4])
def test_states_read_from_the_connector_files(vllm_wheel, served_target, local, tmp_path, n):
    launch = vllm_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    fake = _fake(vllm_wheel, served_target, launch, tmp_path)
    with serving(fake) as url:
        got = read_vllm_states(ServerOptions(url, "vllm", timeout=30, deadline=60), prompts(3), launch.capture,
                               tmp_path, max_new_tokens=n)
    assert [g.states.shape for g in got] == [(len(p) + n - 1, N_LAYERS + 1, HIDDEN) for p in prompts(3)]
    # vLLM's own loader reads the same file (its lock released by the writer)
    path = got[0].source.split(" ", 1)[1]
    theirs = fake.mod["load_hidden_states"](path)
    assert np.array_equal(theirs["hidden_states"].float().numpy(), got[0].states)
    base = local_boundaries(local, got, launch.capture.states)
    matches = compare_slots([g.states for g in got], base, launch.capture.states)  # bf16 on disk vs fp32 here
    assert [m.verdict for m in matches] == ["ok"] * len(matches), [m.to_json() for m in matches]


@pytest.mark.parametrize("faults, message", [
    (VFaults(truncate=True), r"truncated or inconsistent|not a readable safetensors"),
    (VFaults(extra_slot=True), rf"hidden_states \[\d+, {N_LAYERS + 2}, {HIDDEN}\], expected \[T, {N_LAYERS + 1}, "),
    (VFaults(other_tokens=True), r"token_ids .* are not the request's"),
    (VFaults(escape_path=True), None),
])
def test_bad_files_are_one_line(vllm_wheel, served_target, tmp_path, faults, message):
    launch = vllm_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    with serving(_fake(vllm_wheel, served_target, launch, tmp_path, faults)) as url:
        with pytest.raises((BadStates, BadServerReply)) as e:
            read_vllm_states(ServerOptions(url, "vllm", timeout=30, deadline=60), prompts(1), launch.capture, tmp_path)
    assert "\n" not in str(e.value)
    if message:
        assert e.match(message)


def test_path_rules(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"")
    assert locate(str(tmp_path / "a.safetensors"), tmp_path) == (tmp_path / "a.safetensors").resolve()
    assert locate("/mnt/elsewhere/a.safetensors", tmp_path) == (tmp_path / "a.safetensors").resolve()
    for bad in ("/x/../../etc/passwd", "a.txt", ".safetensors"):
        with pytest.raises(BadServerReply):
            locate(bad, tmp_path)


def test_next_tokens_from_prompt_logprobs(vllm_wheel, served_target, local, tmp_path):
    """prompt_logprobs 1 through the wheel's gather, processor and clamp: the argmax at every position."""
    import torch

    launch = vllm_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    with serving(_fake(vllm_wheel, served_target, launch, tmp_path)) as url:
        got = read_vllm_states(ServerOptions(url, "vllm", timeout=30, deadline=60), prompts(2), launch.capture,
                               tmp_path, max_new_tokens=3, next_tokens=True)
    for g in got:
        want = local.model(torch.tensor([list(g.token_ids)])).logits[0].argmax(-1).tolist()
        assert list(g.next_tokens) == want and len(want) == g.states.shape[0]


def test_fingerprint_through_a_vllm_states_server(vllm_wheel, served_target, served_target_no_weights, make_draft,
                                                  tmp_path):
    """The CLI end to end on a weights-free target: no exit 2, the states and labels from the vLLM server."""
    from typer.testing import CliRunner

    from eagle_audit.cli.main import app

    launch = vllm_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    fake = _fake(vllm_wheel, served_target, launch, tmp_path)
    with serving(fake) as url:
        r = CliRunner().invoke(app, ["fingerprint", "-t", str(served_target_no_weights), "-d",
                                     str(make_draft(nested_ids=[1, 2, 3])), "--states-server", url, "--server-kind", "vllm",
                                     "--hidden-states-dir", str(tmp_path), "--max-prompts", "2", "--max-new-tokens",
                                     "4", "--confirm-prompts", "2", "--json", "-"])
    assert r.exit_code in (0, 1), r.output
    data = json.loads(r.stdout)
    assert data["provenance"]["source"]["backend"] == "server" and "vllm server" in data["provenance"]["source"]["origin"]
    assert fake.n == 4  # one request per prompt: 2 searched, 2 confirming (disjoint, docs/fingerprint.md)


def _states_file(path, x, token_ids, pad_header_to=None):
    """A file as the connector writes it (``safetensors.torch.save_file``); ``pad_header_to``: the header's
    length in bytes instead (spaces after the JSON: the tensor data then starts at any byte, not 8-aligned)."""
    import torch
    from safetensors.torch import save_file

    save_file({"hidden_states": x, "token_ids": torch.tensor(token_ids, dtype=torch.int64)}, str(path))
    if pad_header_to:
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        head = raw[8:8 + n].rstrip(b" ")
        path.write_bytes(pad_header_to.to_bytes(8, "little") + head.ljust(pad_header_to) + raw[8 + n:])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("pad", [None, 1001, 1002])
def test_load_states_equals_torch_bit_for_bit(tmp_path, dtype, pad):
    """The mapped conversion (engines/vllm/states.py ``_as_float32``) gives torch's ``.float()`` of every value,
    subnormals, signed zeros and the extremes included, across pieces and at any data alignment."""
    import torch

    from eagle_audit.engines import vllm
    from eagle_audit.engines.vllm.states import load_states

    t, k, h = 40, 3, 64
    x = (torch.randn(t, k, h, generator=torch.Generator().manual_seed(0)) * 4).to(getattr(torch, dtype))
    info = torch.finfo(x.dtype)
    x[0, 0, :5] = torch.tensor([info.max, -info.max, info.tiny / 4, -0.0, info.smallest_normal], dtype=x.dtype)
    path = tmp_path / "r.safetensors"
    _states_file(path, x, list(range(t)), pad)
    capture = vllm_reference(TargetShape("/m", "LlamaForCausalLM", N_LAYERS, h), str(tmp_path)).capture
    capture = type(capture)("vllm", capture.states[:k], h)
    old = vllm.states._PIECE
    try:
        for piece in (old, 7):  # one piece, and pieces that end mid-row and mid-page
            vllm.states._PIECE = piece
            got = load_states(path, capture, list(range(t)))
            assert got.dtype == np.float32 and got.flags.owndata and got.shape == (t, k, h)
            assert np.array_equal(got.view(np.uint32), x.float().numpy().view(np.uint32))
    finally:
        vllm.states._PIECE = old
    x[t - 1, k - 1, h - 1] = float("nan")
    _states_file(path, x, list(range(t)), pad)
    with pytest.raises(BadStates, match=rf"non-finite hidden states \(value {t * k * h - 1}\)") as e:
        load_states(path, capture, list(range(t)))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("line", ["serving", "reference"])
def test_layers_server_takes_either_line(vllm_wheel, served_target, make_draft, tmp_path, line):
    """issue 26 "What failed" 3: `layers --server` on a vLLM server started with the draft's serving line (its
    files hold [T, 3, H]: the 3 served slots) compares those slots; with the reference line, every boundary. A
    server that runs neither line is one line naming both shapes."""
    from eagle_audit import api
    from eagle_audit.source.server import StatesServer

    draft = make_draft(top_level_ids=[1, 3, 5])  # vLLM serves B1 B3 B5
    shape = TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN)
    cfg = json.loads((draft / "config.json").read_text())
    launch = vllm_serving(cfg, shape, str(tmp_path)) if line == "serving" else vllm_reference(shape, str(tmp_path))
    assert launch.capture.role == line
    with serving(_fake(vllm_wheel, served_target, launch, tmp_path)) as url:
        r = api.audit_layers(served_target, draft, trained_boundaries=[1, 3, 5], max_prompts=2, max_tokens=16,
                             server=StatesServer(url, "vllm", hidden_states_dir=str(tmp_path)), dtype="float32",
                             engine="vllm")
    table = r.served_states["slots"]
    assert r.served_states["capture"]["role"] == line
    assert [s["expected"] for s in table] == ([s.label() for s in launch.capture.states])
    assert [s["verdict"] for s in table] == ["ok"] * len(table) and not r.findings, r.findings
    if line == "serving":
        assert len(table) == 3 and [s["expected"] for s in table] == ["B1", "B3", "B5"]


def test_a_server_of_another_line_is_one_line(vllm_wheel, served_target, make_draft, tmp_path):
    from eagle_audit import api
    from eagle_audit.engines.states import BadStates as Bad
    from eagle_audit.source.server import StatesServer

    draft = make_draft(top_level_ids=[1, 3, 5])
    other = vllm_serving({"eagle_aux_hidden_state_layer_ids": [2, 4]},
                         TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    with serving(_fake(vllm_wheel, served_target, other, tmp_path)) as url:
        with pytest.raises(Bad, match=r"expected \[T, 7, 32\] \(reference line.*or \[T, 3, 32\] \(serving line: B1, B3, B5\)"):
            api.audit_layers(served_target, draft, trained_boundaries=[1, 3, 5], max_prompts=1, max_tokens=16,
                             server=StatesServer(url, "vllm", hidden_states_dir=str(tmp_path)), dtype="float32",
                             engine="vllm")
