"""eagle_audit/source/registry.py's ``source_request``, the one place an audit's options become a request
(weights here: the local backend, a server only compared against; no weights here: every state from the
server), and the local backend's refusal of a state the target does not have."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from eagle_audit.source import SourceRequest, open_source
from eagle_audit.errors import BadOption
from eagle_audit.source.registry import source_request, states_from
from eagle_audit.source.server import StatesServer
from eagle_audit.states import State

SERVER = SimpleNamespace(url="http://127.0.0.1:9")  # never contacted: a request only names it


def _opts(target, states_server=None):
    return SimpleNamespace(target=target, device="cpu", dtype="float32", states_server=states_server)


def test_without_a_server_the_request_is_local_with_the_device_map(tiny_targets):
    path = tiny_targets["llama"].path
    assert source_request(_opts(path)) == SourceRequest(str(path), "cpu", "float32", None)
    assert source_request(_opts(path), device_map="auto").device_map == "auto"
    # an options object without the attribute at all (train-canary's, a user's) is the same
    assert source_request(SimpleNamespace(target=path, device="cpu", dtype="auto")).server is None


def test_a_server_with_weights_here_leaves_the_states_local(tiny_targets):
    req = source_request(_opts(tiny_targets["llama"].path, SERVER), device_map="auto")
    assert req.server is None and req.options == {} and req.device_map == "auto"


def test_a_server_without_weights_here_gives_every_state(config_only_target):
    target = config_only_target("LlamaForCausalLM", 4)
    req = source_request(_opts(target, SERVER), device_map="auto")
    assert req.server == SERVER.url and req.options["states_server"] is SERVER
    assert req.options["why"] == f"`states_from='auto'`: {target} holds no weights"  # the run says why
    assert req.target == str(target) and req.device_map is None  # nothing is loaded here to split


def test_a_state_the_target_lacks_is_refused_naming_it(tiny_targets):
    src = open_source(SourceRequest(str(tiny_targets["llama"].path)))
    n = src.info.num_layers
    for state in (State(n + 1), State(3, normed=True)):
        with pytest.raises(ValueError, match=re.escape(f"{state.label()} does not exist in a target of {n} layers")):
            src.teacher_forced([[1, 2, 3]], (State(0), state))
    assert src.counts.forwards == 0  # refused before any forward
    assert src.teacher_forced([[1, 2, 3]], (State(n, normed=True),))[0].states[State(n, normed=True)].shape[0] == 3


def test_the_choice_is_the_users_and_refusals_name_it(tiny_targets, config_only_target):
    """--states-from: server takes every state from the server even beside weights (never loaded); local keeps
    them here (layers/check compare), refused where the analysis takes its states only from a server; auto
    decides by the weights and refuses a server-only analysis on a target with weights."""
    weights, bare = tiny_targets["llama"].path, config_only_target("LlamaForCausalLM", 4)
    url = "http://127.0.0.1:9"
    for use, target, server_only, want in (("server", weights, True, "server"), ("server", weights, False, "server"),
                                           ("local", bare, False, "local"), ("auto", bare, True, "server"),
                                           ("auto", weights, False, "local")):
        req = states_from(_opts(target, StatesServer(url, use=use)), server_only=server_only)
        assert ("server" if req.server is not None else "local") == want, (use, target)
        assert req.server in (None, url) and req.target == str(target)  # the one request the command opens
    req = source_request(_opts(weights, StatesServer(url, use="server")))
    assert req.server == url and req.options["why"] == "`states_from='server'` chosen"
    with pytest.raises(BadOption, match="states_from='local'.*takes every target state from the server"):
        states_from(_opts(bare, StatesServer(url, use="local")), server_only=True)
    with pytest.raises(BadOption, match="holds weights: give `states_from='server'`"):
        states_from(_opts(weights, StatesServer(url)), server_only=True)
    with pytest.raises(BadOption, match="states_from='remote'.*must be one of auto, server, local"):
        StatesServer(url, use="remote")
