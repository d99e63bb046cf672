"""The engines eagle-audit reads from a running server, by name: what each engine's folder
(``engines/<engine>/``: ``wire.py`` its HTTP API, ``acceptance.py`` its accept-length reading, ``states.py``
its states reader, ``launch.py`` its launch lines) gives, behind one :class:`Engine` each. A new engine is a
new folder and one entry of :data:`ENGINES` (its source prober, if any, is ``probe/<engine>.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import BadOption, param
from .http import DEFAULT_TIMEOUT, Clock, Http
from .launch import Capture, Launch, TargetShape
from .options import WIRES, Server, detect, resolve_key
from .reading import ServerReading
from .sglang import acceptance as sglang_acceptance, launch as sglang_launch, states as sglang_states, wire as sglang_wire
from .states import ServedStates
from .vllm import acceptance as vllm_acceptance, launch as vllm_launch, states as vllm_states, wire as vllm_wire


@dataclass(frozen=True)
class Engine:
    name: str
    read_acceptance: Callable[..., ServerReading]  # (http, prompts, max_new, expected, progress)
    read_states: Callable[..., tuple[ServedStates, ...]]
    server_capture: Callable[[Server, TargetShape, str | None], Capture]
    serving: Callable[..., Launch]  # (draft config, target shape, storage, conv) -> the serving line
    reference: Callable[..., Launch]  # (target shape, wanted states, storage, conv) -> the reference line
    states_on_disk: bool  # the server writes the states to its disk (read from hidden_states_dir)
    #: (target, draft, num_steps, variant) -> the line serving the draft with speculative decoding
    speculative: Callable[..., Launch] = None  # type: ignore[assignment]
    #: (drafting the server reports, num_steps, topk, num_draft_tokens, block=the draft drafts a block) -> a note
    #: where they differ, else None
    drafting_differs: Callable[..., str | None] = lambda drafting, *settings, block=False: None
    #: its accept length counts each request's last verify uncut (past max_tokens), where a simulation cuts it
    last_verify_uncut: bool = False
    #: the engine conventions (probes/*.json names) whose rules this engine runs: its lines are printed per variant
    variants: tuple[str, ...] = ()
    wire: object = None  # engines/<engine>/wire.py (NAME, PROBE_PATH, KEY_ENV)


ENGINES = {
    "sglang": Engine("sglang", sglang_acceptance.read_acceptance, sglang_states.read_sglang_states,
                     sglang_states.server_capture,
                     lambda draft, shape, storage=None, conv=None: sglang_launch.sglang_serving(draft, shape, conv=conv),
                     lambda shape, wanted=None, storage=None, conv=None: sglang_launch.sglang_reference(shape, wanted,
                                                                                                  conv=conv),
                     states_on_disk=False,
                     speculative=lambda target, draft, steps, variant: sglang_launch.sglang_speculative(target, draft, steps),
                     drafting_differs=sglang_acceptance.drafting_differs, variants=("sglang",), wire=sglang_wire),
    "vllm": Engine("vllm", vllm_acceptance.read_acceptance, vllm_states.read_vllm_states, vllm_states.server_capture,
                   lambda draft, shape, storage=None, conv=None: vllm_launch.vllm_serving(draft, shape, storage or "DIR",
                                                                                conv=conv),
                   lambda shape, wanted=None, storage=None, conv=None: vllm_launch.vllm_reference(
                       shape, storage or "DIR", wanted, conv=conv),
                   states_on_disk=True,
                   speculative=lambda target, draft, steps, variant: vllm_launch.vllm_speculative(
                       target, draft, steps, v1=variant == "vllm-v1"),
                   drafting_differs=vllm_acceptance.drafting_differs, last_verify_uncut=True,
                   variants=("vllm", "vllm-v1"), wire=vllm_wire),
}
assert set(ENGINES) == set(WIRES), "every engine with a wire.py has an entry here"


def register(entry: Engine) -> None:
    """Add an engine (its folder's functions behind one :class:`Engine`, its ``wire``): servers of that kind
    are read, and its lines printed, through it. A name already taken is replaced."""
    ENGINES[entry.name] = entry
    WIRES[entry.name] = entry.wire


def unregister(name: str) -> None:
    if name in ("sglang", "vllm"):
        raise ValueError(f"{name} is built in and stays")
    ENGINES.pop(name, None)
    WIRES.pop(name, None)


def for_variant(variant: str) -> Engine:
    """The engine running the rules of engine convention ``variant`` (``vllm-v1`` -> vllm)."""
    for e in ENGINES.values():
        if variant in e.variants:
            return e
    raise BadOption(f"engine {variant!r}: no launch lines known (known: {', '.join(line_variants())})")


def line_variants() -> tuple[str, ...]:
    """Every engine convention whose launch lines are printed, in registry order."""
    return tuple(v for e in ENGINES.values() for v in e.variants)


def engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise BadOption(f"engine {name!r}: not one eagle-audit reads from a server",
                        hint=f"one of: {', '.join(ENGINES)}") from None


def read_server(url: str | Server, prompts: Sequence[Sequence[int]], max_new: int, kind: str = "auto",
                timeout: float = DEFAULT_TIMEOUT, *, expected: Sequence[Sequence[int]] | None = None,
                progress: Callable[[int, int], None] | None = None) -> ServerReading:
    """Send every prompt (token ids) to the server, greedy, ``max_new`` new tokens, and read the accept length
    over exactly these requests. ``expected``: the target's own greedy continuations, to count the served
    outputs that equal them."""
    opts = url if isinstance(url, Server) else Server(url, kind, timeout=timeout)
    clock = Clock(opts.deadline)
    kind = detect(opts)
    key, source = resolve_key(opts.api_key, kind)
    http_ = Http(opts.url, key, opts.timeout, clock)
    reading = engine(kind).read_acceptance(http_, prompts, max_new, expected, progress)
    return ServerReading(**{**reading.__dict__, "key_source": source, "notes": reading.notes + tuple(http_.waits)})


def read_served_states(opts: Server, prompts: Sequence[Sequence[int]], capture: Capture, *,
                       max_new_tokens: int = 1, hidden_states_dir: str | None = None,
                       progress: Callable[[int, int, int], None] | None = None,
                       next_tokens: bool = False, also: Sequence[Capture] = ()) -> tuple[ServedStates, ...]:
    """Every prompt's served states, from the server kind ``capture.engine`` names (SGLang in-band; vLLM
    from ``hidden_states_dir``, the server's ``shared_storage_path`` as this machine sees it); with
    ``next_tokens`` the target's argmax after every position too (SGLang ``input_top_logprobs``, vLLM
    ``prompt_logprobs``). ``also``: other launches the server may run, for an engine that does not say what it
    captures (vLLM: the files' slot count picks; SGLang says it, ``/server_info``, and ignores them)."""
    eng = engine(capture.engine)
    if not eng.states_on_disk:
        return eng.read_states(opts, prompts, capture, max_new_tokens, progress, next_tokens)
    if hidden_states_dir is None:
        raise BadOption(f"a {eng.name} server writes the states to its disk: name that folder "
                        f"({param('hidden_states_dir')})")
    return eng.read_states(opts, prompts, capture, hidden_states_dir, max_new_tokens, progress, next_tokens, also)
