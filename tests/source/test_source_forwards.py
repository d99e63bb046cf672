"""The decode the local backends give (``StateSource.decode``, :func:`eagle_audit.source.forwards.decode_states`),
train-canary's data, on the tiny random Llama: greedy, it is the target's greedy continuation and its states are
the teacher-forced states of that text (the capture hooks on a full forward); batching keeps each row its own;
sampling is seeded; a row stops at its first EOS (kept); no hook is left behind."""

import pytest
import torch

from eagle_audit.capture import capture_states, hooks_left
from eagle_audit.source import DECODE, SourceRequest, as_source, open_source
from eagle_audit.source.forwards import eos_ids
from eagle_audit.states import State

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def source(tiny_targets):
    return open_source(SourceRequest(str(tiny_targets["llama"])))


def _prompts(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 400, (3 + 2 * i,), generator=g).tolist() for i in range(n)]


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_greedy_decode_is_the_greedy_continuation_with_its_teacher_forced_states(source):
    n = source.info.num_layers
    states = (State(0), State(3), State(n, normed=True))
    prompts = _prompts(4)
    assert source.spec.can(DECODE)
    before = source.counts.decodes
    got = source.decode(prompts, states, 7, batch=1)
    assert source.counts.decodes == before + len(prompts)
    conts, _ = source.continuations(prompts, 7, batch=1)
    for d, p, c in zip(got, prompts, conts):
        assert d.ids == tuple(p) + c and d.prompt_len == len(p)
        ref = capture_states(source.loaded, torch.tensor([list(d.ids)]), states)  # one full forward
        for s in states:
            assert d.states[s].shape == (len(d.ids) - 1, source.info.hidden_size)  # the last token is never fed
            assert d.states[s].dtype == torch.float32
            _close(d.states[s], ref[s][0, :-1])
    assert hooks_left(source.loaded.model) == 0


def test_batched_decode_keeps_each_row_its_own(source):
    prompts = _prompts(6, seed=1)
    one = source.decode(prompts, (State(2),), 6, batch=1)
    many = source.decode(prompts[::-1], (State(2),), 6, batch=4)[::-1]  # left padding, masked
    assert [d.ids for d in many] == [d.ids for d in one]
    for a, b in zip(one, many):
        _close(a.states[State(2)], b.states[State(2)])


def test_sampled_decode_is_seeded(source):
    prompts = _prompts(5, seed=2)
    a = source.decode(prompts, (State(1),), 10, batch=3, temperature=1.0, seed=5)
    b = source.decode(prompts, (State(1),), 10, batch=3, temperature=1.0, seed=5)
    assert [d.ids for d in a] == [d.ids for d in b]
    assert all(torch.equal(x.states[State(1)], y.states[State(1)]) for x, y in zip(a, b))
    other = source.decode(prompts, (State(1),), 10, batch=3, temperature=1.0, seed=6)
    greedy = source.decode(prompts, (State(1),), 10, batch=3)
    assert [d.ids for d in other] != [d.ids for d in a] and [d.ids for d in greedy] != [d.ids for d in a]


def test_a_row_stops_at_its_first_eos_kept(tiny_targets):
    from eagle_audit.target import load_target

    loaded = load_target(str(tiny_targets["llama"]))
    src = as_source(loaded)
    prompts = _prompts(4, seed=3)
    free = src.decode(prompts, (), 12, batch=4)
    stop = free[1].ids[free[1].prompt_len + 3]  # a token the target emits in row 1
    loaded.model.generation_config.eos_token_id = stop
    eos = eos_ids(loaded)
    assert stop in eos
    cut = src.decode(prompts, (State(4),), 12, batch=4)
    for f, c in zip(free, cut):
        cont = f.ids[f.prompt_len:]
        first = next((j for j, t in enumerate(cont) if t in eos), None)
        want = cont if first is None else cont[:first + 1]
        assert c.ids == f.ids[:f.prompt_len] + want and c.states[State(4)].shape[0] == len(c.ids) - 1
    assert len(cut[1].ids) <= cut[1].prompt_len + 4
