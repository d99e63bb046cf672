"""The Python API: what the commands do, callable from a notebook or a CI script without the CLI.

    from eagle_audit import State, accept_rate, audit_layers, capture

    result = audit_layers("./Llama-3.1-8B-Instruct", "./my-eagle3", trainer="specforge", engine="sglang")
    result.verdict                     # "match" or "mismatch"
    [f.code for f in result.findings]  # finding codes (docs/findings.md)
    result.to_json()                   # exactly what `eagle-audit layers --json` writes

Inputs are typed: paths as ``str`` or :class:`os.PathLike` (a hub id as ``str``), trained states as
:class:`State` objects or boundary ints (``[0, 3, 31]``, ``[State(0), State(32, normed=True)]``), ids as
ints. Text forms such as ``"0,3,31"`` are the CLI's and are refused here. Errors are
:class:`eagle_audit.errors.AuditError` (a problem with the inputs; ``str(e)`` names the parameter, as the CLI's
one line does); a value of the wrong type is :class:`eagle_audit.errors.BadArgument`, also a ``TypeError``. The results are the frozen objects the CLI renders and writes
as JSON: :class:`eagle_audit.layers.result.LayersResult` and :class:`eagle_audit.accept.run.AcceptResult`.
``target=None`` and ``draft=None`` mean the embedded demo (SmolLM2-135M-Instruct and the demo draft).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Sequence

from .accept.limits import MAX_NEW_TOKENS, MAX_NUM_STEPS, MAX_TOPK
from .errors import BadArgument, OutOfRange, param, shown
from .states import State

if TYPE_CHECKING:
    import torch

    from .accept.run import AcceptResult
    from .check.result import CheckResult
    from .fingerprint.result import FingerprintResult
    from .layers.result import LayersResult
    from .engines.options import Server
    from .target import LoadedTarget

PathLike = str | os.PathLike
Progress = Callable[[int, int], None]


#: What each annotation of a public function accepts (:func:`_checked`): a type check and the words of its message.
#: Annotations not listed here (sequences, a Server, a loaded target) are checked by the function itself.
_KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an int"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "str": (lambda v: isinstance(v, str), "a str"),
    "PathLike": (lambda v: isinstance(v, (str, os.PathLike)), "a str or os.PathLike"),
    "Progress": (callable, "a callable progress(done, total)"),
}


#: The ranges of the numeric parameters, as the CLI's options bound them (cli/options.py): (low, high or None).
_RANGES = {"max_prompts": (1, None), "max_tokens": (1, None), "gen_batch": (1, None), "num_steps": (1, MAX_NUM_STEPS),
           "topk": (1, MAX_TOPK), "num_draft_tokens": (2, None), "max_new_tokens": (2, MAX_NEW_TOKENS),
           "ttt_steps": (1, 8), "more_prompts": (0, None), "confirm_prompts": (0, None), "tolerance": (0, None),
           "fail_under": (0, None)}


def _in_range(name: str, value) -> None:
    lo, hi = _RANGES[name]
    if value < lo or (hi is not None and value > hi) or value != value:  # NaN is in no range
        kind = "an integer" if isinstance(value, int) else "a number"
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise OutOfRange(f"{param(name)}: must be {kind} {bound}, got {shown(value)}")


def _checked(fn):
    """``fn`` with every argument whose annotation :data:`_KINDS` knows checked before it runs: a wrong type (a
    string where a boolean belongs, None where the annotation does not allow it, a number where a callable does)
    is :class:`BadArgument`, one line naming the parameter, as the CLI's option check words it."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    rules = {}
    for name, p in sig.parameters.items():
        parts = [s.strip() for s in str(p.annotation).split("|")]
        optional = "None" in parts
        kinds = [k for k in parts if k != "None"]
        if len(kinds) == 1 and kinds[0] in _KINDS:
            rules[name] = (*_KINDS[kinds[0]], optional)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise BadArgument(f"{fn.__name__}(): {e}") from None
        for name, value in bound.arguments.items():
            if name not in rules:
                continue
            ok, words, optional = rules[name]
            if value is None and optional:
                continue
            if not ok(value):
                raise BadArgument(f"{param(name)}: expected {words}, got {type(value).__name__}")
            if name in _RANGES and value is not None:
                _in_range(name, value)
        return fn(*args, **kwargs)

    return call


def _path(value, name: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise BadArgument(f"{param(name)}: expected a str or os.PathLike, got {type(value).__name__}")


def _texts(**values) -> None:
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            raise BadArgument(f"{param(name)}: expected a str, got {type(value).__name__}")


def _defaults(target: PathLike | None, draft: PathLike | None) -> tuple[str, str]:
    from .demo import demo_draft
    from .target import default_target

    return (default_target() if target is None else _path(target, "target"),
            demo_draft() if draft is None else _path(draft, "draft"))


def _states(values, name: str) -> tuple[State | int, ...] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise BadArgument(f"{param(name)}: expected a sequence of State objects or ints such as [0, 3, 31], "
                          f"got {type(values).__name__}")
    return tuple(values)


def _optional_path(value, name: str) -> str | None:
    return None if value is None else _path(value, name)


def _inputs(target, draft, engine, trainer, trained_boundaries, trained_ids, prompts) -> dict:
    """The typed inputs every audit takes (:class:`eagle_audit.inputs.AuditInputs`), checked and converted,
    with the embedded demo where ``target`` / ``draft`` are None."""
    target, draft = _defaults(target, draft)
    return dict(target=target, draft=draft, engine=_optional_path(engine, "engine"), trainer=_optional_path(trainer, "trainer"),
                trained_boundaries=_states(trained_boundaries, "trained_boundaries"),
                trained_ids=_ints(trained_ids, "trained_ids"), prompts=_optional_path(prompts, "prompts"))


def _ints(values, name: str) -> tuple[int, ...] | None:
    if values is None:
        return None
    if (isinstance(values, (str, bytes)) or not isinstance(values, Sequence)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)):
        raise BadArgument(f"{param(name)}: expected a sequence of ints such as [1, 14, 26], got {shown(values)}")
    return tuple(values)


def _id_lists(values, name: str) -> tuple[tuple[int, ...], ...] | None:
    """Token ids of several prompts: a sequence of sequences of ints (None: not given)."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise BadArgument(f"{param(name)}: expected a sequence of token-id sequences such as [[1, 2], [3]], "
                          f"got {type(values).__name__}")
    return tuple(_ints(p, name) for p in values)


@_checked
def audit_layers(target: PathLike | None = None, draft: PathLike | None = None, *, engine: PathLike | None = None,
                 trainer: PathLike | None = None, trained_boundaries: Sequence[State | int] | None = None,
                 trained_ids: Sequence[int] | None = None, prompts: PathLike | None = None, max_prompts: int = 8,
                 max_tokens: int = 256, device: str = "cpu", dtype: str = "auto", device_map: str | None = None,
                 static: bool = False, scan: bool = True, use_installed_engine: bool = True,
                 states_server: str | Server | None = None, progress: Progress | None = None,
                 server: str | Server | None = None) -> LayersResult:
    """``eagle-audit layers``: the trained and the served wiring slot by slot, findings and the fix.

    ``states_server``: a running SGLang / vLLM server handing out states (a URL, or a
    :class:`eagle_audit.engines.options.Server` with its kind, key, deadlines and vLLM folder; ``server``: its
    earlier, deprecated name): with the
    target's weights local each served state is compared with the local capture; with a target directory of
    config and tokenizer only, every state comes from the server.

    ``engine`` and ``trainer`` are built-in names (docs/conventions.md) or convention files; ``engine`` also
    ``NAME@RELEASE`` or a range ``NAME@LOW..HIGH`` (docs/releases.md); None (no engine named): SGLang's slots, and
    ``result.engines`` holds every other engine's verdict at its newest built-in release (the verdict is the worst);
    ``trained_boundaries`` names the trained states directly; ``trained_ids`` are ids passed to the trainer
    at run time, in its convention; ``static`` checks configs only (no weights loaded, no cosines)."""
    from .layers.run import LayersOptions, run_layers

    _texts(device=device, dtype=dtype, device_map=device_map)
    opts = LayersOptions(**_inputs(target, draft, engine, trainer, trained_boundaries, trained_ids, prompts),
                         max_prompts=max_prompts, max_tokens=max_tokens, device=device, dtype=dtype,
                         device_map=device_map, static=static, scan=scan, use_installed_engine=use_installed_engine,
                         states_server=_states_server(server, states_server))
    return run_layers(opts, progress=progress)


def _server(server, name: str = "states_server", **reach):
    """A :class:`~eagle_audit.engines.options.Server` from ``server`` (a URL or a Server; None: none), ``reach``
    (the earlier flat ``server_kind`` / ``server_api_key``, deprecated) applied to a URL."""
    from .engines.options import Server

    if server is None:
        return None
    if isinstance(server, Server):
        return server
    if not isinstance(server, str):
        raise BadArgument(f"{param(name)}: expected a URL or an eagle_audit.engines.options.Server, got {shown(server)}")
    return Server(server, **{k: v for k, v in reach.items() if v is not None})


def _states_server(server, states_server, **reach):
    """The states server: ``states_server``, or ``server``, its earlier keyword here (one release, with a
    DeprecationWarning), as :func:`_server` builds it (an error names the keyword given)."""
    if server is None:
        return _server(states_server, "states_server", **reach)
    import warnings

    if states_server is not None:
        raise BadArgument(f"{param('server')} and {param('states_server')} name the same server: give "
                          f"{param('states_server')} only")
    built = _server(server, "server", **reach)
    warnings.warn("server= is deprecated here: use states_server= (server= names the server under test in "
                  "accept_rate only)", DeprecationWarning, stacklevel=4)
    return built


@_checked
def accept_rate(target: PathLike | None = None, draft: PathLike | None = None, *, engine: PathLike = "sglang",
                trainer: PathLike | None = None, trained_boundaries: Sequence[State | int] | None = None,
                trained_ids: Sequence[int] | None = None, prompts: PathLike | None = None,
                prompt_ids: Sequence[Sequence[int]] | None = None, max_prompts: int = 8, max_tokens: int = 256,
                num_steps: int = 3, topk: int = 1, num_draft_tokens: int | None = None, max_new_tokens: int = 64,
                tolerance: float = 0.1, live: bool = False, server: str | Server | None = None,
                server_kind: str | None = None, server_api_key: str | None = None, gen_batch: int = 16, device: str = "cpu", dtype: str = "auto",
                device_map: str | None = None, use_installed_engine: bool = True,
                states_server: str | Server | None = None, progress: Progress | None = None) -> AcceptResult:
    """``eagle-audit accept-rate``: simulated accept length under the trained and the served wiring, and
    with each mis-wired slot corrected alone (docs/accept-rate.md). ``prompt_ids`` gives token ids directly
    instead of ``prompts`` (for targets without a tokenizer). ``states_server``: a reference server (a URL or
    a :class:`~eagle_audit.engines.options.Server`) giving every target state and the greedy
    continuation, for a ``target`` directory without weights; ``server`` (a URL or a Server) instead reads the
    accept length of a server that serves the draft (``server_kind`` / ``server_api_key`` apply to a URL: the
    earlier flat form, kept; a Server carries them)."""
    from .accept.run import AcceptOptions, run_accept

    _texts(device=device, dtype=dtype, device_map=device_map, server_kind=server_kind)
    inputs = _inputs(target, draft, engine, trainer, trained_boundaries, trained_ids, prompts)
    under_test = _server(server, "server", kind=server_kind, api_key=server_api_key)
    ids = _id_lists(prompt_ids, "prompt_ids")
    opts = AcceptOptions(**inputs, prompt_ids=ids,
                         max_prompts=max_prompts, max_tokens=max_tokens, num_steps=num_steps, topk=topk,
                         num_draft_tokens=num_draft_tokens, max_new_tokens=max_new_tokens, tolerance=tolerance,
                         live=live, server=under_test, gen_batch=gen_batch, device=device, dtype=dtype, device_map=device_map,
                         use_installed_engine=use_installed_engine, states_server=_server(states_server))
    return run_accept(opts, progress=progress)


@_checked
def check(target: PathLike | None = None, draft: PathLike | None = None, *, engine: PathLike = "sglang",
          trainer: PathLike | None = None, trained_boundaries: Sequence[State | int] | None = None,
          trained_ids: Sequence[int] | None = None, prompts: PathLike | None = None, max_prompts: int = 8,
          max_tokens: int = 256, static: bool = False, fingerprint: bool = False, num_steps: int = 3, topk: int = 1,
          num_draft_tokens: int | None = None, max_new_tokens: int = 64, tolerance: float = 0.1, gen_batch: int = 16,
          fail_under: float | None = None, fail_under_positions: Sequence[float] = (), device: str = "cpu",
          dtype: str = "auto", device_map: str | None = None, use_installed_engine: bool = True,
          states_server: str | Server | None = None, server_kind: str | None = None,
          server_api_key: str | None = None, hidden_states_dir: PathLike | None = None,
          progress: Progress | None = None, server: str | Server | None = None) -> CheckResult:
    """``eagle-audit check``: the static audit, then (weights present) the captured comparison, the
    fingerprint where the trained wiring is assumed (always with ``fingerprint``) and the accept-rate cost,
    on one loaded target (docs/check.md). ``result.verdict`` says what is wrong, which stage showed it, what
    it costs and the fix; ``result.verdict.gate`` lists the ``fail_under`` thresholds not met.
    ``states_server``: a capture-only server launched with the serving line for this draft (a URL or a
    :class:`~eagle_audit.engines.options.Server`; the served stage; vLLM also needs ``hidden_states_dir``; with no
    weights here, or the Server's ``use="server"``, every state comes from it). ``server``: its earlier,
    deprecated name."""
    from .check.run import CheckOptions, run_check

    _texts(device=device, dtype=dtype, device_map=device_map, server_kind=server_kind)
    inputs = _inputs(target, draft, engine, trainer, trained_boundaries, trained_ids, prompts)
    if isinstance(fail_under_positions, (str, bytes)) or not isinstance(fail_under_positions, Sequence):
        raise BadArgument(f"{param('fail_under_positions')}: expected a sequence of numbers such as [0.4, 0.2, 0.1], "
                          f"got {type(fail_under_positions).__name__}")
    opts = CheckOptions(**inputs, max_prompts=max_prompts, max_tokens=max_tokens, static=static, fingerprint=fingerprint, num_steps=num_steps,
                        topk=topk, num_draft_tokens=num_draft_tokens, max_new_tokens=max_new_tokens,
                        tolerance=tolerance, gen_batch=gen_batch, fail_under=fail_under,
                        fail_under_positions=tuple(fail_under_positions), device=device, dtype=dtype,
                        device_map=device_map, use_installed_engine=use_installed_engine,
                        states_server=_states_server(server, states_server,
                                              kind=server_kind, api_key=server_api_key,
                                              hidden_states_dir=_optional_path(hidden_states_dir, "hidden_states_dir")))
    return run_check(opts, progress=progress)


@_checked
def load_target(target: PathLike | None = None, *, device: str = "cpu", dtype: str = "auto",
                device_map: str | None = None) -> LoadedTarget:
    """Load a target once (to capture from it several times): a local HF directory, a hub id already in
    the local cache, or a ``.gguf`` file; None: the embedded SmolLM2-135M-Instruct."""
    from .target import default_target, load_target as load

    return load(default_target() if target is None else _path(target, "target"), device, dtype, device_map)


@_checked
def capture(target: PathLike | LoadedTarget | None, inputs: str | Sequence[int],
            states: Sequence[State | int] | None = None, *, device: str = "cpu",
            dtype: str = "auto") -> dict[State, torch.Tensor]:
    """The target's hidden states for one input: ``{State: tensor [tokens, hidden]}``.

    ``target`` is a path or hub id (loaded here with ``device``/``dtype``) or a target returned by
    :func:`load_target`; ``inputs`` is a text (tokenized as is, no chat template) or token ids; ``states``
    are :class:`State` objects or boundary ints (default: every state, ``B0`` .. ``BN`` and ``BN+norm``).
    Tensors are detached, in the target's dtype, on its device. ``B0`` is the embedding output, ``Bk`` the
    residual stream entering layer k, ``BN`` the last layer's output before the final norm
    (docs/coordinate.md)."""
    import torch

    from .capture import capture_states
    from .errors import AuditError, param
    from .states import all_states, as_states

    asked = _states(states, "states")  # the types first: nothing is loaded for a call that cannot run
    if not isinstance(inputs, (str, Sequence)):
        raise BadArgument(f"{param('inputs')}: expected a text or a sequence of token ids, got {type(inputs).__name__}")
    if not isinstance(inputs, str):
        _ints(inputs, "inputs")
    loaded = target if hasattr(target, "stack") and hasattr(target, "info") else load_target(
        target, device=device, dtype=dtype)
    n = loaded.info.num_layers
    wanted = all_states(n) if asked is None else as_states(asked, n, param("states"))
    if isinstance(inputs, str):
        if loaded.tokenizer is None:
            raise AuditError(f"{param('inputs')}: the target has no tokenizer; give token ids")
        ids = loaded.tokenizer(inputs, add_special_tokens=False)["input_ids"]
    else:
        ids = list(_ints(inputs, "inputs"))
    if not ids:
        raise AuditError(f"{param('inputs')}: no tokens")
    vocab = loaded.info.vocab_size
    bad = [i for i in ids if i < 0 or (vocab and i >= vocab)]
    if bad:
        raise OutOfRange(f"{param('inputs')}: token id {bad[0]} is outside the target's vocabulary "
                         f"(0..{vocab - 1})" if vocab else f"{param('inputs')}: token id {bad[0]} is negative")
    with torch.inference_mode():
        caps = capture_states(loaded, torch.tensor([ids]), wanted)
    return {s: caps[s][0] for s in wanted}


@_checked
def fingerprint(target: PathLike | None = None, draft: PathLike | None = None, *, engine: PathLike = "sglang",
                trainer: PathLike | None = None, prompts: PathLike | None = None,
                prompt_ids: Sequence[Sequence[int]] | None = None, max_prompts: int = 8, max_tokens: int = 256,
                max_new_tokens: int = 64, device: str = "cpu", dtype: str = "auto", use_installed_engine: bool = True,
                states_server: str | Server | None = None, ttt_steps: int | None = None,
                more_prompts: int | None = None, confirm_prompts: int | None = None,
                confirm_prompt_ids: Sequence[Sequence[int]] | None = None,
                server: str | Server | None = None) -> FingerprintResult:
    """``eagle-audit fingerprint``: which wiring the draft's weights were trained on (docs/fingerprint.md).
    ``target=None`` / ``draft=None``: the embedded demo. ``states_server``: a reference SGLang or vLLM server (URL or
    :class:`~eagle_audit.engines.options.Server`; ``server``: its earlier, deprecated name) giving every target
    state and the argmax at every position,
    for a ``target`` directory without weights; ``ttt_steps`` None: 3 on CUDA, 1 on the CPU; ``more_prompts`` None:
    the CLI's default second-round budget; ``confirm_prompts`` None: the CLI's default confirmation (prompts after
    the search's that judge its pick again; with ``prompt_ids``, ``confirm_prompt_ids`` gives them)."""
    from .fingerprint.defaults import CONFIRM_PROMPTS, MORE_PROMPTS
    from .fingerprint.api import fingerprint as run

    inputs = _inputs(target, draft, engine, trainer, None, None, prompts)
    _texts(device=device, dtype=dtype)
    ids, confirm_ids = _id_lists(prompt_ids, "prompt_ids"), _id_lists(confirm_prompt_ids, "confirm_prompt_ids")
    return run(inputs["target"], inputs["draft"], engine=inputs["engine"], trainer=inputs["trainer"],
               prompts=inputs["prompts"], prompt_ids=ids, max_prompts=max_prompts, max_tokens=max_tokens,
               max_new_tokens=max_new_tokens, device=device, dtype=dtype, use_installed_engine=use_installed_engine,
               states_server=_states_server(server, states_server), ttt_steps=ttt_steps,
               more_prompts=MORE_PROMPTS if more_prompts is None else more_prompts,
               confirm_prompts=CONFIRM_PROMPTS if confirm_prompts is None else confirm_prompts,
               confirm_prompt_ids=confirm_ids)


@_checked
def write_fixed_config(result: LayersResult, dest: PathLike, *, draft: PathLike | None = None,
                       weights: str = "link") -> str:
    """Write the draft with ``result.fix`` applied into ``dest``, as ``eagle-audit layers --write-fixed-config`` does
    (one writer: :func:`eagle_audit.layers.fixed_copy.write_fixed_copy`): ``config.json`` patched, every other file
    linked, ``dest`` absent, empty, or a copy eagle-audit wrote before; the draft itself is never modified. ``draft``:
    the draft directory (default: the one ``result`` audited). ``weights``: ``"link"`` (symbolic links by a relative
    path: move the copy together with the draft) or ``"copy"`` (the files: the copy travels alone). The fix was
    proven before it was offered: the copy, audited again with the same engine release and trainer, is a match. Returns ``dest``. A result without a fix
    (a match) or whose fix is not possible raises :class:`eagle_audit.errors.AuditError`, with why."""
    from .errors import AuditError
    from .layers.fixed_copy import WEIGHTS, write_fixed_copy
    from .layers.result import LayersResult as Result

    if not isinstance(result, Result):
        raise BadArgument(f"{param('result')}: expected the LayersResult of audit_layers, got {type(result).__name__}")
    out = _path(dest, "dest")
    if result.fix is None:
        raise AuditError(f"{param('result')}: nothing to fix: the wiring matches (verdict {result.verdict})")
    source = _path(draft, "draft") if draft is not None else str(result.draft["path"])
    if weights not in WEIGHTS:
        raise BadArgument(f"{param('weights')}: one of {', '.join(map(repr, WEIGHTS))}, got {shown(weights)}")
    write_fixed_copy(source, out, result.fix, param("dest"), weights)
    return out
