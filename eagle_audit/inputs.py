"""What every audit of a (target, draft) pair starts from, shared by `layers` (:mod:`eagle_audit.layers.run`)
and `accept-rate` (:mod:`eagle_audit.accept.run`), so that neither imports the other.

:class:`AuditInputs` holds the inputs; :func:`prepare` reads the draft, picks the engine's rules
(:func:`read_inputs`, also callable first where a command checks more before loading), loads
the target (or only its config), checks that the draft fits it, and resolves the trained and the served
wiring once (:func:`eagle_audit.resolution.resolve_audit`). Both orchestrators then measure what they
measure and build their provenance from the same :class:`Prepared`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .conventions import Convention
from .draft.fit import check_target_fit
from .draft.read import DraftSpec, read_draft
from .errors import AuditError
from .resolution import MEASURED, Resolution
from .states import State

#: Trained states as given: a text such as "0,3,31" (parsed once the target's N is known; the CLI's form),
#: or a sequence of states or boundary ints (the Python API's form).
TrainedStates = str | Sequence[State | int]


@dataclass(frozen=True)
class AuditInputs:
    """What every audit of a (target, draft) pair under a trainer and an engine starts from."""

    target: str
    draft: str
    engine: str | None = "sglang"  # None: none named (SGLang's slots; the verdict covers every engine, layers.across)
    trainer: str | None = None
    trained_boundaries: TrainedStates | None = None
    trained_ids: tuple[int, ...] | None = None
    prompts: str | None = None
    max_prompts: int = 8
    max_tokens: int = 256
    device: str = "cpu"
    dtype: str = "auto"
    use_installed_engine: bool = True
    command: str | None = None  # the CLI line that reproduces this run (None: library call)
    states_server: Any = None  # eagle_audit.engines.options.Server: a server that hands out the target's states


@dataclass(frozen=True)
class Prepared:
    """A draft and a target with both wirings resolved. ``target`` is the audit's state source
    (:class:`eagle_audit.source.StateSource`), or None when only the target's config was read
    (``layers --static``)."""

    draft: DraftSpec
    engine: Convention
    target: Any
    info: Any  # TargetInfo
    resolution: Resolution
    trainer: Convention | None
    aux: int  # how many states the draft's fc takes
    notes: list[str] = field(default_factory=list)  # every assumption made so far (provenance)


def read_inputs(opts: AuditInputs, notes: list[str]) -> tuple[DraftSpec, Convention]:
    """The draft (headers only) and the engine's rules: probed from an installed engine unless
    ``opts.use_installed_engine`` is off, else the built-in convention (``notes`` says which)."""
    from .draft.block import convention_for
    from .provenance import engine_convention

    draft = read_draft(os.fspath(opts.draft), config_only=bool(getattr(opts, "static", False)))
    server = getattr(opts, "states_server", None) or getattr(opts, "server", None)  # a server the command talks to
    engine = engine_convention(None if opts.engine is None else os.fspath(opts.engine), opts.use_installed_engine, notes,
                               server=server if not isinstance(server, str) else None)
    return draft, convention_for(engine, draft.kind, notes)  # the engine itself where it has rules for the kind


def check_tokenizer(opts: AuditInputs) -> None:
    """Before any weight loads: a target directory without a tokenizer cannot encode text prompts; said naming the
    folder, the files looked for and the ways out (token ids given: nothing to encode, nothing checked). A GGUF
    file or a hub id carries or resolves its own."""
    from .errors import BadCheckpoint
    from .target import TOKENIZER_FILES, has_weights, target_info

    if getattr(opts, "prompt_ids", None) is not None:
        return
    d = Path(os.path.expanduser(os.fspath(opts.target)))
    if not (d.is_dir() and (d / "config.json").is_file() and has_weights(str(d))):
        return  # a file, a hub id, or no weights: the load says what is missing
    if not any((d / f).is_file() for f in TOKENIZER_FILES):
        target_info(str(d))  # a config that is no target's (a draft, no layers) is said first, as the load says it
        raise BadCheckpoint(f"{d}: the target has no tokenizer (none of {', '.join(TOKENIZER_FILES)}), so the "
                            "prompts cannot be encoded; checked before its weights load",
                            hint="copy the model's tokenizer files into it, or give token ids (Python: prompt_ids=...)")


def prepare(opts: AuditInputs, *, load_weights: bool = True, device_map: str | None = None,
            status: Callable[[str], None] | None = None, notes: list[str] | None = None,
            inputs: tuple[DraftSpec, Convention] | None = None, source=None, request=None,
            served_optional: bool = False) -> Prepared:
    """Read the draft and the engine's rules (or take ``inputs`` from :func:`read_inputs`), load the target
    (or only its config without ``load_weights``), check that the draft fits it, and resolve the trained and
    the served wiring. ``source``: a state source already open (``check`` hands each stage the one it opened:
    one load, the memo shared); else ``request`` (the command's :func:`eagle_audit.source.states_from`) is opened,
    or the request the options make. ``served_optional``: :func:`eagle_audit.resolution.resolve_audit`'s."""
    from .resolution import resolve_audit
    from .source import open_source, states_from
    from .target import target_info

    notes = [] if notes is None else notes
    draft, engine = inputs if inputs is not None else read_inputs(opts, notes)
    target = None
    if load_weights and source is None:
        check_tokenizer(opts)
    if load_weights:
        if source is not None:
            target = source
        else:
            if status:
                status(f"loading target {Path(opts.target).name or opts.target}")
            target = open_source(request or states_from(opts, device_map=device_map), status)
        info = target.info
    else:
        info = target_info(os.fspath(opts.target))
    if not draft.has_weights:
        draft = draft.for_target(info.hidden_size)
        notes.append(f"config-only draft (no weights): fc sized from the config, {draft.config_aux} aux state(s) x "
                     f"{draft.target_hidden_size or info.hidden_size} = {draft.fc_in} (num_aux_hidden_states, else the "
                     "ids, else 3); not checked without the weights: fc's real width, the vocabulary map (d2t/t2d), "
                     "the weight names the engine loads, and what the weights were trained on (fingerprint, "
                     "accept-rate)")
    aux = check_target_fit(draft, info)
    if opts.trainer == MEASURED:  # the trained wiring read off the draft's weights (eagle_audit.fingerprint)
        if target is None:
            raise AuditError(f"trainer {MEASURED} measures the trained wiring on the weights: it needs the target's "
                             "weights loaded (not a static audit)")
        from .fingerprint.measured import resolve_measured
        from .prompts import load_prompts, token_ids

        given = getattr(opts, "prompt_ids", None)
        ids = token_ids(given, None if given is not None else load_prompts(opts.prompts, opts.max_prompts),
                        target.tokenizer, opts.max_tokens)
        res, trainer = resolve_measured(target, draft, engine, notes, ids, status=status), None
    else:
        res, trainer = resolve_audit(draft, info, engine, notes, opts.trainer, opts.trained_boundaries,
                                     opts.trained_ids, served_optional=served_optional)
    return Prepared(draft, engine, target, info, res, trainer, aux, notes)
