"""The --server client against local servers answering as SGLang 0.5.23 and vLLM 0.33.0 do
(tests/accept/fake_engines.py; vLLM's counters made by vLLM's own metrics code from the wheel)."""

from __future__ import annotations

import json
import socket
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eagle_audit.engines.vllm.acceptance import parse_vllm_metrics
from eagle_audit.engines.vllm.wire import NEUTRAL as VLLM_NEUTRAL
from eagle_audit.engines.http import BadServerReply, ServerAuthError, ServerError, ServerTimeout
from eagle_audit.engines.options import ServerOptions
from eagle_audit.engines.prometheus import parse_exposition
from eagle_audit.engines.registry import read_server
from eagle_audit.simulate.accept import Case, stats_from_gains, walk
from eagle_audit.errors import AuditError

from tests.accept.fake_engines import EOS, FakeSGLang, FakeVLLM, sim_drafts, spec_generate, target_next

STEPS = 3
PROMPTS = [[3, 1, 4, 1, 5], [9, 2, 6], [5, 3, 5, 8, 9, 7], [2, 7, 1, 8], [1, 1, 2, 3, 5, 8]]
OTHERS = [[40, 41, 42], [7, 7, 7, 7], [60, 1]]
MAX_NEW = 24


def greedy(prompt, max_new):
    out = []
    while len(out) < max_new:
        out.append(target_next(list(prompt) + out))
        if out[-1] == EOS:
            break
    return out


def simulated(prompts, max_new=MAX_NEW):
    """eagle_audit's own simulation bookkeeping over the toy model's drafts."""
    cases = [Case(tuple(p), tuple(greedy(p, max_new))) for p in prompts]
    gains = [walk(c.ids, len(c.prompt), sim_drafts(c.ids, STEPS)) for c in cases]
    return cases, stats_from_gains(gains, STEPS, cases)


@pytest.fixture
def serve():
    started = []

    def start(engine):
        engine.start()
        started.append(engine)
        return engine

    yield start
    for e in started:
        e.stop()


@pytest.fixture(scope="session")
def vllm_metrics(vllm_wheel, tmp_path_factory):
    """vLLM 0.33.0's own SpecDecodingProm / SpecDecodingStats / SpecDecodingLogging (v1/spec_decode/metrics.py),
    imported from the wheel with vllm.config and vllm.logger stubbed (the only imports they need)."""
    import logging

    from tests.wheels import extract, wheel_modules

    root = extract(vllm_wheel, tmp_path_factory.mktemp("vllm"), "vllm/v1/spec_decode/metrics.py",
                   "vllm/v1/metrics/utils.py", "vllm/entrypoints/openai/completion/protocol.py",
                   "vllm/config/model.py", "vllm/entrypoints/serve/middleware/authenticate.py",
                   "vllm/v1/metrics/loggers.py")
    stubs = {"vllm.config": types.SimpleNamespace(SpeculativeConfig=object),
             "vllm.logger": types.SimpleNamespace(init_logger=logging.getLogger)}
    with wheel_modules(root, "vllm", stubs) as load:
        m = load("vllm.v1.spec_decode.metrics")
    return types.SimpleNamespace(root=root, Prom=m.SpecDecodingProm, Stats=m.SpecDecodingStats,
                                 Logging=m.SpecDecodingLogging)


def vllm(vllm_metrics, **kw):
    return FakeVLLM(prom_cls=vllm_metrics.Prom, stats_cls=vllm_metrics.Stats, **kw)


# ----------------------------------------------------------------------------- SGLang


def test_sglang_measures_the_audited_requests_only(serve):
    fake = serve(FakeSGLang(steps=STEPS, dp=2, decode_log_interval=4))  # warm-up request of each rank at start
    for p in OTHERS:  # another client's traffic before the run
        fake.generate(p, {"temperature": 0.8, "max_new_tokens": 40})
    cases, sim = simulated(PROMPTS)
    r = read_server(ServerOptions(fake.url), PROMPTS, MAX_NEW, expected=[c.continuation for c in cases])
    assert r.kind == "sglang" and r.requests == len(PROMPTS)
    assert r.accept_length == pytest.approx(sim.accept_length, abs=1e-12)  # the simulation's own definition
    assert r.request_accept_length == pytest.approx(sim.request_accept_length, abs=1e-12)
    assert r.verify_steps == sim.verify_steps and r.tokens == sim.tokens
    assert r.continuations_equal == len(PROMPTS)
    assert sum(r.histogram) == r.verify_steps and len(r.per_position) >= 1
    # the lifetime figure is context: one per DP rank, mixing warm-up and other traffic
    assert len(r.lifetime_accept_length) == 2 and all(v is not None for v in r.lifetime_accept_length)
    assert all(abs(v - r.accept_length) > 1e-6 for v in r.lifetime_accept_length)


def test_drafting_settings_that_differ_are_noted(serve, vllm_metrics):
    sg = serve(FakeSGLang(steps=5))
    r = read_server(ServerOptions(sg.url), PROMPTS[:1], MAX_NEW)
    assert r.drafting == {"algorithm": "EAGLE3", "num_steps": 5, "eagle_topk": 1, "num_draft_tokens": 6}
    from eagle_audit.engines.registry import engine

    differs = lambda r, *settings: engine(r.kind).drafting_differs(r.drafting, *settings)  # noqa: E731
    assert differs(r, 5, 1, 6) is None
    assert "num_steps 5, topk 1, num_draft_tokens 6; the simulation ran 3, 1, 4" in differs(r, 3, 1, 4)
    vl = serve(vllm(vllm_metrics, steps=2, lag=0))
    r = read_server(ServerOptions(vl.url), PROMPTS[:1], MAX_NEW)
    assert r.drafting == {"num_speculative_tokens": 2} and differs(r, 2, 1, 3) is None
    assert "the server drafts 2 tokens per step" in differs(r, 3, 1, 4)


def test_block_drafting_settings():
    """A block draft (DFlash, DSpark): SGLang reports num_steps 1, topk 1 and the verify window
    (arg_groups/speculative_hook.py: DFlash block_size, DSpark gamma + 1); only the window and the algorithm's kind
    count. vLLM: num_speculative_tokens, the drafts a verify."""
    from eagle_audit.engines.registry import engine

    sg, vl = engine("sglang").drafting_differs, engine("vllm").drafting_differs
    dflash = {"algorithm": "DFLASH", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 4}
    assert sg(dflash, 3, 1, 4, block=True) is None
    assert "blocks of 4 tokens (3 drafts a verify); the simulation ran the draft's own block, 5" in \
        sg(dflash, 4, 1, 5, block=True)
    assert sg({**dflash, "algorithm": "DSPARK", "num_draft_tokens": 5}, 4, 1, 5, block=True) is None
    assert "serves another kind of draft" in sg({"algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1,
                                                 "num_draft_tokens": 4}, 3, 1, 4, block=True)
    assert "serves another kind of draft" in sg(dflash, 3, 1, 4)  # a DFlash server, an EAGLE-3 draft audited
    assert vl({"num_speculative_tokens": 3}, 3, 1, 4, block=True) is None
    assert "another block is not simulated" in vl({"num_speculative_tokens": 4}, 3, 1, 4, block=True)


def test_sglang_histogram_gives_per_position(serve):
    fake = serve(FakeSGLang(steps=STEPS))
    r = read_server(ServerOptions(fake.url), PROMPTS, MAX_NEW)
    hist = [0] * (STEPS + 1)
    for body in fake.requests:
        h = fake.generate(body["input_ids"], body["sampling_params"])["meta_info"]["spec_correct_drafts_histogram"]
        for n, c in enumerate(h):
            hist[n] += c
    assert list(r.histogram) == hist[: len(r.histogram)] and sum(hist) == r.verify_steps
    assert r.per_position[0] == pytest.approx(sum(hist[1:]) / sum(hist))


def test_sglang_lifetime_absent_before_the_first_fold(serve):
    fake = serve(FakeSGLang(steps=STEPS, decode_log_interval=10_000))
    r = read_server(ServerOptions(fake.url), PROMPTS[:2], MAX_NEW)
    assert r.lifetime_accept_length == (None,) and r.accept_length is not None


def test_sglang_without_speculative_decoding(serve):
    fake = serve(FakeSGLang(spec=False))
    with pytest.raises(ServerError, match="speculative decoding is off"):
        read_server(ServerOptions(fake.url), PROMPTS[:2], MAX_NEW)


def test_sglang_frontend_without_per_request_figures(serve):
    class Quiet(FakeSGLang):  # spec decoding on, meta_info without the spec keys
        def generate(self, ids, sp, rank=None):
            out = super().generate(ids, sp, rank)
            out["meta_info"] = {k: v for k, v in out["meta_info"].items() if not k.startswith("spec_")}
            return out

    fake = serve(Quiet(steps=STEPS))
    with pytest.raises(ServerError, match="although it runs EAGLE3 .python frontend.: it reports no per-request"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)


def test_sglang_sends_neutral_sampling(serve):
    fake = serve(FakeSGLang(steps=STEPS))
    read_server(ServerOptions(fake.url, "sglang"), PROMPTS[:1], 7)
    sp = fake.requests[0]["sampling_params"]
    assert sp["max_new_tokens"] == 7 and sp["temperature"] == 0.0 and sp["repetition_penalty"] == 1.0
    assert sp["frequency_penalty"] == sp["presence_penalty"] == sp["min_p"] == 0.0 and sp["top_p"] == 1.0


# ----------------------------------------------------------------------------- API keys


def test_sglang_api_key(serve, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = serve(FakeSGLang(steps=STEPS, api_key="s3cret"))
    with pytest.raises(ServerAuthError, match="HTTP 401 Unauthorized.*no API key was sent"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)
    with pytest.raises(ServerAuthError, match="HTTP 401 Unauthorized.*refused"):
        read_server(ServerOptions(fake.url, api_key="wrong"), PROMPTS[:1], MAX_NEW)
    r = read_server(ServerOptions(fake.url, api_key="s3cret"), PROMPTS[:1], MAX_NEW)
    assert r.accept_length is not None and r.key_source == "option" and "s3cret" not in json.dumps(r.to_json())
    monkeypatch.setenv("OPENAI_API_KEY", "s3cret")  # what SGLang's own benchmark client sends
    assert read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW).key_source == "OPENAI_API_KEY"


def test_vllm_api_key_from_its_variable(serve, vllm_metrics, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    fake = serve(vllm(vllm_metrics, api_key="k1", lag=0))
    with pytest.raises(ServerAuthError, match="/v1/completions: HTTP 401"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)
    monkeypatch.setenv("VLLM_API_KEY", "k1")  # the variable vLLM's server reads (envs.py:829)
    r = read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)
    assert r.kind == "vllm" and r.key_source == "VLLM_API_KEY"


def test_forbidden_is_reported_as_such(serve):
    class Admin(FakeSGLang):
        def handle(self, h, method):
            if h.path == "/generate":
                return h.send(403, {"error": "Forbidden"})
            return super().handle(h, method)

    fake = serve(Admin(steps=STEPS))
    with pytest.raises(ServerAuthError, match="HTTP 403 Forbidden"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)


# ----------------------------------------------------------------------------- vLLM


def test_vllm_counters_over_the_run(serve, vllm_metrics):
    fake = serve(vllm(vllm_metrics, steps=STEPS, engines=2))
    for p in OTHERS:  # traffic before the run: outside the difference
        _, record = fake.complete(p, {"temperature": 0.9})
        record()
    cases, _ = simulated(PROMPTS)
    r = read_server(ServerOptions(fake.url), PROMPTS, MAX_NEW, expected=[c.continuation for c in cases])
    gens = [spec_generate(p, MAX_NEW, STEPS) for p in PROMPTS]
    verifies = sum(g.verifies for g in gens)
    assert r.kind == "vllm" and r.other_traffic is False and not r.notes
    # vLLM's definition: 1 + accepted / drafts, the last verify of a request uncut
    assert r.accept_length == pytest.approx(sum(g.accept_tokens for g in gens) / verifies)
    assert r.verify_steps == verifies and len(r.per_position) == STEPS
    assert r.continuations_equal == len(PROMPTS)  # neutral sampling beat the model's generation_config


def test_vllm_neutral_sampling_overrides_generation_config(serve, vllm_metrics):
    fake = serve(vllm(vllm_metrics, lag=0))
    read_server(ServerOptions(fake.url, "vllm"), PROMPTS[:1], 9)
    body = fake.requests[0]
    assert body["max_tokens"] == 9 and body["return_token_ids"] is True
    assert fake.effective(body) == {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                                    "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}
    # without them the model's generation_config would apply (repetition_penalty 1.05 here)
    assert fake.effective({"prompt": [1]})["repetition_penalty"] == 1.05


def test_vllm_other_traffic_is_reported(serve, vllm_metrics):
    class Busy(FakeVLLM):
        def complete(self, prompt, body):
            reply, record = super().complete(prompt, body)
            _, other = super().complete(OTHERS[0], {"temperature": 1.0})

            def both():
                record()
                other()
            return reply, both

    fake = serve(Busy(prom_cls=vllm_metrics.Prom, stats_cls=vllm_metrics.Stats, steps=STEPS))
    r = read_server(ServerOptions(fake.url), PROMPTS[:3], MAX_NEW)
    assert r.other_traffic is True and "other traffic moved the counters" in r.notes[0]
    assert "6 requests finished during the run (ours: 3)" in r.notes[0]


def test_vllm_without_spec_decoding(serve, vllm_metrics):
    fake = serve(vllm(vllm_metrics, spec=False))
    with pytest.raises(ServerError, match="no vllm:spec_decode_\\* counters: speculative decoding is off"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)


def test_vllm_with_stats_disabled(serve, vllm_metrics):
    fake = serve(vllm(vllm_metrics, log_stats=False))  # detected from /version, then a clear reason
    with pytest.raises(ServerError, match="--disable-log-stats"):
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW)


# ----------------------------------------------------------------------------- contracts with the wheels


def test_exposition_from_vllms_own_metrics_code(vllm_metrics):
    """vLLM's SpecDecodingProm writes the counters (label sets, # TYPE, _created); the parser sums them, and
    1 + accepted / drafts equals the mean acceptance length vLLM's own SpecDecodingLogging prints."""
    import prometheus_client as pc

    reg = pc.CollectorRegistry()

    class Prom(vllm_metrics.Prom):
        _counter_cls = staticmethod(lambda **kw: pc.Counter(registry=reg, **kw))

    prom = Prom(types.SimpleNamespace(num_speculative_tokens=3), ["model_name", "engine"],
                {0: ["m", "0"], 1: ["m", "1"]})
    logging_ = vllm_metrics.Logging()
    for engine, accepts in ((0, [3, 0, 2, 1]), (1, [3, 3, 1])):
        stats = vllm_metrics.Stats.new(3)
        for a in accepts:
            stats.observe_draft(num_draft_tokens=3, num_accepted_tokens=a)
        prom.observe(stats, engine)
        logging_.observe(stats)
    text = pc.generate_latest(reg).decode()
    assert any(line.startswith("# TYPE vllm:spec_decode_num_drafts") and line.endswith(" counter")
               for line in text.splitlines())
    assert "vllm:spec_decode_num_drafts_created{" in text
    assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 2.0' in text
    vals = parse_vllm_metrics(text)
    assert vals["vllm:spec_decode_num_drafts_total"] == 7 and vals["vllm:spec_decode_num_accepted_tokens_total"] == 13
    lines = []
    logging_.log(log_fn=lambda fmt, *args: lines.append(fmt % args))
    printed = float(lines[0].split("Mean acceptance length: ")[1].split(",")[0])
    assert printed == pytest.approx(1 + 13 / 7, abs=0.005)


def test_vllm_sampling_keys_read_from_the_wheel(vllm_metrics):
    """Every key vLLM defaults per request (CompletionRequest._DEFAULT_SAMPLING_PARAMS) and every key it takes
    from generation_config.json (ModelConfig.get_diff_sampling_param) is sent explicitly (max_new_tokens as
    max_tokens; skip_special_tokens does not change token ids)."""
    import ast

    proto = ast.parse((vllm_metrics.root / "vllm/entrypoints/openai/completion/protocol.py").read_text())
    defaults = next(ast.literal_eval(n.value) for n in ast.walk(proto)
                    if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_DEFAULT_SAMPLING_PARAMS")
    model = ast.parse((vllm_metrics.root / "vllm/config/model.py").read_text())
    fn = next(n for n in ast.walk(model) if isinstance(n, ast.FunctionDef) and n.name == "get_diff_sampling_param")
    available = next(ast.literal_eval(n.value) for n in ast.walk(fn)
                     if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "available_params")
    assert set(defaults) <= set(VLLM_NEUTRAL)
    assert set(available) - {"max_new_tokens", "skip_special_tokens"} <= set(VLLM_NEUTRAL)
    assert {k: v for k, v in defaults.items() if k != "temperature"} == {k: VLLM_NEUTRAL[k] for k in defaults
                                                                         if k != "temperature"}
    auth = (vllm_metrics.root / "vllm/entrypoints/serve/middleware/authenticate.py").read_text()
    assert 'GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")' in auth


def test_traffic_counters_read_from_the_wheel(vllm_metrics):
    """The names and label sets the other-traffic check reads (and the fake serves) are PrometheusStatLogger's."""
    import ast

    tree = ast.parse((vllm_metrics.root / "vllm/v1/metrics/loggers.py").read_text())
    found = {}
    for call in ast.walk(tree):
        kw = {k.arg: k.value for k in getattr(call, "keywords", [])} if isinstance(call, ast.Call) else {}
        if isinstance(kw.get("name"), ast.Constant):
            found[kw["name"].value] = ast.unparse(kw["labelnames"]) if "labelnames" in kw else None
    assert found["vllm:request_success"] == "labelnames + ['finished_reason']"
    assert found["vllm:generation_tokens"] == found["vllm:num_requests_running"] == "labelnames"
    assert found["vllm:num_requests_waiting"] == "labelnames"
    assert "labelnames = ['model_name', 'engine']" in ast.unparse(tree)


@pytest.fixture(scope="session")
def sglang_code(sglang_wheel, tmp_path_factory):
    """SGLang 0.5.23's own /generate contract gate (api/v1/api_types.py, run by http_server.py:937),
    SamplingParams (+ verify, tokenizer_manager.py:1565) and the API-key decision (utils/auth.py:73)."""
    from tests.wheels import extract, wheel_modules

    root = extract(sglang_wheel, tmp_path_factory.mktemp("sglang"), "sglang/api/", "sglang/srt/sampling/",
                   "sglang/srt/utils/auth.py", "sglang/srt/configs/model_config.py")
    with wheel_modules(root, "sglang") as load:
        api = load("sglang.api.v1.api_types")
        sp = load("sglang.srt.sampling.sampling_params")
        auth = load("sglang.srt.utils.auth")
    return types.SimpleNamespace(root=root, api=api, SamplingParams=sp.SamplingParams, auth=auth)


def test_sglang_request_bodies_pass_its_own_validator(serve, sglang_code):
    fake = serve(FakeSGLang(steps=STEPS))
    read_server(ServerOptions(fake.url), PROMPTS, MAX_NEW)
    assert len(fake.requests) == len(PROMPTS)
    for body in fake.requests:
        sglang_code.api.GenerateRequest.from_json_value(body)  # raises JsonContractError when refused
        params = sglang_code.SamplingParams(**body["sampling_params"])
        params.verify(vocab_size=1000)
        assert params.top_k == 1  # temperature 0 is greedy (sampling_params.py:245)


def test_sglang_key_rules_match_its_own_auth(sglang_code):
    decide = sglang_code.auth.decide_request_auth
    for path, needs in (("/generate", True), ("/server_info", True), ("/metrics", False), ("/health", False)):
        for header, ok in ((None, not needs), ("Bearer k", True), ("Bearer x", not needs)):
            d = decide(method="GET", path=path, authorization_header=header, api_key="k", admin_api_key=None,
                       auth_level=sglang_code.auth.AuthLevel.NORMAL)
            assert d.allowed == ok, (path, header)
            assert d.allowed or d.error_status_code == 401


def test_sglang_generation_config_keys(sglang_code):
    import ast

    tree = ast.parse((sglang_code.root / "sglang/srt/configs/model_config.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_default_sampling_params")
    available = next(ast.literal_eval(n.value) for n in ast.walk(fn)
                     if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "available_params")
    from eagle_audit.engines.sglang.wire import NEUTRAL as SGLANG_NEUTRAL

    assert set(available) <= set(SGLANG_NEUTRAL)


# ----------------------------------------------------------------------------- deadlines and bad replies


def _raw_server(handler_cls):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


class _Drip(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass

    do_POST = do_GET


def test_a_dripping_server_is_cut_at_the_request_deadline():
    srv, url = _raw_server(_Drip)
    try:
        t0 = time.monotonic()
        with pytest.raises(ServerTimeout, match="per-request timeout of 1 s"):
            read_server(ServerOptions(url, "sglang", timeout=1.0), PROMPTS[:1], MAX_NEW)
        assert time.monotonic() - t0 < 3
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_whole_reading_has_a_deadline(serve):
    class Slow(FakeSGLang):
        def handle(self, h, method):
            time.sleep(0.3)
            return super().handle(h, method)

    fake = serve(Slow(steps=STEPS))
    with pytest.raises(ServerTimeout, match="deadline of 1 s for the whole reading|ran past its deadline of 1 s"):
        read_server(ServerOptions(fake.url, "sglang", timeout=10, deadline=1.0), PROMPTS * 2, MAX_NEW)


def test_bad_kind_is_refused():
    with pytest.raises(AuditError, match="server kind 'tgi': must be one of auto, sglang, vllm"):
        ServerOptions("http://127.0.0.1:1", "tgi")


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_bad_deadlines_are_refused(timeout):
    with pytest.raises(AuditError, match="finite number of seconds"):
        ServerOptions("http://127.0.0.1:1", timeout=timeout)


def _bad_sglang(mutate):
    class Bad(FakeSGLang):
        def generate(self, ids, sp, rank=None):
            out = super().generate(ids, sp, rank)
            return mutate(out) if sp.get("max_new_tokens") == MAX_NEW else out
    return Bad(steps=STEPS)


BAD_SGLANG = {
    "meta_info missing": lambda r: {"text": r["text"]},
    "meta_info a list": lambda r: {**r, "meta_info": [1]},
    "completion_tokens a string": lambda r: {**r, "meta_info": {**r["meta_info"], "completion_tokens": "abc"}},
    "spec_verify_ct negative": lambda r: {**r, "meta_info": {**r["meta_info"], "spec_verify_ct": -1}},
    "spec_verify_ct a bool": lambda r: {**r, "meta_info": {**r["meta_info"], "spec_verify_ct": True}},
    "histogram a string": lambda r: {**r, "meta_info": {**r["meta_info"], "spec_correct_drafts_histogram": "x"}},
    "output_ids floats": lambda r: {**r, "output_ids": [1.5]},
    "reply a string": lambda r: "hello",
    "reply nested 100000 deep": lambda r: "[" * 100000,
}


@pytest.mark.parametrize("case", sorted(BAD_SGLANG))
def test_bad_sglang_replies(serve, case):
    fake = serve(_bad_sglang(BAD_SGLANG[case]))
    cases, _ = simulated(PROMPTS[:1])
    with pytest.raises(BadServerReply) as e:
        read_server(ServerOptions(fake.url), PROMPTS[:1], MAX_NEW, expected=[c.continuation for c in cases])
    assert "\n" not in str(e.value) and "/generate" in str(e.value)


class _Text(BaseHTTPRequestHandler):
    status, body = 200, b""

    def log_message(self, *a):
        pass

    def do_GET(self):
        data = self.body if self.path in ("/metrics", "/v1/completions") else b"{}"
        self.send_response(self.status if self.path != "/version" else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET


@pytest.mark.parametrize("body,match", [
    (b"vllm:spec_decode_num_drafts_total{a=\"1\"} many\n", "not a number"),
    (b"vllm:spec_decode_num_drafts_total{a=\"1\" 3\n", "not a Prometheus sample"),
    (b"vllm:spec_decode_num_drafts_total NaN\nvllm:spec_decode_num_accepted_tokens_total 1\n", "is nan"),
    (b"\xff\xfe not text", "not a Prometheus sample"),
])
def test_bad_vllm_metrics(body, match):
    srv, url = _raw_server(type("T", (_Text,), {"body": body}))
    try:
        with pytest.raises(BadServerReply, match=match):
            read_server(ServerOptions(url, "vllm"), PROMPTS[:1], MAX_NEW)
    finally:
        srv.shutdown()
        srv.server_close()


def test_parse_exposition_handles_labels_with_braces_and_timestamps():
    text = ('# HELP x y\n# TYPE vllm:spec_decode_num_drafts counter\n'
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="a}b\\"c"} 3 1700000000000\n'
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 4.0\n'
            'vllm:spec_decode_num_drafts_created{engine="1",model_name="m"} 1.7e9\n')
    samples = parse_exposition(text)
    assert dict(samples[0].labels)["model_name"] == 'a}b\\"c'
    assert parse_vllm_metrics(text)["vllm:spec_decode_num_drafts_total"] == 7.0


def test_unreachable_server():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ServerError, match="unreachable"):
        read_server(f"http://127.0.0.1:{port}", [[1, 2]], 4)


@pytest.mark.parametrize("url", ["ftp://x", "not a url", "http://127.0.0.1:notaport"])
def test_bad_urls(url):
    with pytest.raises(ServerError):
        read_server(ServerOptions(url, "sglang"), [[1, 2]], 4)


def test_retry_after_reads_seconds_and_http_dates():
    """RFC 9110: a delay in seconds or an HTTP date (GMT; a "-0000" date parses without a zone and is GMT too)."""
    import email.utils
    import time as _time

    from eagle_audit.engines.http import _retry_after

    assert _retry_after("3") == 3.0 and _retry_after(None) is None and _retry_after("soon") is None
    later = email.utils.formatdate(_time.time() + 30, usegmt=True)
    assert 25 <= _retry_after(later) <= 31
    assert _retry_after(later.replace("GMT", "-0000")) == pytest.approx(_retry_after(later), abs=2)
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date past: no wait
