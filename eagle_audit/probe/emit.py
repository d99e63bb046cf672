"""A probe result as a convention file (``eagle-audit/convention/1``), the format eagle_audit.conventions loads.

Architectures whose rules mean the same (:meth:`ProbedRule.key`) share one rule, named after the
model file whose setter most of them run (``llama``, ``deepseek_v2``, ``gpt_oss``...). The probe reads
the target side only; the draft-side keys (``aux_count_from``, ``draft_flags``,
``fc_skip_when_width_equals_hidden``) are taken from the built-in convention of the same engine when
one is given, and say so in ``notes``.
"""

from __future__ import annotations

from collections import Counter

from ..version import __version__
from ..conventions import SCHEMA, Convention, parse_convention
from ..conventions.draft_classes import loader_json

ROPE_DEFAULT = ("linear", "llama3", "yarn")  # Convention.rope_scaling's default
from .results import DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbeResult

TITLES = {"sglang": "SGLang", "vllm": "vLLM (V2 model runner, default)",
          "vllm-v1": "vLLM (V1 model runner, VLLM_USE_V2_MODEL_RUNNER=0)"}
#: where each engine's model files live, for the texts of the emitted file
MODELS_DIRS = {"vllm": "vllm/model_executor/models", "vllm-v1": "vllm/model_executor/models"}
SETTERS = {"vllm": "set_aux_hidden_state_layers", "vllm-v1": "set_aux_hidden_state_layers"}


def _feature_file(a: ArchResult) -> str:
    """The file that makes this architecture's rule what it is: the setter when the ids are
    transformed unusually, else the unguarded inner setter, else the final-boundary capture, else the
    setter."""
    rule = a.rule
    if rule.default_shift or any(c.when for c in rule.explicit):
        return _named(a.setter)
    if rule.reach.unguarded:
        return _named(rule.reach.unguarded)
    if rule.reach.max_capture == "N":
        return _named(rule.reach.site)
    return _named(a.setter)


#: platform folders of vLLM's per-model packages (vllm/models/deepseek_v4/nvidia/model.py)
PLATFORMS = ("nvidia", "amd", "cpu", "xpu", "common")


def _named(site) -> str:
    """A site's file name, or for a per-model package's ``model.py`` the package's (``deepseek_v4.py``)."""
    parts = site.path.split("/")
    if parts[-1] in ("model.py", "__init__.py") and len(parts) >= 3:
        package = parts[-3] if parts[-2] in PLATFORMS else parts[-2]
        return f"{package}.py"
    return site.file


def _base_key(conv: Convention, name: str) -> tuple:
    r = conv.rules[name]
    return (r.default_ids, r.default_shift, tuple((c.when, c.shift) for c in r.explicit), r.min_capture,
            r.max_capture, r.wraps_negative, r.count_check is not None, bool(r.feeds),
            any(f.error == "TypeError" for f in r.index_failures), r.default_explicit,
            tuple(sorted((c.when, c.failure.error) for c in r.id_checks)))


def _base_name(members: list[ArchResult], base: Convention | None, taken: dict) -> str | None:
    """The built-in rule most members are mapped to, when it means the same as the probed rule."""
    if base is None:
        return None
    votes = Counter(n for n in (base.architectures.get(a.arch, base.fallback_rule) for a in members) if n)
    for name, _ in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0])):
        if name not in taken and _base_key(base, name) == members[0].rule.key():
            return name
    return None


def group_rules(result: ProbeResult, base: Convention | None = None) -> dict[str, list[ArchResult]]:
    """Rule name -> the supported architectures that share it; the representative member first.

    Architectures share a rule when their rules mean the same (:meth:`ProbedRule.key`). A rule keeps
    the name of the ``base`` (built-in) rule most of its members are mapped to when that rule means
    the same; otherwise it is named after the file most of its members owe it to (see
    :func:`_feature_file`): ``llama``, ``deepseek_v2``, ``gpt_oss``, ``qwen2_moe``...
    """
    groups: dict[tuple, list[ArchResult]] = {}
    for a in sorted(result.by_status(SUPPORTED), key=lambda a: a.arch):
        groups.setdefault(a.rule.key(), []).append(a)
    named: dict[str, list[ArchResult]] = {}
    # the largest groups choose their names first, so the most common rule gets the plain file name
    for members in sorted(groups.values(), key=lambda m: (-len(m), m[0].arch)):
        counts = Counter(_feature_file(a) for a in members)
        file = sorted(counts, key=lambda f: (-counts[f], f))[0]
        name = _base_name(members, base, named)
        if name is None:
            stem, n = file[:-3], 2
            name = stem
            while name in named:
                name, n = f"{stem}_{n}", n + 1
        # the representative, whose sites are cited: one the built-in file maps to this rule, owing
        # the rule to the naming file, through the most shared setter
        setters = Counter(a.setter for a in members)
        in_base = base.architectures if base is not None else {}
        rep = min(members, key=lambda a: (in_base.get(a.arch) != name, _feature_file(a) != file,
                                          -setters[a.setter], a.arch))
        named[name] = [rep] + [a for a in members if a is not rep]
    return named


#: torch.nn.ModuleList.__getitem__'s message for an index outside -N..N-1 (the unguarded setattr's failure)
MODULELIST_INDEX_ERROR = "index {k} is out of range"
#: Python's message for ``Tensor + None`` (the unguarded ``hidden_states + residual`` at index 0)
NONE_ADD_ERROR = "unsupported operand type(s) for +: 'Tensor' and 'NoneType'"
BRANCH_WHAT = ("the first element of layer {k-1}'s (hidden_states, residual) output (its branch output), not the "
               "residual stream B{k}")


def _rule_json(members: list[ArchResult], version: str, count_error=None) -> dict:
    rule = members[0].rule  # the representative: its sites are cited
    setters = sorted({a.setter.short() for a in members})
    source = f"{', '.join(setters)}@v{version}; {rule.reach.how}"
    if rule.reach.unguarded:
        source += f"; setattr(self.layers[i]) unguarded at {rule.reach.unguarded.short()}: an index >= N raises " \
                  "IndexError at start-up"
    n_from = sorted({a.rule.n_from for a in members if a.rule.n_from})
    if n_from:
        source += f"; N = {' | '.join(n_from)}"
    explicit = []
    if not rule.explicit:  # a setter without an ids parameter: nothing ever reaches an explicit case
        explicit.append({"shift": 0, "source": f"{members[0].setter.short()}: the setter takes no ids; the engine never "
                                               "hands it any (ids_from is empty), so this case is never used"})
    for case in rule.explicit:
        item: dict = {}
        if case.when:
            item["when"] = case.when
        item["shift"] = case.shift
        item["source"] = case.site.short()
        explicit.append(item)
    out = {"default_ids": rule.default_ids, "default_shift": rule.default_shift, "explicit": explicit,
           "min_capture": rule.reach.min_capture, "max_capture": rule.reach.max_capture, "source": source}
    if rule.reach.unguarded:
        out["wraps_negative"] = True
        out["index_failures"] = [{
            "when": "k >= N or k < -N", "error": "IndexError", "message": MODULELIST_INDEX_ERROR, "at": "start-up",
            "source": f"{rule.reach.unguarded.short()}: setattr(self.layers[k]) for each capture index, no bounds "
                      "check (torch.nn.ModuleList indexing: -N <= k < 0 is layer N+k)"}]
    if rule.reach.count_check and count_error:
        error, message, site = count_error
        out["count_check"] = {"error": error, "message": message, "at": "first forward",
                              "source": f"{rule.reach.count_check.short()}; {site.short()}"}
    if rule.reach.none_add:
        out.setdefault("index_failures", []).append({
            "when": "k == 0", "error": "TypeError", "message": NONE_ADD_ERROR, "at": "first forward",
            "source": f"{rule.reach.none_add.short()}: hidden_states + residual, and residual is None before layer 0"})
    if rule.reach.branch:
        out["feeds"] = [{"when": "k >= 1", "what": BRANCH_WHAT, "source": rule.reach.branch.short()}]
    if rule.default_explicit:
        out["default_explicit"] = True
    if rule.id_checks:
        out["id_checks"] = [dict(c) for c in rule.id_checks]
    return out


def to_convention_data(result: ProbeResult, base: Convention | None = None) -> dict:
    """The convention file (a JSON-ready dict) for ``result``; ``base``: the built-in convention whose
    draft-side keys are reused."""
    groups = group_rules(result, base)
    rules = {name: _rule_json(members, result.version, result.count_error) for name, members in groups.items()}
    archs = {a.arch: name for name, members in groups.items() for a in members}
    models = MODELS_DIRS.get(result.engine, f"{result.engine}/srt/models")
    setter = (result.extra or {}).get("_setter") or SETTERS.get(result.engine, "set_eagle3_layers_to_capture")
    notes = [f"Generated by `eagle-audit probe {result.name or result.engine}` from {result.origin}: target-side capture rules "
             f"read with ast from {models}/*.py; nothing was imported."]
    ids_from: list = [dict(r) for r in result.id_reads] if result.id_reads else list(result.ids_from or ())
    places = [r["place"] if isinstance(r, dict) else r for r in ids_from]
    if base is not None and ids_from and set(places) == set(base.ids_from) and tuple(places) != base.ids_from:
        ids_from = [r.to_json() for r in base.reads()]
        notes.append(f"ids_from: the reader reads {', '.join(places)}, but a later read overrides an earlier one "
                     f"(not derived): the order and skips are copied from the built-in {base.name} {base.version}")
    if result.ids_from is None:
        ids_from = [r.to_json() for r in base.reads()] if base else []
        notes.append("ids_from: the draft-ids reader was not found in this source; "
                     + (f"copied from the built-in {base.name} {base.version} convention" if base else "left empty"))
    if base is not None:
        notes.append(f"aux_count_from, draft_flags, fc_skip_when_width_equals_hidden, empty_capture, draft_classes, "
                     "speculators_loader and draft_architecture_rename are not probed: "
                     "copied from "
                     f"the built-in {base.name} {base.version} convention ({base.path}).")
    for a in result.archs:
        if a.status in (DELEGATING_UNRESOLVED, UNRECOGNISED):
            notes.append(f"{a.arch}: {a.status}: {a.reason}")
    notes.extend(f"not parsed: {s}" for s in result.skipped)
    ids_source = f"{result.ids_site.path}:{result.ids_site.short().split(':')[1]}" if result.ids_site \
        else "ids reader not found"
    data: dict = {
        "schema": SCHEMA,
        "name": result.name or result.engine,
        "kind": "engine",
        "title": TITLES.get(result.engine, result.engine),
        "version": result.version,
        "source": f"{result.engine}=={result.version} ({result.origin}): {models}/*.py "
                  f"{setter}; {ids_source} (ids read from {', '.join(map(str, result.ids_from or ())) or 'nowhere'})",
        "generated_by": f"eagle-audit {__version__} probe",
        "ids_from": ids_from,
        "order": "ascending",
        "rules": rules,
        "architectures": dict(sorted(archs.items())),
        "fallback_rule": None,
        "unsupported": {a.arch: a.reason for a in sorted(result.by_status(UNSUPPORTED), key=lambda a: a.arch)},
    }
    if base is not None:
        data["aux_count_from"] = list(base.aux_count_from)
        data["draft_flags"] = {k: {"honoured": f.honoured, "default": f.default, "read": list(f.read),
                                   **({"or": list(f.any_of)} if f.any_of else {}),
                                   **({"default_if_present": dict(f.default_if_present)} if f.default_if_present else {}),
                                   **({"semantics": f.semantics} if f.semantics else {})}
                               for k, f in base.draft_flags.items()}
        if tuple(base.rope_scaling) != ROPE_DEFAULT:
            data["rope_scaling"] = list(base.rope_scaling)
        data["fc_skip_when_width_equals_hidden"] = base.fc_skip_when_width_equals_hidden
        if base.empty_capture is not None:
            data["empty_capture"] = base.empty_capture.to_json()
        root = base.base or base
        if root.draft_classes:  # the draft classes are not probed either (eagle_audit.conventions.draft_classes)
            present = (result.extra or {}).get("_draft_archs")  # the draft classes this source registers, if read
            kept = [c for c in root.draft_classes if present is None or set(c.architectures) & set(present)]
            data["draft_classes"] = [c.to_json() for c in kept]
            data["draft_class_fallback"] = root.draft_class_fallback if any(
                c.name == root.draft_class_fallback for c in kept) else (kept[0].name if kept else None)
            dropped = [c.name for c in root.draft_classes if c not in kept]
            if dropped:
                notes.append(f"draft_classes: {', '.join(dropped)} left out: no EntryClass of this source registers "
                             "it.")
        if root.speculators_loader is not None:
            data["speculators_loader"] = loader_json(root.speculators_loader)
        if root.draft_architecture_rename is not None:
            data["draft_architecture_rename"] = root.draft_architecture_rename.to_json()
    if result.extra:
        notes.extend(result.extra.get("notes", ()))
        data.update({k: v for k, v in result.extra.items() if k != "notes" and not k.startswith("_")})
        shift = result.extra.get("_draft_shift")  # a per-target extra shift for some drafts: its own rule
        for arch in (shift or {}).get("targets", ()):
            if arch in data["architectures"]:
                name = data["architectures"][arch]
                new = f"{name}_{shift['name']}"
                data["rules"][new] = {**data["rules"][name], "draft_shift": {
                    k: shift[k] for k in ("architectures", "shift", "source")}}
                data["architectures"][arch] = new
        checks = result.extra.get("_arch_checks")  # an architecture's own checks over the ids: its own rule
        for arch in (checks or {}).get("targets", ()):
            name = data["architectures"].get(arch, data.get("fallback_rule"))
            if name is not None:
                new = f"{name}_{checks['name']}"
                data["rules"][new] = {**data["rules"][name], "id_checks": checks["id_checks"]}
                data["architectures"][arch] = new
    data["notes"] = notes
    return data


def to_convention(result: ProbeResult, base: Convention | None = None, path: str | None = None) -> Convention:
    """The probed convention, loaded exactly as a file would be."""
    return parse_convention(to_convention_data(result, base), path or f"probe:{result.origin}")
