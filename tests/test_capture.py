"""Scoped capture hooks against transformers' own ``output_hidden_states``.

Where the two coincide they must be bit-identical: boundary k (0 <= k < N) is HF ``hidden_states[k]``
and the post-norm state is HF ``hidden_states[N]``. Boundary N (pre-norm) is what engines capture for
id N, and must *differ* from HF ``hidden_states[N]``, which transformers overwrites with the post-norm
state.
"""

import pytest
import torch

from eagle_audit.capture import capture, capture_states, hooks_left, run_forward
from eagle_audit.states import State, all_states
from eagle_audit.target import load_target

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(request):
    """key -> LoadedTarget, loaded once per module."""
    cache = {}

    def get(key):
        if key not in cache:
            if key == "smollm2":
                cache[key] = request.getfixturevalue("smollm2")
            else:
                cache[key] = load_target(str(request.getfixturevalue("tiny_targets")[key]))
        return cache[key]

    return get


def _ids(target, batch=2, pos=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, min(target.info.vocab_size, 400), (batch, pos), generator=g)


@torch.inference_mode()
def _hf_hidden_states(target, ids):
    return target.model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states


class _Counter:
    """Counts calls of a module (a forward hook of our own, removed by the test)."""

    def __init__(self, module):
        self.calls = 0
        self.handle = module.register_forward_hook(self)

    def __call__(self, *_):
        self.calls += 1


def test_capture_equals_hf_hidden_states_where_they_coincide(loaded, capture_key):
    target = loaded(capture_key)
    n = target.info.num_layers
    ids = _ids(target)
    caps = capture_states(target, ids, all_states(n))
    hs = _hf_hidden_states(target, ids)
    assert len(hs) == n + 1
    for k in range(n):
        assert caps[State(k)].shape == (2, 9, target.info.hidden_size)
        assert torch.equal(caps[State(k)], hs[k]), f"boundary {k}"
    assert torch.equal(caps[State(n, normed=True)], hs[n])
    # HF's last entry is post-norm: the pre-norm boundary N is a different tensor
    assert not torch.allclose(caps[State(n)], hs[n], atol=1e-3)
    assert all(not t.requires_grad for t in caps.values())


def test_capture_stops_right_after_the_deepest_needed_layer(loaded, arch_key):
    target = loaded(arch_key)
    layers, n = target.stack.layers, target.info.num_layers
    b = 3 if n > 4 else 2
    ran_before, ran_at = _Counter(layers[b - 1]), _Counter(layers[b])
    try:
        caps = capture_states(target, _ids(target), [State(b)])
        assert (ran_before.calls, ran_at.calls) == (1, 0)
        assert list(caps) == [State(b)]
        assert torch.equal(caps[State(b)], _hf_hidden_states(target, _ids(target))[b])
        ran_before.calls = ran_at.calls = 0
        capture_states(target, _ids(target), [State(b)], stop_early=False)
        assert (ran_before.calls, ran_at.calls) == (1, 1)
    finally:
        ran_before.handle.remove()
        ran_at.handle.remove()


def test_capturing_the_embedding_runs_no_layer(loaded):
    target = loaded("llama")
    first = _Counter(target.stack.layers[0])
    try:
        caps = capture_states(target, _ids(target), [State(0)])
    finally:
        first.handle.remove()
    assert first.calls == 0
    assert torch.equal(caps[State(0)], target.model.get_input_embeddings()(_ids(target)))


def test_capturing_the_post_norm_state_skips_the_lm_head(loaded):
    target = loaded("deepseek_v3")
    head = _Counter(target.model.lm_head)
    norm = _Counter(target.stack.final_norm)
    try:
        capture_states(target, _ids(target), [State(5), State(61, normed=True)])
    finally:
        head.handle.remove()
        norm.handle.remove()
    assert (norm.calls, head.calls) == (1, 0)


def _warm(target):
    """transformers installs its own output-capturing hooks on first use: install them before counting."""
    with torch.inference_mode():
        target.model(input_ids=_ids(target), use_cache=False)
        _hf_hidden_states(target, _ids(target))
    return hooks_left(target.model)


def test_no_hook_is_left_after_capture(loaded, arch_key):
    target = loaded(arch_key)
    before = _warm(target)
    n = target.info.num_layers
    capture_states(target, _ids(target), all_states(n))
    assert hooks_left(target.model) == before
    capture_states(target, _ids(target), [State(1)])  # early stop
    assert hooks_left(target.model) == before


def test_no_hook_is_left_when_the_forward_raises(loaded):
    target = loaded("llama")
    before = _warm(target)

    def boom(*_):
        raise RuntimeError("boom in layer 1")

    handle = target.stack.layers[1].register_forward_hook(boom)
    try:
        with_boom = hooks_left(target.model)
        assert with_boom == before + 1
        with pytest.raises(RuntimeError, match="boom in layer 1"):
            capture_states(target, _ids(target), [State(0), State(4), State(8, normed=True)])
        assert hooks_left(target.model) == with_boom
    finally:
        handle.remove()
    # an error in the caller's own code inside the block, and bad input ids, also clean up
    with pytest.raises(KeyError):
        with capture(target.stack, [State(2)]) as store:
            assert hooks_left(target.model) == before + 1
            raise KeyError("caller")
    assert hooks_left(target.model) == before
    with pytest.raises(IndexError):
        capture_states(target, torch.tensor([[10**6]]), [State(2)])
    assert hooks_left(target.model) == before
    assert store.tensors == {}
    # and the model still works normally afterwards
    caps = capture_states(target, _ids(target), [State(3)])
    assert torch.equal(caps[State(3)], _hf_hidden_states(target, _ids(target))[3])


def test_capture_context_manager_and_run_forward(loaded):
    target = loaded("qwen3")
    with torch.inference_mode(), capture(target.stack, [State(2), State(2)]) as store:
        run_forward(target.model, input_ids=_ids(target), use_cache=False)
    assert list(store.tensors) == [State(2)]
    assert State(2) in store and State(1) not in store
    assert store[State(2)].shape == (2, 9, 32)


def test_states_outside_the_target_are_rejected(loaded):
    target = loaded("qwen3")
    before = hooks_left(target.model)
    for bad in (State(5), State(2, normed=True)):
        with pytest.raises(ValueError, match="does not exist in a target of 4 layers"):
            capture_states(target, _ids(target), [bad])
    assert hooks_left(target.model) == before


def test_capture_keeps_the_model_dtype(tiny_targets):
    target = load_target(str(tiny_targets["qwen3"]), dtype="bfloat16")
    caps = capture_states(target, _ids(target), [State(0), State(4), State(4, normed=True)])
    assert {t.dtype for t in caps.values()} == {torch.bfloat16}
