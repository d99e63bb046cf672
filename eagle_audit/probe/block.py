"""SGLang's DFlash and DSpark capture rules, read from the same source as its EAGLE-3 rules.

SGLang serves a DFlash-family draft from the target's aux hidden states
(``model_executor/model_runner_components/attention_backend_setup.py``): with ``--speculative-algorithm DSPARK``
it calls the target's ``set_dspark_layers_to_capture(ids)`` when the model has one, else (and for DFLASH)
``set_dflash_layers_to_capture(ids)``; a model with neither refuses to start. The ids come from
``spec_aux_hidden_state.py`` ``_resolve_dflash_aux_hidden_state``: ``speculative/dflash_utils.py``
``parse_dflash_draft_config`` / ``resolve_target_layer_ids`` (``dflash_config.target_layer_ids``, else
top-level ``target_layer_ids``; each in 0..N-1; none: ``build_target_layer_ids(N, draft layers)``), Muse's
``_map_muse_target_layer_ids`` (+1 for two draft architectures on a ``muse_glimmer`` target) and, for DSpark,
``dspark_components/dspark_config.py`` ``parse_dspark_draft_config`` (top-level ``dspark_target_layer_ids``
wins; ``dspark_config`` is merged for other keys, its ``target_layer_ids`` is not read).

What this module derives from the files, and how:

* per registered architecture, the setter (own or inherited, followed through delegation) read by
  :class:`~eagle_audit.probe.setter.SetterReader` in its block-draft mode: the shift of the ids, where they are
  stored, and every check that raises over them (translated to the expression language, else the architecture
  is ``unrecognised``, never guessed);
* where the setter stores ``layers_to_capture`` read by the EAGLE-3 capture test (the stream entering layer k),
  the reach, guards and count check from :class:`~eagle_audit.probe.reach.ReachReader`, as for EAGLE-3;
* captures the capture-test reader does not read (after the layer, ``dspark_layers_to_capture``) come from
  :data:`AFTER_LAYER_TAPS`, a declared table whose every entry names the line of its test; the probe checks the
  text is still on that line, else the architecture is ``unrecognised``;
* the id places, the range check, the default and Muse's extra shift, located in the reader's source and cited
  (a reader whose text is not found makes the probe fail); ``tests/engine_wheels/test_block_engine.py`` executes
  each of them from the wheel and holds the convention to what they return.

The draft side (width check): the DFlash draft projects ``len(target_layer_ids)`` states (its own default
count when none are given: ``models/dflash.py``) and raises ``ValueError`` at the first forward when the
target hands it another width (``project_target_hidden``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import replace

from .held import HeldResolver
from .modules import ClassInfo, ModuleIndex
from .reach import ReachError, ReachReader
from .results import SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbedCase, ProbedRule, ProbeResult, Reach, Site
from .setter import SetterReader, Unrecognised
from .sglang import read_version
from .source import BadSource, locate

DFLASH_SETTER = "set_dflash_layers_to_capture"
DSPARK_SETTER = "set_dspark_layers_to_capture"
SINKS = ("layers_to_capture", "dspark_layers_to_capture", "_dflash_layers_to_capture")
DFLASH_UTILS = "dflash_utils.py"
DSPARK_CONFIG = "dspark_config.py"
SPEC_AUX = "spec_aux_hidden_state.py"
SETUP = "attention_backend_setup.py"
DRAFT_FILE = "dflash.py"
RUNNER = "model_runner.py"  # 0.5.11-0.5.15 call the setters (and refuse a target without one) here

#: SGLang's default for a draft without ids (``build_target_layer_ids``), in the expression language.
DEFAULT_IDS = "[N // 2] if D == 1 else spread(1, N - 3, D)"

#: Captures the capture-test reader does not read: model file -> (the capture test as written, the boundary
#: shift it adds to the id stored (1: after the layer ran, 0: before it), the highest capture index, a
#: non-residual feed or None, count-checked).
AFTER_LAYER_TAPS: dict[str, tuple[str, int, str, str | None, bool]] = {
    # ``if ... and i in self.dspark_layers_to_capture:`` after ``self.layers[i]`` ran: the output of layer i
    "kimi_linear.py": ("and i in self.dspark_layers_to_capture", 1, "N", None, False),
    # ``capture_output=... (i - 1 in self.layers_to_capture)`` passed to layer i, plus the final norm's capture
    # of ``self.end_layer - 1``: the stream entering layer i+1, B_N for the last one
    "bailing_moe_v3.py": ("and (i - 1 in self.layers_to_capture)", 1, "N", None, False),
    # before layer i runs ("The draft head reads the attention input of its target layers"): the mean over the
    # hyper-connection (mHC) streams entering layer i (mhc_stream_mean), which is Bk on an mHC target
    # (docs/coordinate.md), collected by the counting packer; ids verbatim
    "deepseek_v4.py": ("if capture_dspark and i in self.dspark_layers_to_capture:", 0, "N - 1", None, True),
}

WIDTH_ERROR = ("DFLASH target_hidden feature dim mismatch. Expected {expected} context features, got {captured}; "
               "the target model is capturing a different number of layer features than the draft expects")


def _find_opt(tree, filename: str, needle: str) -> Site | None:
    """The first line of ``filename`` holding ``needle``, or None."""
    for path in tree.find(filename):
        for i, line in enumerate(tree.files[path].splitlines(), 1):
            if needle in line:
                return Site(path, i)
    return None


def _find(tree, filename: str, needle: str) -> Site:
    """The first line of ``filename`` holding ``needle``; the probe fails when the reader changed shape."""
    found = _find_opt(tree, filename, needle)
    if found is not None:
        return found
    raise BadSource(f"{tree.origin}: {filename} no longer holds `{needle}`; the DFlash reader changed shape "
                    "(update eagle_audit/probe/block.py)")


def _frozenset_literal_opt(tree, filename: str, name: str) -> tuple[tuple[str, ...], Site] | None:
    for path in tree.find(filename):
        for node in ast.parse(tree.files[path]).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                return tuple(sorted(values)), Site(path, node.lineno, node.end_lineno)
    return None


def _frozenset_literal(tree, filename: str, name: str) -> tuple[tuple[str, ...], Site]:
    found = _frozenset_literal_opt(tree, filename, name)
    if found is None:
        raise BadSource(f"{tree.origin}: {filename} has no {name}")
    return found


class BlockReader:
    """Reads each registered architecture's DFlash (or, for DSpark, DSpark-then-DFlash) setter."""

    def __init__(self, index: ModuleIndex, kind: str, files: dict[str, str], refusal: str = "not located"):
        self.index, self.kind, self.files = index, kind, files
        self.refusal = refusal  # where start-up refuses a target without the setter (file:line)
        self.held = HeldResolver(index)

    def _text(self, path: str) -> str:
        return self.files.get(path, "")

    @staticmethod
    def setters_for(kind: str) -> tuple[str, ...]:
        return (DSPARK_SETTER, DFLASH_SETTER) if kind == "dspark" else (DFLASH_SETTER,)

    def setters(self) -> tuple[str, ...]:
        return self.setters_for(self.kind)

    def read_all(self) -> list[ArchResult]:
        out, seen = [], set()
        for _module, _expr, cls in self.index.entry_classes():
            if cls is None or cls.name in seen:
                continue
            seen.add(cls.name)
            out.append(replace(self.read(cls), arch=cls.name, cls_site=cls.site()))
        return out

    def read(self, cls: ClassInfo) -> ArchResult:
        for setter in self.setters():
            if self.index.find_method(cls, setter) is not None:
                return self._read(cls, setter, (), (), cls)
        names = " nor ".join(self.setters())
        return ArchResult(cls.name, cls.site(), UNSUPPORTED,
                          reason=f"{cls.site().file} has no {names}; start-up raises ValueError ({self.refusal})")

    def _read(self, cls: ClassInfo, setter: str, via: tuple[Site, ...], checks: tuple, arch: ClassInfo) -> ArchResult:
        base = ArchResult(arch.name, arch.site(), UNRECOGNISED, via=via)
        found = self.index.find_method(cls, setter)
        if found is None:
            return replace(base, status=UNSUPPORTED, reason=f"delegates to {cls.name}, which has no {setter}")
        owner, fn = found
        site = Site(owner.path, fn.lineno, fn.end_lineno)
        reach_reader = ReachReader(self.index, self.held, setter)

        def has(attr: str, name: str) -> bool | None:
            classes, err = reach_reader.inner_classes(cls, attr)
            if err or not classes:
                return None
            answers = {self.index.find_method(c, name) is not None for c in classes}
            return answers.pop() if len(answers) == 1 else None

        try:
            a = SetterReader(owner.path, fn, has, setter=setter, need_default=False, sinks=SINKS).read()
        except Unrecognised as e:
            return replace(base, setter=site, reason=f"{e.message} at {Site(owner.path, e.line or fn.lineno)}")
        checks = checks + a.checks
        if a.delegate is not None:
            attr, _, method = a.delegate.partition("#")
            if attr == "super()" or len(via) > 5:
                return replace(base, setter=site, reason=f"delegation not followed at {a.delegate_site}")
            held, err = ((cls,), None) if attr == "" else reach_reader.inner_classes(cls, attr)
            if err:
                return replace(base, setter=site, reason=f"hands the ids to self.{attr}: {err.message}")
            results = [self._read(h, method or setter, via + (a.delegate_site,), checks, arch) for h in held]
            if len({(r.status, r.rule.key() if r.rule else r.reason) for r in results}) > 1:
                return replace(base, setter=site, reason=f"self.{attr} may hold classes that capture differently")
            return results[0]
        id_checks = []
        for when, where, error, message in checks:
            id_checks.append({"when": when, "error": error, "message": message, "at": "start-up",
                              "source": where.short()})
        tap = AFTER_LAYER_TAPS.get(owner.path.rsplit("/", 1)[-1])
        if tap is not None:
            return self._declared(base, site, owner, a, tap, tuple(id_checks))
        if a.sink_name != "layers_to_capture":
            return replace(base, setter=site, reason=f"stores the ids in {a.sink_name}, whose capture is not read "
                                                     f"({a.sink.site})")
        reach = reach_reader.reach(cls, a.sink.attr, a.sink.via_setter)
        if isinstance(reach, ReachError) and reach.never_read:
            return replace(base, status=UNSUPPORTED, setter=site, reason=f"has {setter} but {reach.message}")
        if isinstance(reach, ReachError):
            return replace(base, setter=site, reason=f"reachable indices: {reach.message}")
        unguarded = next((f.site for f in a.flag_loops if not f.guarded), None)
        if unguarded and reach.unguarded is None:
            reach = replace(reach, unguarded=unguarded)
        explicit = a.explicit
        if _after_layer(self._text(reach.site.path), reach.site.line):
            # the test follows the layer call in the loop body: the output of layer i is captured (Beam)
            reach = replace(reach, min_capture="1", max_capture="N",
                            how=f"capture test at {reach.site.short()} after the layer call: the output of layer i")
            explicit = tuple(ProbedCase(c.shift + 1, c.when, c.site) for c in explicit)
        rule = ProbedRule(default_ids=DEFAULT_IDS, default_shift=0, explicit=explicit, reach=reach,
                          n_from=a.n_from, default_explicit=True, id_checks=tuple(id_checks))
        return replace(base, status=SUPPORTED, rule=rule, setter=site)

    def _declared(self, base: ArchResult, site: Site, owner: ClassInfo, a, tap, id_checks) -> ArchResult:
        test, shift, top, feeds, counted = tap
        line = next((i for i, text in enumerate(self._text(owner.path).splitlines(), 1) if test in text), None)
        if line is None:
            return replace(base, setter=site, reason=f"the declared capture test `{test}` is no longer in {owner.path}")
        where = Site(owner.path, line)
        how = (f"declared: capture test `{test.strip()}` at {where.short()} takes the stream "
               + (f"after layer id (boundary +{shift})" if shift else "entering layer id (boundary id)"))
        reach = Reach("1" if shift else "0", top, where, how, count_check=where if counted else None,
                      branch=where if feeds else None)
        explicit = tuple(ProbedCase(c.shift + shift, c.when, c.site) for c in a.explicit)
        rule = ProbedRule(default_ids=DEFAULT_IDS, default_shift=0, explicit=explicit, reach=reach, n_from=a.n_from,
                          default_explicit=True, id_checks=id_checks)
        return replace(base, status=SUPPORTED, rule=rule, setter=site)


def probe_block(kind: str, source: str | os.PathLike | None = None) -> ProbeResult:
    """SGLang's rules for ``kind`` ("dflash" or "dspark") drafts, from ``source`` (a folder or .whl)."""
    from .sglang import AUX_FILE, read_count_error

    tree = locate("sglang", source, extra_names=(DFLASH_UTILS, DSPARK_CONFIG, SPEC_AUX, SETUP, DRAFT_FILE, AUX_FILE,
                                                 RUNNER))
    version = read_version(tree)
    if kind == "dspark" and not tree.find(DSPARK_CONFIG):  # SGLang serves DSpark drafts from 0.5.16
        raise BadSource(f"{tree.origin}: sglang {version} serves no DSpark drafts (no {DSPARK_CONFIG})")
    if not tree.find(DFLASH_UTILS):  # DFlash drafts from 0.5.11
        raise BadSource(f"{tree.origin}: sglang {version} serves no DFlash drafts (no speculative/{DFLASH_UTILS})")
    refusal, dispatch = _setter_dispatch(tree)
    count_error = next((c for p in tree.find(AUX_FILE) if (c := read_count_error(p, tree.files[p]))), None)
    index = ModuleIndex({p: tree.files[p] for p in tree.model_files()})
    if not index.modules:
        raise BadSource(f"{tree.origin}: none of the files under {tree.models_dir()} could be parsed")
    archs = tuple(BlockReader(index, kind, tree.files, refusal or "not located").read_all())
    places = _find(tree, DFLASH_UTILS, '_cfg_get(draft_hf_config, "target_layer_ids", None)')
    rng = _find(tree, DFLASH_UTILS, "if val < 0 or val >= target_num_layers:")
    empty = _find(tree, DFLASH_UTILS, "if len(resolved) <= 0:")
    default = _find(tree, DFLASH_UTILS, "def build_target_layer_ids(")
    muse = _frozenset_literal_opt(tree, SPEC_AUX, "_MUSE_LAYER_OUTPUT_DRAFT_ARCHITECTURES")  # from 0.5.19
    muse_target = _find(tree, SPEC_AUX, '== "muse_glimmer"') if muse else None
    width = _find(tree, DRAFT_FILE, "DFLASH target_hidden feature dim mismatch")
    dflash_reads = [{"place": "dflash_target_layer_ids", "shift": 0, "empty": "read"},
                    {"place": "target_layer_ids", "shift": 0, "empty": "read"}]
    checks = [{"when": "len(ids) == 0", "error": "ValueError", "at": "start-up", "source": empty.short(),
               "message": "DFLASH dflash_config.target_layer_ids must be non-empty. Got len(target_layer_ids)=0.",
               "places": ["dflash_target_layer_ids", "target_layer_ids"]},
              {"when": "len(ids) > 0 and (min(ids) < 0 or max(ids) >= N)", "error": "ValueError", "at": "start-up",
               "source": rng.short(), "places": ["dflash_target_layer_ids", "target_layer_ids"],
               "message": "DFLASH target_layer_ids contains an out-of-range layer id (target_num_layers=N)."}]
    notes = [f"Ids: dflash_config.target_layer_ids, else top-level target_layer_ids ({places.short()}); each must be in "
             f"0..N-1 ({rng.short()}); none: build_target_layer_ids(N, draft num_hidden_layers) ({default.short()}) = "
             f"{DEFAULT_IDS}, handed to the setter like explicit ids.",
             (f"Muse: a draft with architecture {', '.join(muse[0])} on a muse_glimmer target gets +1 more "
              f"({muse[1].short()}, {muse_target.short()})." if muse else
              "Muse: no _MUSE_LAYER_OUTPUT_DRAFT_ARCHITECTURES in this release (SGLang has it from 0.5.19): no extra "
              "shift for any draft."),
             "The DFlash reader's range check covers the DFlash places only; nothing checks the ids against the "
             "draft's own num_target_layers (a warning only)."]
    if kind == "dspark":
        dspark = _find(tree, DSPARK_CONFIG, '"dspark_target_layer_ids", None')
        merged = _find_opt(tree, DSPARK_CONFIG, '**_get_nested_config(config, "dspark_config"),')  # 0.5.23 on
        alone = merged or _find(tree, DSPARK_CONFIG, 'cfg = _cfg_get(config, "dspark_config", None)')
        dflash_reads.insert(0, {"place": "dspark_target_layer_ids", "shift": 0, "empty": "read"})
        checks.append({"when": "len(ids) == 0", "error": "ValueError", "at": "start-up",
                       "message": "DSpark dspark_target_layer_ids must be a non-empty list of ints",
                       "source": _find(tree, DSPARK_CONFIG, "DSpark dspark_target_layer_ids must be a non-empty").short(),
                       "places": ["dspark_target_layer_ids"]})
        notes.append(f"DSpark: top-level dspark_target_layer_ids wins ({dspark.short()}); "
                     + (f"dspark_config is merged over dflash_config for the other keys ({merged.short()})" if merged else
                        f"dspark_config alone (not dflash_config) is read for the other keys ({alone.short()})")
                     + " but its target_layer_ids is never read; "
                     f"with --speculative-algorithm DSPARK the target's set_dspark_layers_to_capture is called when it "
                     f"has one, else set_dflash_layers_to_capture "
                     f"({dispatch or 'not located'}). DSPARK also requires markov_rank > 0 "
                     "(not modelled).")
    extra = {"draft_kinds": [kind], "id_checks": checks, "title": f"SGLang ({'DSpark' if kind == 'dspark' else 'DFlash'} drafts)",
             "_setter": " / ".join(BlockReader.setters_for(kind)),
             "width_check": {"error": "ValueError", "message": WIDTH_ERROR, "at": "first forward",
                             "source": f"{width.short()} (models/dflash.py project_target_hidden)"},
             "aux_count_from": ["dflash_target_layer_ids", "target_layer_ids", "num_hidden_layers", 3]
             if kind == "dflash" else ["dspark_target_layer_ids", "dflash_target_layer_ids", "target_layer_ids",
                                        "num_hidden_layers", 3],
             **({"_draft_shift": {"architectures": list(muse[0]), "shift": 1, "name": "muse",
                                  "source": f"{muse[1].short()}, {muse_target.short()}",
                                  "targets": sorted(_muse_targets(index))}} if muse else {}),
             "notes": notes}
    return ProbeResult(engine="sglang", version=version, origin=tree.origin,
                       ids_from=tuple(r["place"] for r in dflash_reads), ids_site=places, archs=archs,
                       skipped=tuple(index.skipped), id_reads=tuple(dflash_reads), name=f"sglang-{kind}", extra=extra,
                       count_error=count_error)


def _setter_dispatch(tree) -> tuple[str | None, str | None]:
    """Where start-up hands the ids to the DFlash / DSpark setter: (``file:a-b``, the whole ``if
    dflash_use_aux_hidden_state:`` statement, which raises ValueError for a target without the setter;
    ``file:a-c``, up to the DFlash setter's call), or Nones where it is not found."""
    for name in (SETUP, RUNNER):  # attention_backend_setup.py from 0.5.16, model_runner.py before
        for path in tree.find(name):
            try:
                module = ast.parse(tree.files[path])
            except SyntaxError:
                continue
            for node in ast.walk(module):
                if isinstance(node, ast.If) and ast.unparse(node.test).endswith("dflash_use_aux_hidden_state") and \
                        any(isinstance(n, ast.Raise) for n in ast.walk(node)):
                    call = next((n.lineno for n in ast.walk(node) if isinstance(n, ast.Call) and
                                 isinstance(n.func, ast.Attribute) and n.func.attr == DFLASH_SETTER), node.end_lineno)
                    file = path.rsplit("/", 1)[-1]
                    return f"{file}:{node.lineno}-{node.end_lineno}", f"{file}:{node.lineno}-{call}"
    return None, None


def _muse_targets(index: ModuleIndex) -> set[str]:
    """Architectures whose config is ``model_type: muse_glimmer``: those registered by ``muse_glimmer.py``."""
    return {cls.name for _m, _e, cls in index.entry_classes() if cls is not None and cls.path.endswith("/muse_glimmer.py")}


def _after_layer(text: str, line: int) -> bool:
    """Whether the capture test on ``line`` sits in a ``for`` body after a statement that calls a decoder layer
    (``hidden_states = self.layers[i](...)``, ``layer(...)``): the capture is then of the layer's output."""
    if not text:
        return False
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.For):
            continue
        for i, stmt in enumerate(node.body):
            if not (stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)):
                continue
            if isinstance(stmt, (ast.For, ast.While, ast.With)) and line > stmt.lineno:
                break  # the test is deeper: an inner loop decides
            return any(_calls_layer(s) for s in node.body[:i])
    return False


def _calls_layer(stmt: ast.stmt) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Attribute) and f.value.attr == "layers":
                return True
            if isinstance(f, ast.Name) and f.id == "layer":
                return True
    return False


# ------------------------------------------------------------------ vLLM

VLLM_IDS = "eagle3_utils.py"
VLLM_DFLASH = "qwen3_dflash.py"
VLLM_SPECULATIVE = "speculative.py"
VLLM_ALGOS = "algos.py"
VLLM_WIDTH_ERROR = ("DFlash drafter expects {expected} concatenated aux hidden features but received {captured}. "
                    "This usually means the draft model's target_layer_ids reference layers that do not exist in the "
                    "target model (incompatible draft/target pair).")


def _maybe(tree, filename: str, needle: str, notes: list[str], what: str, version: str) -> Site | None:
    """:func:`_find`, or None with a "not read" note naming the file and the release."""
    try:
        return _find(tree, filename, needle)
    except BadSource:
        notes.append(f"not read in vLLM {version}: {what} ({filename} holds no `{needle}`)")
        return None


def probe_vllm_block(source: str | os.PathLike | None = None, runner: str = "v2") -> ProbeResult:
    """vLLM's rules for DFlash and DSpark drafts: the EAGLE-3 capture and id reader (vLLM feeds every
    aux-state draft through the runner's EAGLE-3 ids reader, which reads the DFlash / DSpark places with their
    +1 and the ``deepseek_v41`` exception where the release does), plus what differs for these drafts, located
    in the wheel and cited: the speculators DFlash loader's id mapping, the draft's fc width and its width error,
    and Qwen3-Omni's DSpark checks. ``runner``: "v2" (``vllm-dflash``) or "v1" (``vllm-v1-dflash``). A fact a
    release's files do not hold is left out with a note; a release without ``qwen3_dflash.py`` serves no DFlash
    draft (:class:`~eagle_audit.probe.vllm.NotServed`)."""
    from .vllm import NotServed, probe_vllm

    result = probe_vllm(source, runner=runner)
    tree = locate("vllm", source, extra_names=(VLLM_IDS,), extra_root="v1",
                  model_dirs=("model_executor/models", "config", "transformers_utils/configs/speculators"))
    version = result.version
    if not tree.find(VLLM_DFLASH):
        raise NotServed(f"{tree.origin}: vLLM {version} serves no DFlash draft (no {VLLM_DFLASH} in "
                        "model_executor/models)")
    missing: list[str] = []
    width = _maybe(tree, VLLM_DFLASH, "DFlash drafter expects {expected} concatenated aux hidden", missing,
                   "the draft's width check", version)
    fc = _maybe(tree, VLLM_DFLASH, "num_features_to_use = len(aux_layers) if aux_layers else config.num_hidden_layers",
                missing, "how the draft sizes fc from the ids", version)
    loader = _maybe(tree, VLLM_ALGOS, 'pre_trained_config["eagle_aux_hidden_state_layer_ids"] = aux_layer_ids', missing,
                    "the speculators DFlash loader", version)
    loader_t = _maybe(tree, VLLM_ALGOS, '"target_layer_ids": [i - 1 for i in aux_layer_ids],', missing,
                      "the speculators DFlash loader's target_layer_ids = aux - 1", version)
    omni_archs, omni_site = _frozenset_literal(tree, VLLM_SPECULATIVE, "_QWEN3_OMNI_TARGET_ARCHITECTURES") \
        if any("_QWEN3_OMNI_TARGET_ARCHITECTURES" in tree.files[p] for p in tree.find(VLLM_SPECULATIVE)) else ((), None)
    if omni_site is None:
        missing.append(f"not read in vLLM {version}: Qwen3-Omni DSpark checks ({VLLM_SPECULATIVE} holds no "
                       "_QWEN3_OMNI_TARGET_ARCHITECTURES)")
    reads = [dict(r) for r in result.id_reads or ()]
    if loader is not None:
        reads.insert(0, {"place": "aux_hidden_state_layer_ids", "shift": 0, "empty": "absent",
                         "only_with": "speculators_model_type"})
    ids_text = ", else ".join(f"{r['place']}{' +1' if r.get('shift') else ' verbatim'}"
                              + (f" (verbatim for model_type {', '.join(r['verbatim_model_types'])})"
                                 if r.get("verbatim_model_types") else "")
                              + (f" (skipped when {r['unless_truthy']} is non-empty)" if r.get("unless_truthy") else "")
                              for r in result.id_reads or ()) or "none"
    notes = [f"vLLM {version} serves DFlash{' and DSpark' if not any(r['kinds'] == ['dspark'] for r in (result.extra or {}).get('refuses', ())) else ''} "
             f"drafts through the EAGLE-3 machinery of its {runner.upper()} runner: the ids are those of its EAGLE-3 "
             f"ids reader ({ids_text}); none: the target model's EAGLE-3 default [2, N//2, N-3], whatever the "
             "draft's depth."]
    if loader is not None:
        notes.append(f"A speculators DFlash config (speculators_model_type dflash) is loaded with "
                     f"eagle_aux_hidden_state_layer_ids = aux_hidden_state_layer_ids ({loader.short()})"
                     + (f" and dflash_config.target_layer_ids = aux - 1 ({loader_t.short()}, vLLM PR #40727)"
                        if loader_t else "") + ": its aux ids are read first, verbatim.")
    if fc is not None and width is not None:
        notes.append(f"The DFlash draft sizes fc for len(those ids), else its own num_hidden_layers ({fc.short()}), "
                     f"and raises ValueError at the first forward when the target hands it another width "
                     f"({width.short()}).")
    extra = {"draft_kinds": ["dflash", "dspark"],
             "title": f"vLLM (DFlash / DSpark drafts, {'V2' if runner == 'v2' else 'V1'} model runner)",
             "aux_count_from": [r["place"] for r in reads] + ["num_hidden_layers", 3]}
    refuses = list((result.extra or {}).get("refuses", ()))
    if refuses:
        extra["refuses"] = refuses
    if width is not None:
        extra["width_check"] = {"error": "ValueError", "message": VLLM_WIDTH_ERROR, "at": "first forward",
                                "source": f"{width.short()} (Qwen3DFlashForCausalLM.combine_hidden_states)"}
    if omni_site is not None:
        omni_order = _find(tree, VLLM_SPECULATIVE, 'draft_hf_config, "dflash_config", "target_layer_ids"')
        omni_inc = _find(tree, VLLM_SPECULATIVE, "if list(target_layer_ids) != sorted(set(target_layer_ids)):")
        omni_rng = _find(tree, VLLM_SPECULATIVE,
                         "if target_layer_ids[0] < 0 or target_layer_ids[-1] >= target_num_layers:")
        omni_checks = [
            {"when": "len(ids) == 0", "error": "ValueError", "at": "start-up", "as_read": True,
             "source": omni_order.short(),
             "message": "Qwen3-Omni DSpark requires a non-empty target_layer_ids list in the draft config."},
            {"when": "list(ids) != sorted(set(ids))", "error": "ValueError", "at": "start-up", "as_read": True,
             "source": omni_inc.short(),
             "message": "Qwen3-Omni DSpark target_layer_ids must be unique and strictly increasing."},
            {"when": "min(ids) < 0 or max(ids) >= N", "error": "ValueError", "at": "start-up", "as_read": True,
             "source": omni_rng.short(),
             "message": "Qwen3-Omni DSpark target_layer_ids must be zero-based text-layer indices in [0, N-1]."}]
        extra["_arch_checks"] = {"targets": list(omni_archs), "name": "qwen3_omni", "id_checks": omni_checks}
        notes.append(
            f"Qwen3-Omni targets ({', '.join(omni_archs)}, {omni_site.short()}) check a DSpark draft's ids as read "
            f"(dflash_config.target_layer_ids, else dspark_target_layer_ids, else target_layer_ids; "
            f"{omni_order.short()}): non-empty, strictly increasing, 0..N-1. Modelled for the place the capture "
            "reads; the check's own place order is noted, not modelled.")
    extra["notes"] = notes + [n for n in (result.extra or {}).get("notes", ()) if not n.startswith("refuses:")] \
        + missing
    name = "vllm-dflash" if runner == "v2" else "vllm-v1-dflash"
    return replace(result, name=name, id_reads=tuple(reads), ids_from=tuple(r["place"] for r in reads), extra=extra)
