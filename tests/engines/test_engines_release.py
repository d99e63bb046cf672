"""The release a running server reports (engines/options.server_release), read from the test servers that answer in
each engine's exact format (tests/served: SGLang's ``/server_info`` ``version``, vLLM's ``GET /version``), the routes
themselves read in the wheels, and the engine rules an audit then picks (provenance.engine_convention)."""

from __future__ import annotations

import zipfile

import pytest

from eagle_audit.conventions.releases import SERVER
from eagle_audit.engines.launch import TargetShape
from eagle_audit.engines.options import Server, server_release
from eagle_audit.engines.sglang import wire as sglang_wire
from eagle_audit.engines.sglang.launch import sglang_reference
from eagle_audit.engines.vllm import wire as vllm_wire
from eagle_audit.engines.vllm.launch import vllm_reference
from eagle_audit.provenance import engine_convention
from tests.served.served_tiny import HIDDEN, N_LAYERS
from tests.served.sglang_server import FakeSGLang, serving as sglang_serving
from tests.served.vllm_server import FakeVLLM, serving as vllm_serving

pytestmark = pytest.mark.usefixtures("one_thread")


def _source(wheel, path: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(path).decode()


def test_the_routes_are_the_wheels(sglang_wheel, vllm_wheel):
    """SGLang answers its release in /server_info (no /version route); vLLM in GET /version."""
    http = _source(sglang_wheel, "sglang/srt/entrypoints/http_server.py")
    assert '@app.get("/server_info")' in http and '"version": __version__' in http and '"/version"' not in http
    assert sglang_wire.VERSION_PATHS[0] == "/server_info"
    basic = _source(vllm_wheel, "vllm/entrypoints/serve/instrumentator/basic.py")
    assert '@router.get("/version")' in basic and 'ver = {"version": VLLM_VERSION}' in basic
    assert vllm_wire.VERSION_PATHS == ("/version",)


@pytest.fixture
def sglang_url(sglang_pieces, sglang_capture, served_target):
    launch = sglang_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN))
    with sglang_serving(FakeSGLang(sglang_pieces, sglang_capture, list(launch.argv[3:]), served_target,
                                   "LlamaForCausalLM")) as url:
        yield url


@pytest.fixture
def vllm_url(vllm_wheel, served_target, tmp_path):
    launch = vllm_reference(TargetShape(str(served_target), "LlamaForCausalLM", N_LAYERS, HIDDEN), str(tmp_path))
    with vllm_serving(FakeVLLM(vllm_wheel, served_target, [s.boundary for s in launch.capture.states], tmp_path)) as url:
        yield url


def test_sglang_server_release(sglang_url):
    kind, version, where = server_release(Server(sglang_url))
    assert (kind, version) == ("sglang", "0.5.23") and where.endswith("/server_info")
    notes: list[str] = []
    conv = engine_convention(None, False, notes, server=Server(sglang_url))  # no engine named: the server's
    assert (conv.name, conv.version, conv.release_how) == ("sglang", "0.5.23", SERVER)
    assert conv.label() == "SGLang 0.5.23 (detected from the server)"
    assert any("sglang 0.5.23 read from GET" in n for n in notes)


def test_vllm_server_release(vllm_url):
    assert server_release(Server(vllm_url))[:2] == ("vllm", "0.33.0")
    notes: list[str] = []
    conv = engine_convention("vLLM-V1", False, notes, server=Server(vllm_url))  # a variant of the server's engine
    assert (conv.name, conv.version, conv.release_how) == ("vllm-v1", "0.33.0", SERVER)


def test_a_given_release_wins_and_another_engine_is_not_used(sglang_url):
    notes: list[str] = []
    conv = engine_convention("sglang@0.5.6", False, notes, server=Server(sglang_url))
    assert (conv.version, conv.release_how) == ("0.5.6", "given")
    notes = []
    conv = engine_convention("vllm", False, notes, server=Server(sglang_url))
    assert conv.name == "vllm" and conv.release_how == "newest built in"
    assert any("runs sglang 0.5.23, not vllm" in n for n in notes)


def test_launch_lines_name_the_release(tiny_targets, make_draft):
    from eagle_audit.engines.lines import launch_lines

    r = launch_lines(str(tiny_targets["llama"]), str(make_draft(nested_ids=[1, 3, 5])), ("SGLang@0.5.6", "vllm"))
    assert [e.title for e in r.engines] == ["SGLang 0.5.6 (given)",
                                            "vLLM 0.33.0 (V2 model runner, default; newest built in)"]
    assert [e.engine for e in r.engines] == ["sglang", "vllm"]
    assert any("the flags are SGLang 0.5.23's" in n for n in r.notes)
