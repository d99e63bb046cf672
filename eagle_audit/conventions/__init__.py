"""Training pipelines and serving engines, each declared once in a convention file under ``probes/``.

A convention turns (draft config, target architecture, N) into the target states it feeds the draft,
in the order it concatenates them: a :class:`Wiring`. :meth:`Convention.resolve` (``convention.py``) is the
only place where a pipeline's bare layer ids become canonical :class:`~eagle_audit.states.State` boundaries.
The package: ``places`` (where a draft config holds ids and flags), ``rules`` (the declared pieces, frozen),
``convention`` (a convention and its resolution), ``parse`` (the file format below), ``registry`` (the
built-in files by name), ``releases`` (every probed release of an engine, compact; ``pack`` writes them),
``draft_classes`` (the draft classes an engine serves).

File format (JSON, ``"schema": "eagle-audit/convention/1"``), documented in README.md:

``name, kind ("trainer"|"engine"), title, version, source``
    identity and the upstream code it was read from.
``ids_from``
    ordered list of places the draft's ids are read from; the first present wins. Places:
    ``nested`` = ``eagle_config.eagle_aux_hidden_state_layer_ids``, ``top_level`` =
    ``eagle_aux_hidden_state_layer_ids``, ``nested_layer_ids`` = ``eagle_config.layer_ids``, and the
    DFlash/DSpark keys vLLM's V2 runner also reads (``dflash_target_layer_ids`` =
    ``dflash_config.target_layer_ids``, ``dspark_target_layer_ids``, ``target_layer_ids``,
    ``dflash_layer_ids`` = ``dflash_config.layer_ids``). An entry is a place name or
    ``{"place", "shift" (added to each id as read, default 0), "empty": "read"|"absent" (an empty list is
    taken as given, or skipped like a missing key), "verbatim_model_types" (draft model_types for which the
    shift is not applied), "unless_truthy" (a top-level key: the place is skipped when that key holds a
    non-empty dict), "only_with" (a top-level key: the place is read only when the config has it)}``. Empty: the ids are hard-coded and nothing is read. See docs/engines.md.
``order``
    ``"ascending"`` (capture-loop order; duplicates collapse) or ``"config"`` (as listed).
``rules``
    named capture rules: ``default_ids`` (expression in N), ``default_shift``, ``explicit`` (ordered
    cases ``{"when": expr over ids and N, "shift": int}``; the first whose ``when`` holds applies),
    ``min_capture`` / ``max_capture`` (expressions: capture indices outside are silently never
    captured), ``source``; what the engine does with indices it cannot serve as states:
    ``index_failures`` (ordered ``{"when": expr over k and N, "error", "message" (``{k}`` filled in),
    "at": "start-up"|"first forward", "source"}``: the engine raises for a capture index k),
    ``wraps_negative`` (an index -N <= k < 0 indexes the layer list from the end: captured as N+k),
    ``count_check`` (``{"error", "message" ({captured}, {expected}), "at", "source"}``: the engine raises
    when it captured another number of states than its capture list holds); and ``feeds``
    (``[{"when": expr over k and N, "what", "source"}]``: capture indices whose tensor is not the residual
    stream B_k, and what it is instead).
    ``default_explicit`` (true: the default ids are handed to the capture as explicit ids, so the
    explicit cases apply to them and ``default_shift`` is ignored: a trainer that computes its own
    default and passes it to an engine).
``architectures``
    target architecture -> rule name; ``fallback_rule`` for the rest (``null``: unsupported);
    ``unsupported``: architecture -> why.
``aux_count_from``
    how the draft side sizes ``fc``: keys tried in order, then an int default.
``draft_flags``
    per draft flag: ``{"honoured": bool, "default": value when absent, "read": places tried in order, the
    first that holds the key wins ("top_level", "nested" = inside ``eagle_config``; default both, top level
    first), "or": further top-level keys OR-ed in (SGLang's legacy ``use_aux_norm`` for ``fc_norm``),
    "default_if_present": {top-level key: default used instead when that key is in the config} (vLLM's
    speculators loader sets ``norm_before_residual`` to True when absent)}``.
    ``semantics`` (only ``norm_output``): ``"carried"`` (true: the normed state is also the hidden
    carried to the next draft step; the final norm always runs before ``lm_head``: SGLang, vLLM,
    speculators) or ``"head"`` (true: the final norm runs before ``lm_head`` only, the carried hidden stays
    pre-norm; false: no final norm at all: SpecForge ``llama3_eagle.py`` ``compute_logits``).
``empty_capture``
    ``{"error", "message", "at", "source"}``: the engine's failure when capture is on but nothing is
    captured (an empty id list, or every index out of reach).
``fc_skip_when_width_equals_hidden``
    this side runs ``fc`` only when the incoming width differs from the draft hidden size (else: ``fc``
    always runs on the target's states, never on the draft's own recurrent hidden).
``rope_scaling``
    the ``rope_scaling`` types this side applies to the draft's attention (others run as default RoPE).
``captures_through``
    ``{"engine", "version", "source"}``: a trainer that captures through an engine's own setter and
    capture loop, whose rules were derived with ``eagle-audit probe`` on that engine version.
``no_aux``
    ``{"what", "source"}``: this side reads ``eagle_config.use_aux_hidden_state`` and, when it is false,
    captures no aux states and feeds the draft the post-norm final state (no ``fc``). Absent: the flag is
    not read (the ids are resolved as usual).
``ids_accepted`` (trainers)
    ``{"when": expr over ids and N, "error", "message" ({ids}), "at", "source"}``: explicit ids the trainer
    trains on; others it refuses (so no draft of that trainer has them).
``draft_classes``, ``draft_class_fallback``, ``speculators_loader``, ``draft_architecture_rename`` (engines)
    the EAGLE-3 draft classes the engine serves, each with its own fc sizing, draft flags and decoder
    attention, picked by the draft config's ``architectures[0]`` (renamed first as the engine renames it) or
    through the engine's speculators config loader when the engine takes that path (``used_when``)
    (:mod:`eagle_audit.conventions.draft_classes`); a class overrides the convention's draft-side keys.
``draft_kinds``
    the drafts this convention describes: ``"eagle3"`` (default), ``"dflash"``, ``"dspark"``
    (:mod:`eagle_audit.draft.block` picks the convention for a draft of another kind).
``id_checks`` (per convention and per rule)
    ``[{"when": expr over ids and N, "error", "message" ({ids}), "at", "source", "places"}]``: the engine
    raises for these ids (the id reader's or the setter's own checks, such as SGLang's DFlash range check);
    ``places`` limits a convention-level check to ids read from those places. A rule's checks see the ids
    as handed to its setter (after ``draft_shift``), or as read with ``"as_read": true``.
``final_normed`` (per rule)
    true: capture index N is the post-norm final state (a trainer reading HF ``hidden_states[N]``, which
    transformers returns after the final norm), not the pre-norm B_N.
``draft_shift`` (per rule)
    ``{"architectures": [draft architectures], "shift": int, "source"}``: ids of drafts with one of these
    architectures are shifted before the setter sees them (SGLang's Muse mapping).
``width_check``
    ``{"error", "message" ({captured}, {expected}), "at", "source"}``: the draft raises when the target hands
    it another number of states than its ``fc`` is sized for (``aux_count_from``).
``refuses`` (engines)
    ``[{"kinds": [draft kinds], "architectures": [draft architectures], "mixed_layer_types": bool, "error",
    "message", "at", "source"}]``: drafts the engine refuses whatever their ids (every condition given holds: the
    draft's kind is one of ``kinds``, one of its ``architectures`` is listed, its ``layer_types`` mixes
    ``sliding_attention`` with other layers); the first that applies is the wiring's failure (vLLM's V1 runner
    refuses DSpark, DFlash candidate-head and mixed sliding/full DFlash drafts at start-up).
``tree_drafts`` (engines)
    ``{"attention": "kv_by_slot"|"exact_ancestor"|null, "source": ...}``: which draft keys a tree node
    attends to (:data:`eagle_audit.simulate.tree.TREE_ATTENTION`), or ``null`` when the engine drafts chains
    only. Absent: not declared.

A shift maps an id to a boundary: OUT-k pipelines (id k = output of layer k) shift by +1, IN-k
pipelines (id k = input of layer k) by 0.
"""
from .convention import Convention
from .draft_classes import DraftClass, SpeculatorsLoader
from .parse import SCHEMA, parse_convention
from .places import DRAFT_FLAGS, EAGLE_PLACES, FLAG_PLACES, ID_PLACES, draft_layer_count, place_key, read_ids, uses_aux
from .registry import builtin_conventions, get_convention, load_convention_file, probes_dir, release_convention, same_release
from .rules import (CaptureRule, DraftRefusal, DraftShift, EngineFailure, ExplicitCase, Feed, FlagRule, IdCheck, IdRead, TreeDrafts,
                    Wiring)

__all__ = ["CaptureRule", "Convention", "DRAFT_FLAGS", "DraftClass", "DraftRefusal", "DraftShift", "EAGLE_PLACES", "EngineFailure",
           "ExplicitCase", "FLAG_PLACES", "Feed", "FlagRule", "ID_PLACES", "IdCheck", "IdRead", "SCHEMA",
           "SpeculatorsLoader", "TreeDrafts", "Wiring", "builtin_conventions", "draft_layer_count", "get_convention",
           "load_convention_file", "parse_convention", "place_key", "probes_dir", "read_ids", "release_convention",
           "same_release", "uses_aux"]
