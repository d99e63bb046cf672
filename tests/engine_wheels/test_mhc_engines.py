"""A hyper-connection target's captured views against vLLM 0.34.0's own mHC code, run from its wheel on CPU.

vLLM's DeepSeek-V4 models (``vllm/models/deepseek_v4/{nvidia,cpu}/model.py`` ``DeepseekV4Model.forward``) feed
EAGLE-3 / DSpark drafts, at ``idx + 1 in aux_hidden_state_layers``, ``mhc_post(x, residual, post_mix,
res_mix).mean(dim=1)``: layer idx's streams rebuilt from its FFN output and the mean taken over the streams.
``vllm/model_executor/kernels/mhc/torch.py`` holds the eager reference of both mHC halves (``mhc_post_torch``,
``mhc_pre_torch``), which the NVIDIA (TileLang), CPU (C++) and ROCm kernels are tested against upstream; it is
compiled here out of the wheel and fed the tiny DeepSeek-V4 target's own weights and layer internals.
"""

import pytest
import torch

from eagle_audit.capture import capture_states
from eagle_audit.states import MIX, State, all_states, stream_states
from eagle_audit.target import load_target
from tests import wheels
from tests.hyper import save_tiny_v4

VLLM_MHC_VERSION = "0.34.0"
TORCH_REF = "vllm/model_executor/kernels/mhc/torch.py"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vllm_mhc_wheel():
    return wheels.fetch_wheel("vllm", VLLM_MHC_VERSION)


@pytest.fixture(scope="module")
def v4_dir(tmp_path_factory):
    return save_tiny_v4(tmp_path_factory.mktemp("v4") / "v4", layers=4, streams=4)


def _internals(target, ids):
    """Per layer: the FFN hyper-connection's input streams (the residual after attention), its post / comb
    weights, and the FFN output: what vLLM's layer hands ``mhc_post`` ([batch, tokens, ...] as transformers
    keeps them)."""
    got, handles = {}, []
    for i, layer in enumerate(target.stack.layers):
        handles.append(layer.ffn_hc.register_forward_hook(
            lambda m, a, out, i=i: got.setdefault(i, {}).update(residual=a[0], post=out[0], comb=out[1])))
        handles.append(layer.mlp.register_forward_hook(lambda m, a, out, i=i: got.setdefault(i, {}).update(x=out)))
    try:
        with torch.inference_mode():
            target.model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return got


def _tokens(t, hc, h):  # vLLM's layout: [tokens, streams, hidden]
    return t.reshape(-1, hc, h)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vllm_aux_state_is_the_mean_boundary(vllm_mhc_wheel, v4_dir, dtype):
    src = wheels.WheelSource(vllm_mhc_wheel)
    mhc_post = src.function(TORCH_REF, "mhc_post_torch", {"torch": torch})
    target = load_target(str(v4_dir), dtype=dtype)
    n, hc, h = 4, 4, 32
    ids = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(0))
    caps = capture_states(target, ids, all_states(n) + stream_states(n, hc))
    inner = _internals(target, ids)
    worst = 0.0
    for idx in range(n):
        d = inner[idx]
        recon = mhc_post(d["x"].reshape(-1, h), _tokens(d["residual"], hc, h),
                         _tokens(d["post"], hc, 1), d["comb"].reshape(-1, hc, hc))  # [tokens, streams, hidden]
        aux = recon.mean(dim=1).reshape(2, 9, h)  # what vLLM appends for aux layer idx + 1
        ours = caps[State(idx + 1)]
        assert aux.dtype == ours.dtype
        # vLLM rebuilds the streams in float32 and rounds once; transformers mixes in the model's dtype
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == "float32" else dict(atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(aux, ours, **tol)
        worst = max(worst, (aux.float() - ours.float()).abs().max().item())
        # on the same streams, vLLM's mean is ours bit for bit
        streams = torch.stack([caps[State(idx + 1, stream=f"s{i}")] for i in range(hc)], dim=2)
        assert torch.equal(_tokens(streams, hc, h).mean(dim=1).reshape(2, 9, h), ours)
    print(f"vLLM {VLLM_MHC_VERSION} mhc_post_torch mean vs captured B1..B{n} ({dtype}): max |diff| {worst:.3g}")


def test_vllm_layer_input_is_the_mixed_input(vllm_mhc_wheel, v4_dir):
    """``mhc_pre_torch`` (bfloat16 streams, float32 weights, as vLLM runs it) collapses boundary k's streams into
    layer k's input: the ``Bk.mix`` view, from the same ``attn_hc`` weights."""
    src = wheels.WheelSource(vllm_mhc_wheel)
    mhc_pre = src.function(TORCH_REF, "mhc_pre_torch", {"torch": torch})
    target = load_target(str(v4_dir), dtype="bfloat16")
    n, hc, h = 4, 4, 32
    ids = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(1))
    caps = capture_states(target, ids, stream_states(n, hc))
    cfg = target.model.config
    worst = 0.0
    for k in range(n):
        hcm = target.stack.layers[k].attn_hc
        streams = torch.stack([caps[State(k, stream=f"s{i}")] for i in range(hc)], dim=2)
        _, _, layer_input = mhc_pre(_tokens(streams, hc, h), hcm.fn.data, hcm.scale.data, hcm.base.data,
                                    cfg.rms_norm_eps, cfg.hc_eps, cfg.hc_eps, 2.0, cfg.hc_sinkhorn_iters)
        ours = caps[State(k, stream=MIX)]
        torch.testing.assert_close(layer_input.reshape(2, 9, h), ours, atol=2e-2, rtol=2e-2)
        worst = max(worst, (layer_input.reshape(2, 9, h).float() - ours.float()).abs().max().item())
    print(f"vLLM {VLLM_MHC_VERSION} mhc_pre_torch layer input vs captured B0..B{n - 1}.mix (bfloat16): "
          f"max |diff| {worst:.3g}")
