"""The canary's training data (``accept/canary.py`` ``make_data`` / ``generate_data``) asks the state source
(``StateSource.decode``) and nothing beside it: on the tiny random Llama, each sample's aux columns are the
trained states in order and its final rows the ``BN+norm`` state, both the teacher-forced states of the sample's
own text (the capture hooks on a full forward), with a zero last row; sampled copies are seeded."""

import pytest
import torch

from tests.accept.accept_tiny import tiny_prompts
from eagle_audit.accept.canary import CanaryOptions, make_data
from eagle_audit.capture import capture_states
from eagle_audit.source import as_source
from eagle_audit.states import State

pytestmark = pytest.mark.usefixtures("one_thread")


def test_make_data_is_the_sources_decode_with_its_states(tiny_target):
    n, H = tiny_target.info.num_layers, tiny_target.info.hidden_size
    states = (State(1), State(n, normed=True), State(0))  # the order asked is the order of the aux columns
    prompts = tiny_prompts(6)
    src = as_source(tiny_target)
    before = src.counts.decodes
    opts = CanaryOptions(boundaries=(1, n, 0), max_new_tokens=10, gen_batch=4, sampled_copies=1, seed=2)
    data = make_data(tiny_target, prompts, opts, states)
    assert src.counts.decodes == before + 2 * len(prompts)  # greedy, then one sampled copy: through the seam
    greedy = src.decode(prompts, states, 10, batch=4)
    sampled = src.decode(prompts, states, 10, batch=4, temperature=opts.temperature, seed=opts.seed + 1)
    final = State(n, normed=True)
    for sample, d in zip(data, greedy + sampled):
        assert sample.ids == list(d.ids) and sample.aux.shape == (len(d.ids), 3 * H)
        assert torch.equal(sample.aux[:-1], torch.cat([d.states[s] for s in states], -1))
        assert torch.equal(sample.final[:-1], d.states[final])
        assert not sample.aux[-1].any() and not sample.final[-1].any()  # the last token is never fed
        ref = capture_states(tiny_target, torch.tensor([sample.ids]), states)
        for j, s in enumerate(states):
            torch.testing.assert_close(sample.aux[:-1, j * H:(j + 1) * H], ref[s][0, :-1], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(sample.final[:-1], ref[final][0, :-1], rtol=1e-4, atol=1e-4)
    assert [s.ids for s in data[:6]] != [s.ids for s in data[6:]]  # the sampled copy is other text
