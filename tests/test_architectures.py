"""Every decoder-only architecture the installed transformers registers (tests/architectures.py reads the
registry: no hand list, so a family missing from an older transformers is simply not there), as a tiny
random model: the target loader finds its layer stack and final norm, and the capture hooks give exactly
what transformers' own ``output_hidden_states`` gives; or the loader refuses with one clear line (exit 2),
the same line the config-only (static) reading gives where the static audit can know it. Never an internal
error. The matrix also takes every architecture the newest engine releases serve drafts for, multimodal wrappers
included (tests/architectures.py SERVING): each is pinned, and one with no tiny model must say why
(``served_no_tiny``). Which types capture and which refuse is pinned (tests/architectures_pinned.json, measured on the
transformers it names): a type pinned as capturing that now refuses fails, and so does a pinned refusal that
now captures (update the pin); a type the pin does not know (another transformers) is checked as above only.
Full tier: 185 types (68 served by an engine) in 36 s on the 2-core box (1 thread; 24 skipped), transformers 5.25.0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from eagle_audit.capture import capture, capture_states, run_forward
from eagle_audit.errors import AuditError
from eagle_audit.states import State, all_states, stream_states
from eagle_audit.target import MULTI_STREAM, find_layer_stack, load_target, target_info

from tests.architectures import SERVING, NoTinyModel, decoder_only_types, engine_served_types, tiny_model

pytestmark = [pytest.mark.full, pytest.mark.usefixtures("one_thread")]

#: model type -> (class, the engine conventions serving it) for what the newest engine releases serve drafts for
SERVED = engine_served_types()
#: the decoder-only registry, and the multimodal wrappers an engine serves (captured in their language model)
TYPES = {**decoder_only_types(), **{t: cls for t, (cls, _) in SERVED.items()}}
#: {"transformers": the version measured on, "captures": [model types], "refuses": [model types]}
PINNED = json.loads((Path(__file__).with_name("architectures_pinned.json")).read_text())


def _one_line(e: AuditError) -> str:
    assert "\n" not in e.message and "Traceback" not in e.message, e.message
    return e.message


def _layout(caps: dict, hf: tuple, n: int, streams: int = 1) -> str | None:
    """Which of transformers' hidden_states layouts the captures equal, bit for bit: "embedding first"
    (hidden_states[k] = Bk for k < N, [N] = post-norm; most models), "layers only" (hidden_states[k] =
    B(k+1) for k < N, [N] = post-norm; the Mamba family appends after each block and never the embedding), or
    "hyper-connection streams" (hidden_states[k] = [batch, tokens, streams, hidden] for k < N: Bk is their mean,
    Bk.s<i> stream i; docs/coordinate.md)."""
    def eq(a, b):
        return a.shape == b.shape and torch.equal(a, b)

    if len(hf) != n + 1 or not eq(caps[State(n, True)], hf[n]):
        return None
    if streams > 1:
        ok = all(eq(caps[State(k)], hf[k].mean(dim=2)) and all(eq(caps[State(k, stream=f"s{i}")], hf[k][:, :, i])
                                                              for i in range(streams)) for k in range(n))
        return "hyper-connection streams" if ok else None
    if all(eq(caps[State(k)], hf[k]) for k in range(n)):
        return "embedding first"
    if all(eq(caps[State(k + 1)], hf[k]) for k in range(n)):
        return "layers only"
    return None


def outcome(model_type: str, tmp_path) -> tuple[str, str]:
    """("captures", the hidden_states layout the captures equal), ("refuses", the loader's one line) or ("skip",
    why transformers itself cannot give a tiny model, save it or run it). Asserts what holds on either path."""
    try:
        model = tiny_model(model_type, TYPES[model_type])
    except NoTinyModel as e:
        return "skip", f"{model_type}: no tiny random model here: {e}"
    try:
        model.save_pretrained(tmp_path)
    except Exception as e:  # noqa: BLE001 - transformers' own save, not ours
        return "skip", (f"{model_type}: transformers cannot save the tiny model ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160] if str(e) else ''})")
    try:
        static = target_info(str(tmp_path))  # what the config-only (static) audit reads
    except AuditError as e:
        with pytest.raises(AuditError) as dynamic:  # the dynamic audit meets the same refusal, said the same way
            load_target(str(tmp_path))
        assert _one_line(dynamic.value) == _one_line(e)
        if model_type in MULTI_STREAM:  # the declaration is true: the capture hooks see no [batch, tokens, hidden]
            n = model.config.get_text_config().num_hidden_layers
            stack = find_layer_stack(model, n)
            with pytest.raises(AuditError, match="not \\[batch, tokens, hidden\\]"):
                with capture(stack, all_states(n)) as _:
                    run_forward(model, input_ids=torch.tensor([[1, 2, 3]]), use_cache=False)
        return "refuses", _one_line(e)
    try:
        target = load_target(str(tmp_path))
    except AuditError as e:  # no residual decoder stack the loader can name: one line, exit 2
        return "refuses", _one_line(e)
    n = target.info.num_layers
    assert n == static.num_layers == len(target.stack), "the static audit counts other layers than the loader"
    ids = torch.randint(0, 400, (2, 7), generator=torch.Generator().manual_seed(0))
    try:
        with torch.inference_mode():
            hf = target.model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
    except Exception as e:  # noqa: BLE001 - transformers' own forward, not ours
        return "skip", (f"{model_type}: transformers' own forward fails on the tiny config ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160] if str(e) else ''})")
    streams = target.info.streams
    # an AuditError here would be a refusal the static side missed
    caps = capture_states(target, ids, all_states(n) + stream_states(n, streams))
    layout = _layout(caps, hf, n, streams)
    assert layout is not None, f"{model_type}: captures differ from hidden_states ({target.stack.path})"
    return "captures", layout


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_load_and_capture_equal_transformers(model_type, tmp_path):
    got, detail = outcome(model_type, tmp_path)
    if got == "skip":
        assert model_type not in SERVED or model_type in PINNED["served_no_tiny"], (
            f"{model_type} is served by {', '.join(SERVED[model_type][1])} and has no tiny model here: {detail} "
            "(make one in tests/architectures.py, or say why not in tests/architectures_pinned.json served_no_tiny)")
        pytest.skip(detail)
    if model_type in PINNED["captures"]:
        assert got == "captures", (f"{model_type} captured on transformers {PINNED['transformers']} "
                                   f"and now refuses: {detail}")
    if model_type in PINNED["refuses"]:
        assert got == "refuses", (f"{model_type} was refused on transformers {PINNED['transformers']} and now "
                                  f"captures ({detail}): move it to \"captures\" in tests/architectures_pinned.json")


def test_the_pin_is_disjoint_and_large():
    """A regression "captures" -> "refuses" can only be seen for a type pinned as capturing: most are."""
    captures, refuses = set(PINNED["captures"]), set(PINNED["refuses"])
    assert not captures & refuses
    assert len(captures) > 100 and len(refuses) < len(captures)
    assert {"llama", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss", "mistral", "gemma3_text"} <= captures


def test_every_architecture_the_newest_engines_serve_is_in_the_matrix():
    """Each architecture SGLang 0.5.23 or vLLM 0.34.0 maps to an EAGLE-3, DFlash or DSpark capture rule, where the
    installed transformers has it, is a case of the matrix: pinned as captured, as refused in one line, or as having
    no tiny model here with the reason (transformers' own config or save fails on it)."""
    pinned = set(PINNED["captures"]) | set(PINNED["refuses"]) | set(PINNED["served_no_tiny"])
    assert set(SERVED) <= set(TYPES)
    assert not set(SERVED) - pinned, f"served and not pinned: {sorted(set(SERVED) - pinned)}"
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    expected = {"llama", "qwen3", "deepseek_v3", "deepseek_v4", "qwen3_vl", "mistral3"} & set(CONFIG_MAPPING_NAMES)
    assert len(SERVED) >= 50 and expected <= set(SERVED)  # deepseek_v4: transformers 5.25 and later
    assert {e.split("@")[0] for _, engines in SERVED.values() for e in engines} == {n for n, _ in SERVING}
    assert not set(PINNED["served_no_tiny"]) & (set(PINNED["captures"]) | set(PINNED["refuses"]))


def test_the_registry_is_read_and_large():
    """The matrix covers the registry, not a hand list (a sanity floor: transformers 5.17 has over 100)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert set(decoder_only_types()) <= set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) and len(TYPES) > 100


def _tiny_dir(model_type: str, path, tokenizer) -> str:
    model = tiny_model(model_type, TYPES[model_type])
    model.save_pretrained(path)
    tokenizer().save_pretrained(path)
    return str(path)


@pytest.mark.skipif("gpt_neox" not in TYPES, reason="transformers without GPT-NeoX")
def test_gpt_neox_dynamic_audit_gives_the_static_finding(cli, make_draft, make_tokenizer, tmp_path):
    """GPT-NeoX (Pythia: ``gpt_neox.layers``, ``final_layer_norm``) loads; SGLang has no EAGLE-3 capture for
    it, and `layers` says so with the same finding as `layers --static` (not exit 2)."""
    target = _tiny_dir("gpt_neox", tmp_path / "neox", make_tokenizer)
    draft = make_draft(target_hidden=64, nested_ids=[0, 1, 2])
    codes = {}
    for mode in ("--static", "--scan"):
        prompts = () if mode == "--static" else ("--max-prompts", 1, "--max-tokens", 8)  # --static runs none
        res = cli("-t", target, "-d", draft, mode, "--builtin-rules", "--json", "-", *prompts)
        assert res.exit_code == 1, res.output
        codes[mode] = sorted(f["code"] for f in json.loads(res.stdout)["findings"])
    assert "ENGINE_UNSUPPORTED" in codes["--static"] and codes["--static"] == codes["--scan"], codes
