"""The state-source seam (eagle_audit/source): forwards counted, memoised, hooks removed, the same states
and continuations as the capture hooks and generation it wraps, on tiny random transformers targets."""

import pytest
import torch

from eagle_audit.capture import capture_states, hooks_left
from eagle_audit.errors import BadOption
from eagle_audit.source import (BACKENDS, Backend, CannotGive, SourceRequest, SourceSpec, StateSource, as_source,
                                open_source)
from eagle_audit.source.local import open_local
from eagle_audit.source.memo import Memo
from eagle_audit.source.spec import Counts
from eagle_audit.states import State, all_states

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def source(tiny_targets):
    return open_source(SourceRequest(str(tiny_targets["llama"])))


def _seqs(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 400, (5 + 2 * i,), generator=g).tolist() for i in range(n)]


def test_spec_and_protocol(source, tiny_targets):
    t = tiny_targets["llama"]
    assert isinstance(source, StateSource)
    spec = source.spec
    assert (spec.backend, spec.num_layers, spec.hidden_size) == ("local", t.num_layers, t.hidden_size)
    assert spec.states == all_states(t.num_layers) and spec.origin == "transformers on cpu"
    assert spec.dtype == "float32" and spec.device == "cpu" and source.counts.loads == 1
    assert spec.to_json()["states"][-1] == f"B{t.num_layers}+norm"


def test_teacher_forced_equals_the_capture_hooks_and_is_memoised(tiny_targets):
    src = open_source(SourceRequest(str(tiny_targets["llama"])))
    n = src.info.num_layers
    seqs = _seqs()
    few = (State(0), State(3))
    got = src.teacher_forced(seqs, few)
    assert src.counts.forwards == len(seqs) and src.counts.memo_hits == 0
    for f, ids in zip(got, seqs):
        ref = capture_states(src.loaded, torch.tensor([ids]), few)
        assert set(f.states) == set(few) and f.next_tokens is None
        for s in few:
            assert torch.equal(f.states[s], ref[s][0])  # [L, hidden], bit-identical
    src.teacher_forced(seqs, (State(3),))  # a subset: no forward
    assert src.counts.forwards == len(seqs) and src.counts.memo_hits == len(seqs)
    deeper = src.teacher_forced(seqs[:1], (State(n, normed=True),), next_tokens=True)[0]  # more: one forward
    assert src.counts.forwards == len(seqs) + 1
    with torch.inference_mode():
        logits = src.loaded.model(input_ids=torch.tensor([seqs[0]]), use_cache=False).logits[0]
    assert torch.equal(deeper.next_tokens, logits.argmax(-1))
    assert set(src.teacher_forced(seqs[:1], few + (State(n, normed=True),))[0].states) == set(few) | {State(n, normed=True)}
    assert src.counts.forwards == len(seqs) + 1  # the merged entry holds both
    assert hooks_left(src.loaded.model) == 0


def test_reserve_makes_a_later_wider_request_free(tiny_targets):
    src = open_source(SourceRequest(str(tiny_targets["llama"])))
    n = src.info.num_layers
    src.reserve(all_states(n), next_tokens=True)
    seqs = _seqs(2, seed=1)
    src.teacher_forced(seqs, (State(2),))
    wide = src.teacher_forced(seqs, all_states(n), next_tokens=True)
    assert src.counts.forwards == 2 and src.counts.memo_hits == 2
    assert all(f.next_tokens is not None and len(f.states) == n + 2 for f in wide)


def test_continuations_equal_generation_and_run_once(source):
    from eagle_audit.source.forwards import greedy_generate_batch

    prompts = _seqs(4, seed=2)
    before = source.counts.generations
    conts, seconds = source.continuations(prompts, 6, batch=4)
    assert seconds > 0 and source.counts.generations == before + 4
    order = sorted(range(4), key=lambda i: (len(prompts[i]), i))
    ref = greedy_generate_batch(source.loaded, [prompts[i] for i in order], 6)
    assert [conts[i] for i in order] == [tuple(r) for r in ref]
    again, seconds = source.continuations(prompts[::-1], 6, batch=1)
    assert again == conts[::-1] and seconds == 0 and source.counts.generations == before + 4
    assert source.counts.generation_hits >= 4


def test_a_loaded_target_gets_one_source_and_layers_measure_runs_once(tiny_targets):
    from eagle_audit.layers.run import measure
    from eagle_audit.target import load_target

    loaded = load_target(str(tiny_targets["llama"]))
    src = as_source(loaded)
    assert as_source(loaded) is src and as_source(src) is src and src.counts.loads == 0
    seqs = _seqs(3, seed=3)
    trained = (State(0), State(2), State(5))
    first = measure(loaded, seqs, trained, trained, (0, 8), scan=True)
    assert src.counts.forwards == 3
    second = measure(loaded, seqs, trained, trained, (0, 8), scan=True)
    assert src.counts.forwards == 3 and first == second
    assert hooks_left(loaded.model) == 0


def test_draft_runtime_borrows_embedding_and_head_through_the_source(source):
    emb, head = source.embedding(), source.lm_head()
    m = source.loaded.model
    assert emb.data_ptr() == m.get_input_embeddings().weight.data_ptr()
    assert head.data_ptr() == m.get_output_embeddings().weight.data_ptr()
    assert source.weights() is source.loaded


def test_device_map_backend_on_cpu(tiny_targets, source):
    src = open_source(SourceRequest(str(tiny_targets["llama"]), device_map="cpu"))
    assert src.spec.backend == "device-map" and src.spec.origin == "transformers, device_map=cpu"
    seqs = _seqs(2, seed=4)
    states = all_states(src.info.num_layers)
    for a, b in zip(src.teacher_forced(seqs, states), source.teacher_forced(seqs, states)):
        assert all(torch.equal(a.states[s], b.states[s]) for s in states)
    assert hooks_left(src.loaded.model) == 0


def test_registry_adding_a_backend_is_one_entry(tiny_targets, monkeypatch):
    with pytest.raises(BadOption, match="unknown state source 'nope' .known: server, device-map, local"):
        open_source(SourceRequest("x", backend="nope"))
    with pytest.raises(BadOption, match="does not take this request"):
        open_source(SourceRequest("x", backend="local", server="http://127.0.0.1:1"))
    # a request with a server goes to the served backend (eagle_audit/source/server.py), the first entry
    assert next(b for b in BACKENDS.values() if b.accepts(SourceRequest("x", server="http://127.0.0.1:1"))).name == "server"
    # one entry, first in order: it takes requests that carry a server and opens the local target
    monkeypatch.setattr("eagle_audit.source.registry.BACKENDS", {
        "test-server": Backend("test-server", "a test backend", lambda r: r.server is not None, open_local),
        **BACKENDS})
    src = open_source(SourceRequest(str(tiny_targets["llama"]), server="http://127.0.0.1:1"))
    assert src.counts.loads == 1


def test_cannot_give_is_one_line_exit_2():
    spec = SourceSpec("t", "server", "SGLang server http://h:1", 4, 32, all_states(4), "bfloat16", "cuda",
                      gives=frozenset({"teacher_forced", "generate"}))
    assert not spec.can("embedding") and spec.can("generate")
    e = CannotGive(spec, "the target's embedding", "the server hands out states only", hint="name an embedding shard")
    assert e.exit_code == 2 and "\n" not in e.message
    assert e.message == "t (SGLang server http://h:1) cannot give the target's embedding: the server hands out states only"
    with pytest.raises(ValueError, match="unknown capabilities"):
        SourceSpec("t", "x", "y", 4, 32, (), "float32", "cpu", gives=frozenset({"telepathy"}))


def test_memo_bound_drops_oldest_and_counts_the_second_forward():
    counts = Counts()
    memo = Memo(counts, max_bytes=2 * 10 * 4 * 4)  # two sequences of 10 positions x 4 floats
    run = lambda ids, states, nxt: ({s: torch.zeros(len(ids), 4) for s in states}, None)  # noqa: E731
    for seq in ([1] * 10, [2] * 10, [3] * 10):
        memo.forced(run, [seq], (State(0),), False)
    assert counts.forwards == 3 and memo.held_bytes == 2 * 10 * 4 * 4
    memo.forced(run, [[3] * 10, [2] * 10], (State(0),), False)
    assert counts.forwards == 3 and counts.memo_hits == 2
    memo.forced(run, [[1] * 10], (State(0),), False)  # dropped: runs again
    assert counts.forwards == 4
