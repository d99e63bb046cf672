"""vLLM: capture rules from every registered architecture's model file, the ids' source from the model runner.

vLLM registers an architecture in ``model_executor/models/registry.py``: ``"Arch": ("module", "Class")``,
the module either a file of ``model_executor/models/`` or a dotted package name such as
``vllm.models.deepseek_v4`` (``registry.py`` ``_resolve_module_name``), whose ``__init__.py`` picks a
per-platform implementation (``nvidia/``, ``amd/``, ...). The probe reads the implementation vLLM imports
on an NVIDIA GPU (:func:`_platform_default`) and says so. At start-up the runner reads the draft's ids (V2
runner, the default: ``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``
``get_eagle3_aux_layers_from_config``; V1 runner: ``v1/worker/gpu_model_runner.py``
``_get_eagle3_aux_layers_from_config``), else the model's ``get_eagle3_default_aux_hidden_state_layers()``
(``interfaces.py`` ``SupportsEagle3``), and hands them to ``set_aux_hidden_state_layers``, which stores
them verbatim (no shift). The holder of the ids is ``self.model``, else (SupportsEagle3's default setter)
``self.language_model`` or its ``.model``, resolved through ``init_vllm_registered_model(architectures=[...])``
when the class is named there.

Three capture shapes are recognised in a decoder's ``forward``:

* the shared ``EagleModelMixin._maybe_add_hidden_state(aux, k, hidden_states, residual)``: a call with
  ``self.start_layer`` before the loop (index 0 = the embedding output) and ``idx + 1`` after each
  layer (so index N, the pre-norm final state, is reachable): id k = the stream entering layer k;
* DeepSeek's in-loop ``if idx in self.aux_hidden_state_layers: hidden_states + residual`` before each
  layer (index 0 unreachable: ``residual`` is None there) and ``self.end_layer in ...`` after the loop;
* Kimi's in-loop ``if (idx + 1) in self.aux_hidden_state_layers: hidden_states + residual`` after each
  layer, with ``self.start_layer in ...`` before the loop (index 0 = the embedding output).

Anything else is reported ``unrecognised`` with its file and line, never guessed. Nothing is imported:
files are read by :func:`~eagle_audit.probe.source.locate` and resolved by
:class:`~eagle_audit.probe.modules.ModuleIndex`.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import replace

from ..errors import InputNotFound
from . import vllm_release as release
from .ids_reader import read_id_places, read_ids_from
from .modules import ClassInfo, ModuleIndex
from .results import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbedCase, ProbedRule, ProbeResult,
                      Reach, Site)
from .source import BadSource, SourceTree, locate, parse_python

PACKAGE = "vllm"
MODELS = "vllm/model_executor/models/"
# packages registered by dotted module name ("vllm.models.deepseek_v4"): per-platform implementations
OUTSIDE = "vllm/models/"
REGISTRY = MODELS + "registry.py"
INTERFACES = MODELS + "interfaces.py"
INTERFACES_MODULE = "vllm.model_executor.models.interfaces"
#: runner -> (file, function) that reads the draft's ids
IDS_READERS = {
    "v2": ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "get_eagle3_aux_layers_from_config"),
    "v1": ("vllm/v1/worker/gpu_model_runner.py", "_get_eagle3_aux_layers_from_config"),
}
ENGINES = {"v2": "vllm", "v1": "vllm-v1"}
#: runner -> the file whose absence means the release has no such runner (0.34.0 has no V1 runner)
RUNNER_FILES = {"v2": "vllm/v1/worker/gpu/model_runner.py", "v1": "vllm/v1/worker/gpu_model_runner.py"}
SETTER = "set_aux_hidden_state_layers"
#: the model's default ids: ``get_eagle3_aux_hidden_state_layers`` up to 0.17, renamed from 0.18.0
DEFAULTS = ("get_eagle3_default_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers")
DEFAULT = DEFAULTS[0]
# model files worth parsing: the rest cannot take part in EAGLE-3 capture
_MARKERS = ("SupportsEagle3", "EagleModelMixin", SETTER, "aux_hidden_state_layers")


def _load(source: str | os.PathLike | None) -> SourceTree:
    names = {p.rsplit("/", 1)[-1] for p in (*(f for f, _ in IDS_READERS.values()), *RUNNER_FILES.values(),
                                            *release.WEIGHT_FILES)}
    tree = locate(PACKAGE, source, extra_names=tuple(sorted(names)), model_dirs=("model_executor/models", "models"),
                  extra_root="v1", extra_paths=release.EXTRA_PATHS)
    if REGISTRY not in tree.files:
        raise InputNotFound(f"{tree.origin}: no vllm source (expected {REGISTRY})")
    return tree


def _index_files(src: SourceTree) -> dict[str, str]:
    """The model files that can take part in EAGLE-3 capture (a marker in the text), the interfaces, and
    the ``__init__.py`` of every package under ``vllm/models/`` (they pick and re-export a platform's
    classes)."""
    return {p: t for p, t in ((p, src.files[p]) for p in src.model_files())
            if p == INTERFACES or any(m in t for m in _MARKERS) or (p.startswith(OUTSIDE) and p.endswith("/__init__.py"))}


def read_version(src: SourceTree) -> str:
    for name in ("vllm/_version.py", "vllm/version.py"):
        text = src.files.get(name)
        if not text:
            continue
        try:
            tree = parse_python(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in targets):
                    return node.value.value
    return src.dist_version or "unknown"


# ---------------------------------------------------------------------------------------------- ids


class NotServed(InputNotFound):
    """The release has no such runner, or its runner serves no EAGLE-3 draft: nothing to probe (exit 2)."""


def _runner_present(src: SourceTree, runner: str) -> None:
    """Raise :class:`NotServed` when ``runner`` does not exist in this release, or (V2) never sets aux layers."""
    version = read_version(src)
    reader = IDS_READERS[runner][0]
    if not any(f in src.files for f in RUNNER_FILES.values()):
        return  # a partial tree (model files only): nothing says which runners the release has
    if MODELS + "llama_eagle3.py" not in src.files:
        raise NotServed(f"{src.origin}: vLLM {version} serves no EAGLE-3 draft (no {MODELS}llama_eagle3.py)")
    if runner == "v1" and RUNNER_FILES["v1"] not in src.files:
        raise NotServed(f"{src.origin}: vLLM {version} has no V1 model runner ({RUNNER_FILES['v1']} not in this "
                        "source): probe vllm (the V2 runner) instead")
    if runner == "v2" and reader not in src.files:
        if RUNNER_FILES["v2"] not in src.files:
            raise NotServed(f"{src.origin}: vLLM {version} has no V2 model runner ({RUNNER_FILES['v2']} not in this "
                            "source): probe vllm-v1 instead")
        raise NotServed(f"{src.origin}: vLLM {version}'s V2 model runner (opt-in, VLLM_USE_V2_MODEL_RUNNER=1) never "
                        f"sets aux hidden-state layers ({reader} not in this source; {RUNNER_FILES['v2']} reads no "
                        "EAGLE-3 ids): it serves no EAGLE-3 draft; probe vllm-v1 instead")


def _fixed_default_call(src: SourceTree, path: str) -> Site | None:
    """``self.model.set_aux_hidden_state_layers(self.model.get_eagle3_aux_hidden_state_layers())`` in ``path``:
    the runner hands the model's own default to the setter and reads no draft ids (vLLM up to 0.11)."""
    try:
        tree = parse_python(src.files[path], filename=path)
    except SyntaxError:
        return None
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == SETTER and len(n.args) == 1 \
                and isinstance(n.args[0], ast.Call) and isinstance(n.args[0].func, ast.Attribute) \
                and n.args[0].func.attr in DEFAULTS:
            return Site(path, n.lineno, n.end_lineno)
    return None


def read_ids(src: SourceTree, runner: str) -> tuple[tuple[str, ...] | None, Site | None, str | None]:
    """(places, site, problem): where ``runner`` reads the draft's ids; ``problem`` names file:line when
    the reader exists but its shape is not recognised. ``places`` is empty when the runner reads no ids at
    all (it hands the model's default to the setter; ``site`` is that call)."""
    path, function = IDS_READERS[runner]
    text = src.files.get(path)
    if text is None:
        return None, None, f"{path}: not in this source"
    try:
        tree = parse_python(text, filename=path)
    except SyntaxError as e:
        return None, None, f"{path}:{e.lineno}: {e.msg}"
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == function), None)
    if fn is None:
        fixed = _fixed_default_call(src, path)
        if fixed is not None:
            return (), fixed, None
        return None, None, f"{path}: no function {function}, and no {SETTER}(<the model's default>) call"
    found = read_ids_from(path, text, function)
    if not found:
        return None, None, f"{path}:{fn.lineno}: {function} reads no eagle_aux_hidden_state_layer_ids or " \
                           f"eagle_config layer_ids in a recognised shape (unrecognised)"
    return found[0], found[1], None


# ----------------------------------------------------------------------------------------- classes


def _module_of(stem: str) -> str:
    """A registry entry's module: "llama" -> vllm.model_executor.models.llama; dotted names as given
    (``registry.py`` ``_resolve_module_name``)."""
    return stem if "." in stem else f"vllm.model_executor.models.{stem}"


_CUDA_TRUE = {"is_cuda", "is_cuda_alike"}


def _on_cuda(test: ast.expr) -> bool | None:
    """A platform test as it evaluates on an NVIDIA GPU: ``current_platform.is_rocm()`` False,
    ``is_cuda()`` True, ``device_type == "tpu"`` False, ``TYPE_CHECKING`` False; None when not a
    platform test."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return False
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr.startswith("is_") \
            and isinstance(test.func.value, ast.Name) and test.func.value.id == "current_platform":
        return test.func.attr in _CUDA_TRUE
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) \
            and isinstance(test.left, ast.Attribute) and test.left.attr == "device_type" \
            and isinstance(test.comparators[0], ast.Constant):
        return (test.comparators[0].value == "cuda") == isinstance(test.ops[0], ast.Eq)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = _on_cuda(test.operand)
        return None if v is None else not v
    if isinstance(test, ast.BoolOp):
        vals = [_on_cuda(v) for v in test.values]
        if isinstance(test.op, ast.Or):
            return True if True in vals else (None if None in vals else False)
        return False if False in vals else (None if None in vals else True)
    return None


def _platform_default(body: list[ast.stmt]) -> list[ast.ImportFrom]:
    """The ``from ... import`` statements that run on an NVIDIA GPU: unconditional ones, and of an
    ``if current_platform.is_rocm(): ... elif ...: ... else: ...`` chain the branch whose test holds there
    (:func:`_on_cuda`; a test that is not a platform test: the ``else``)."""
    out: list[ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If):
            out.extend(_platform_default(node.body if _on_cuda(node.test) else node.orelse))
    return out


def _where(site: Site) -> str:
    """``file.py:12`` under model_executor/models (one flat folder), the full path elsewhere (``vllm/models/``
    holds many ``model.py``)."""
    return site.short() if site.path.startswith(MODELS) else \
        f"{site.path}:{site.line}" + (f"-{site.end_line}" if site.end_line and site.end_line != site.line else "")


def _method(cls: ClassInfo, name: str) -> ast.FunctionDef | None:
    fn = cls.method(name)
    return fn if isinstance(fn, ast.FunctionDef) else None


def _self_chain(node: ast.expr) -> list[str] | None:
    """``self.a.b`` -> ["a", "b"]; None when not rooted at ``self``."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.insert(0, node.attr)
        node = node.value
    return out if out and isinstance(node, ast.Name) and node.id == "self" else None


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


# ------------------------------------------------------------------------------------ default ids


def read_default(fn: ast.FunctionDef, path: str) -> tuple[str | None, Site]:
    """``(2, num_layers // 2, num_layers - 3)`` with ``num_layers = len(...)`` -> "[2, N // 2, N - 3]"."""
    site = Site(path, fn.lineno, fn.end_lineno)
    lens = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name) and n.value.func.id == "len" for t in n.targets
            if isinstance(t, ast.Name)}
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1 or not isinstance(returns[0].value, (ast.Tuple, ast.List)):
        return None, site
    parts = []
    for elt in returns[0].value.elts:
        names = {n.id for n in ast.walk(elt) if isinstance(n, ast.Name)}
        if not names <= lens:
            return None, site
        text = ast.unparse(elt)
        for n in names:
            text = re.sub(rf"\b{re.escape(n)}\b", "N", text)
        parts.append(text)
    return f"[{', '.join(parts)}]", Site(path, returns[0].lineno)


# ---------------------------------------------------------------------------------- capture shapes


def _in_loop(fn: ast.FunctionDef) -> set[int]:
    ids: set[int] = set()
    for loop in ast.walk(fn):
        if isinstance(loop, ast.For):
            ids.update(id(n) for n in ast.walk(loop) if n is not loop)
    return ids


def _is_aux_attr(node: ast.expr) -> bool:
    return _self_attr(node) == "aux_hidden_state_layers"


def read_capture(fn: ast.FunctionDef, path: str) -> tuple[Reach | None, str]:
    """The reach of one decoder ``forward``, or (None, why)."""
    looped = _in_loop(fn)
    mixin = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "_maybe_add_hidden_state" and len(n.args) >= 2]
    if mixin:
        pre = [c for c in mixin if id(c) not in looped]
        inside = [c for c in mixin if id(c) in looped]
        after = any(isinstance(c.args[1], ast.BinOp) and isinstance(c.args[1].op, ast.Add)
                    and isinstance(c.args[1].right, ast.Constant) and c.args[1].right.value == 1 for c in inside)
        start = any(_self_attr(c.args[1]) == "start_layer" or (isinstance(c.args[1], ast.Constant)
                    and c.args[1].value == 0) for c in pre)
        end = any(_self_attr(c.args[1]) == "end_layer" for c in pre)
        if not inside or not (after or end):
            return None, f"{path}:{mixin[0].lineno}: _maybe_add_hidden_state calls in an unrecognised shape"
        lines = [c.lineno for c in mixin]
        how = ("EagleModelMixin._maybe_add_hidden_state: id k = stream entering layer k"
               + ("; index start_layer before the loop" if start else "")
               + ("; idx + 1 after each layer, so N (pre-norm final) is reachable" if after else "; end_layer after the loop"))
        return Reach("0" if start else "1", "N", Site(path, min(lines), max(lines)), how), ""
    tests = [(n, c) for n in ast.walk(fn) if isinstance(n, ast.If) for c in ast.walk(n.test)
             if isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], ast.In)
             and _is_aux_attr(c.comparators[0])]
    if not tests:
        return None, f"{path}:{fn.lineno}: no capture of aux_hidden_state_layers in forward"
    before = [(t, c) for t, c in tests if id(t) in looped and isinstance(c.left, ast.Name)]
    after = [(t, c) for t, c in tests if id(t) in looped and isinstance(c.left, ast.BinOp)
             and isinstance(c.left.op, ast.Add) and isinstance(c.left.left, ast.Name)
             and isinstance(c.left.right, ast.Constant) and c.left.right.value == 1]
    post = [t for t, c in tests if id(t) not in looped and _self_attr(c.left) == "end_layer"]
    pre = [t for t, c in tests if id(t) not in looped and _self_attr(c.left) == "start_layer"]
    if len(before) + len(after) != 1:
        return None, f"{path}:{tests[0][0].lineno}: aux_hidden_state_layers tested in an unrecognised shape"
    test, cmp = (before or after)[0]
    adds = [n for st in test.body for n in ast.walk(st) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)
            and isinstance(n.left, ast.Name) and isinstance(n.right, ast.Name)
            and "residual" in (n.left.id, n.right.id) and n.left.id != n.right.id]  # hidden_states (gpt_oss: x)
    guarded = any(isinstance(n, ast.IfExp) for st in test.body for n in ast.walk(st))
    # a hyper-connection (mHC) model (DeepSeek-V4): mhc_post(...) rebuilds the streams, ``.mean(dim=1)`` averages
    # them: Bk on an mHC target (docs/coordinate.md), the default view, so the rule is an ordinary one
    mhc_mean = _mhc_mean(test.body)
    if not adds and not mhc_mean:
        return None, f"{path}:{test.lineno}: in-loop capture does not add hidden_states + residual"
    loop = next(lp for lp in ast.walk(fn) if isinstance(lp, ast.For) and any(n is test for n in ast.walk(lp)))
    layer_calls = [st.lineno for st in loop.body if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)
                   and isinstance(st.value.func, ast.Name) and st.value.func.id == "layer"]
    if before:  # the test comes before the layer call in the loop body: the stream entering layer idx
        if not layer_calls or min(layer_calls) < test.lineno:
            return None, f"{path}:{test.lineno}: in-loop capture is not before the layer call"
        how = f"in-loop `{ast.unparse(cmp)}` before each layer: id k = stream entering layer k"
        min_capture = "0" if guarded else "1"
        if not guarded:
            how += " (hidden_states + residual; residual is None at index 0)"
        if post:
            how += f"; `{ast.unparse(post[0].test)}` after the loop: N reachable"
        end = max([test.lineno] + [p.lineno for p in post])
        none_add = None if guarded else Site(path, adds[0].lineno, adds[0].end_lineno)
        return Reach(min_capture, "N" if post else "N - 1", Site(path, test.lineno, end), how, none_add=none_add), ""
    # `(idx + 1) in aux` after the layer call: the stream leaving layer idx = entering layer idx + 1
    if not layer_calls or max(layer_calls) > test.lineno:
        return None, f"{path}:{test.lineno}: in-loop `(idx + 1) in aux_hidden_state_layers` is not after the layer call"
    how = (f"in-loop `{ast.unparse(cmp)}` after each layer (" + ("the mean over the hyper-connection streams "
           "mhc_post rebuilds: Bk on an mHC target" if mhc_mean else "hidden_states + residual")
           + "): id k = stream entering layer k")
    if pre:
        how += f"; `self.start_layer in self.aux_hidden_state_layers` before the loop: index 0 reachable"
    start = min([test.lineno] + [p.lineno for p in pre])
    return Reach("0" if pre else "1", "N", Site(path, start, test.lineno), how), ""


def _mhc_mean(body: list[ast.stmt]) -> bool:
    """Whether ``body`` averages the streams an ``mhc_post*`` call rebuilds (``x.mean(dim=1)``)."""
    calls = [n for st in body for n in ast.walk(st) if isinstance(n, ast.Call)]
    rebuilds = any("mhc_post" in ast.unparse(c.func) for c in calls)
    means = any(isinstance(c.func, ast.Attribute) and c.func.attr == "mean" and
                any(k.arg == "dim" and isinstance(k.value, ast.Constant) and k.value.value == 1 for k in c.keywords)
                for c in calls)
    return rebuilds and means


# -------------------------------------------------------------------------------------------- probe


class _Prober:
    def __init__(self, src: SourceTree):
        self.src = src
        self.idx = ModuleIndex(_index_files(src))
        self.interfaces = self.idx.modules.get(INTERFACES_MODULE)
        if self.interfaces is None:
            raise BadSource(f"{src.origin}: {INTERFACES} missing or unparseable")
        self.holders: dict[int, tuple[Reach | None, str]] = {}
        self.entries = {e[0]: e for e in self.registry()}

    def registry(self) -> list[tuple[str, str, str, int]]:
        try:
            tree = parse_python(self.src.files[REGISTRY], filename=REGISTRY)
        except SyntaxError as e:  # without its registry nothing of a vLLM source can be probed
            raise BadSource(f"{self.src.origin}: {REGISTRY}{f':{e.lineno}' if e.lineno else ''}: the model registry cannot be parsed ({e.msg})") from None
        out: dict[str, tuple[str, str, str, int]] = {}
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if not isinstance(value, ast.Dict):
                continue
            for k, v in zip(value.keys, value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2 \
                        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts):
                    out.setdefault(k.value, (k.value, v.elts[0].value, v.elts[1].value, k.lineno))
        return list(out.values())

    def registered(self, module: str, clsname: str) -> tuple[ClassInfo | None, Site | None]:
        """The class a registry entry names, and, when a package picks it per platform, the import line of
        the CUDA default it was taken from."""
        mod = self.idx.modules.get(module)
        if mod is None:
            return None, None
        if clsname in mod.classes:
            return mod.classes[clsname], None
        for node in _platform_default(mod.tree.body):
            for alias in node.names:
                if (alias.asname or alias.name) == clsname:
                    anchor = module.split(".") if mod.path.endswith("/__init__.py") else module.split(".")[:-1]
                    base = ".".join(anchor[:len(anchor) - node.level + 1] + ([node.module] if node.module else [])) \
                        if node.level else node.module or ""
                    found = self.idx.resolve_class(base, ast.Name(alias.name)) if base in self.idx.modules else None
                    return found, Site(mod.path, node.lineno)
        return self.idx.resolve_class(module, ast.Name(clsname)), None

    def _eagle_mro(self, cls: ClassInfo) -> bool:
        return any(c.name in ("SupportsEagle3", "EagleModelMixin") or (c.path != INTERFACES and _method(c, SETTER))
                   for c in self.idx.mro(cls))

    def _init_attr(self, cls: ClassInfo, attr: str) -> ClassInfo | None:
        """The class assigned to ``self.<attr>`` in an ``__init__`` of the MRO."""
        for c in self.idx.mro(cls):
            init = _method(c, "__init__")
            if init is None:
                continue
            for n in ast.walk(init):
                if isinstance(n, ast.Assign) and any(_self_attr(t) == attr for t in n.targets) \
                        and isinstance(n.value, ast.Call):
                    found = self._registered_call(n.value) or self._constructed(cls, c, n.value.func)
                    if found:
                        return found
        return None

    def _registered_call(self, call: ast.Call) -> ClassInfo | None:
        """``init_vllm_registered_model(..., architectures=["X"])``: the class registered for X."""
        if not (isinstance(call.func, ast.Name) and call.func.id == "init_vllm_registered_model"):
            return None
        kw = next((k.value for k in call.keywords if k.arg == "architectures"), None)
        if isinstance(kw, (ast.List, ast.Tuple)) and len(kw.elts) == 1 and isinstance(kw.elts[0], ast.Constant):
            entry = self.entries.get(kw.elts[0].value)
            if entry is not None:
                return self.registered(_module_of(entry[1]), entry[2])[0]
        return None

    def _language_holder(self, cls: ClassInfo) -> ClassInfo | None:
        """The decoder SupportsEagle3's default setter reaches through ``self.language_model``
        (``getattr(parent_ref, "model", parent_ref)``), when it is built from a class the files name."""
        lm = self._init_attr(cls, "language_model")
        if lm is None:
            return None
        inner = self._init_attr(lm, "model")
        return inner if inner is not None else lm

    def _constructed(self, cls: ClassInfo, where: ClassInfo, func: ast.expr) -> ClassInfo | None:
        """The class ``func(...)`` builds: ``Name(...)``, ``self.model_cls(...)`` (a class attribute) or
        ``self._init_model(...)`` (a method returning ``Name(...)``)."""
        if isinstance(func, ast.Name):
            return self.idx.resolve_class(where.module, func)
        attr = _self_attr(func)
        if attr is None:
            return None
        found = self.idx.find_class_attr(cls, attr)
        if found is not None and isinstance(found[1], (ast.Name, ast.Attribute)):
            return self.idx.resolve_class(found[0].module, found[1])
        method = self.idx.find_method(cls, attr)
        if method is not None:
            rets = [r.value for r in ast.walk(method[1]) if isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
                    and isinstance(r.value.func, ast.Name)]
            if len(rets) == 1:
                return self.idx.resolve_class(method[0].module, rets[0].func)
        return None

    def _holder_reach(self, cls: ClassInfo) -> tuple[Reach | None, str]:
        if id(cls) not in self.holders:
            fwd = self.idx.find_method(cls, "forward")
            if fwd is None or not isinstance(fwd[1], ast.FunctionDef):
                self.holders[id(cls)] = (None, f"{cls.path}:{cls.node.lineno}: {cls.name} has no forward")
            else:
                self.holders[id(cls)] = read_capture(fwd[1], fwd[0].path)
        return self.holders[id(cls)]

    def _all_mixin_holders(self) -> tuple[Reach | None, str]:
        """When the holder is only known at run time: every parsed EagleModelMixin decoder's reach, if all agree."""
        reaches: dict[tuple, Reach] = {}
        odd: list[str] = []
        for mod in self.idx.modules.values():
            if not mod.path.startswith(MODELS):
                continue
            for cls in mod.classes.values():
                if any(isinstance(b, ast.Name) and b.id == "EagleModelMixin" for b in cls.node.bases) \
                        and self.idx.find_method(cls, "forward"):
                    reach, why = self._holder_reach(cls)
                    if reach is None:
                        odd.append(why.split(": ", 1)[0].rsplit("/", 1)[-1])
                        continue
                    reaches.setdefault((reach.min_capture, reach.max_capture), reach)
        if len(reaches) != 1:
            return None, "EagleModelMixin decoders capture in different shapes"
        reach = next(iter(reaches.values()))
        how = reach.how + "; holder built at run time: every recognised EagleModelMixin decoder captures this way" \
            + (f" (not recognised: {', '.join(sorted(odd))})" if odd else "")
        return replace(reach, how=how), ""

    def default(self, cls: ClassInfo) -> tuple[str | None, Site]:
        for name in DEFAULTS:
            found = self.idx.find_method(cls, name)
            if found is not None and isinstance(found[1], ast.FunctionDef):
                return read_default(found[1], found[0].path)
        sup = self.interfaces.classes.get("SupportsEagle3")
        fn = next((f for name in DEFAULTS if sup and (f := _method(sup, name))), None)
        if fn is None:
            return None, Site(INTERFACES, 1)
        return read_default(fn, INTERFACES)

    def arch(self, arch: str, stem: str, clsname: str, line: int) -> ArchResult:
        reg = Site(REGISTRY, line)
        module = _module_of(stem)
        cls, picked = self.registered(module, clsname)
        if cls is None:
            path = module.replace(".", "/")
            return ArchResult(arch, picked or reg, UNSUPPORTED, reason=f"{path}: {clsname} has no EAGLE-3 support "
                              f"(no SupportsEagle3 / EagleModelMixin / {SETTER} in its file)")
        site = cls.site()
        via = f" (CUDA default picked at {_where(picked)})" if picked else ""
        if not self._eagle_mro(cls):
            return ArchResult(arch, site, UNSUPPORTED, reason=f"{_where(site)} {clsname}{via} neither inherits "
                              f"SupportsEagle3 nor defines {SETTER}")
        own = next((c for c in self.idx.mro(cls) if c.path != INTERFACES and _method(c, SETTER)), None)
        if own is not None:
            fn = _method(own, SETTER)
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr in (SETTER, "_set_aux_hidden_state_layers") and _self_attr(n.func.value)]
            if calls:
                target = _self_attr(calls[0].func.value)
                setter = Site(own.path, fn.lineno, fn.end_lineno)
                return ArchResult(arch, site, DELEGATING_UNRESOLVED, setter=setter,
                                  reason=f"{_where(setter)}: hands the ids to self.{target}.{calls[0].func.attr}, "
                                         f"whose class is built at run time (not resolved statically){via}")
        default, dsite = self.default(cls)
        if default is None:
            return ArchResult(arch, site, UNRECOGNISED, reason=f"{_where(dsite)}: {' / '.join(DEFAULTS)} in an "
                              f"unrecognised shape{via}")
        if own is not None:
            fn = _method(own, SETTER)
            setter = Site(own.path, fn.lineno, fn.end_lineno)
            chain: list[str] = []  # self.model / self.language_model.model (VL wrappers before 0.18)
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute) \
                        and n.targets[0].attr == "aux_hidden_state_layers" \
                        and isinstance(n.value, ast.Name) and n.value.id == fn.args.args[-1].arg:
                    chain = _self_chain(n.targets[0].value) or []
            runtime = next((ast.unparse(n.targets[0]) for n in ast.walk(fn) if isinstance(n, ast.Assign)
                            and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute)
                            and n.targets[0].attr == "aux_hidden_state_layers" and not chain
                            and "get_language_model()" in ast.unparse(n.targets[0])), None)
            if runtime is not None:  # VL wrappers before 0.18: the language model is built from text_config
                return ArchResult(arch, site, DELEGATING_UNRESOLVED, setter=setter,
                                  reason=f"{_where(setter)}: {runtime} = layers: the language model is built from "
                                         f"the config's text_config at run time (not resolved statically){via}")
            # the __init__ that runs is the first of the registered class's MRO, and ``self.model_cls`` is looked
            # up on that class (DeepseekV32ForCausalLM sets model_cls and inherits DeepseekV2's setter)
            holder = self._init_attr(cls, chain[0]) if chain else None
            for link in chain[1:]:
                holder = self._init_attr(holder, link) if holder is not None else None
            attr = ".".join(chain)
            if holder is None:
                return ArchResult(arch, site, UNRECOGNISED, setter=setter,
                                  reason=f"{_where(setter)}: {SETTER} body not recognised (expected "
                                         f"self.<model>.aux_hidden_state_layers = layers with a resolvable <model>){via}")
            reach, why = self._holder_reach(holder)
            n_from = f"len(self.{attr}.layers)"
        else:
            sup = self.interfaces.classes.get("SupportsEagle3")
            fn = _method(sup, SETTER) if sup else None
            if fn is None:
                return ArchResult(arch, site, UNRECOGNISED, reason=f"{_where(site)} {clsname}: no {SETTER} of its "
                                  f"own and none in {INTERFACES} SupportsEagle3{via}")
            setter = Site(INTERFACES, fn.lineno, fn.end_lineno)
            holder = self._init_attr(cls, "model")
            if holder is None or not self._eagle_mro(holder):
                holder = self._language_holder(cls)
            if holder is not None and self._eagle_mro(holder):
                reach, why = self._holder_reach(holder)
            else:
                reach, why = self._all_mixin_holders()
            n_from = "len(holder.layers)"
        if reach is None:
            return ArchResult(arch, site, UNRECOGNISED, setter=setter, reason=why + via)
        if picked:  # every other field of the reach (index failures, branch, ...) stays as read
            reach = replace(reach, how=reach.how + via)
        rule = ProbedRule(default, 0, (ProbedCase(0, None, setter),), reach, n_from)
        return ArchResult(arch, site, SUPPORTED, rule=rule, setter=setter)


def probe_vllm(source: str | os.PathLike | None = None, runner: str = "v2") -> ProbeResult:
    """Probe vLLM's EAGLE-3 capture rules from ``source`` (a folder or a .whl) or the installed copy;
    ``runner``: "v2" (the V2 model runner) or "v1" (the V1 runner, VLLM_USE_V2_MODEL_RUNNER=0): where the ids
    are read. Besides the rules: what the release refuses (:mod:`.vllm_release`) and how the runner loads a
    draft's own embed_tokens / lm_head (``refuses``, ``draft_weights``). Raises :class:`NotServed` when the
    release has no such runner, or its V2 runner serves no EAGLE-3 draft."""
    src = _load(source)
    _runner_present(src, runner)
    version = read_version(src)
    methods = release.read_methods(src)
    prober = _Prober(src)
    archs = [prober.arch(*entry) for entry in prober.registry()]
    places, site, problem = read_ids(src, runner)
    path, function = IDS_READERS[runner]
    reads = read_id_places(path, src.files[path], function) if places else None
    if reads:
        places = tuple(r["place"] for r in reads[0])
    skipped = list(prober.idx.skipped)
    if problem:
        skipped.append(f"ids reader unrecognised: {problem}")
    notes: list[str] = []
    if places == ():
        notes.append(f"ids: this release's {runner.upper()} runner reads no draft ids: {site.path}:{site.line} hands "
                     "the target model's own default to the setter, so every draft is fed the default ids whatever "
                     "its config says (ids_from is empty)")
    refuses = release.method_refusals(src, version, methods)
    if methods.problem:
        notes.append(f"refuses: speculative methods not read: {methods.problem}")
    elif not methods.validated:
        notes.append(f"refuses: not read: SpeculativeConfig ({methods.site.path}) is a stdlib dataclass here, so "
                     f"its SpeculativeMethod Literal (line {methods.site.line}) is not enforced; what this release "
                     "does with a dflash / dspark method is not read")
    if runner == "v1":
        v1, why = release.v1_refusals(src)
        refuses += [r for r in v1 if r["kinds"] not in [x["kinds"] for x in refuses]]
        if why:
            notes.append(f"refuses: {why}")
    weights, weight_notes = release.draft_weights(src, runner)
    notes += weight_notes
    extra = {"refuses": refuses, "notes": notes, "_methods": list(methods.names)}
    if weights:
        extra["draft_weights"] = weights
    return ProbeResult(engine=ENGINES[runner], version=version, origin=src.origin, ids_from=places,
                       ids_site=site, archs=tuple(archs), skipped=tuple(skipped),
                       id_reads=reads[0] if reads else None, extra=extra)


def probe_vllm_v1(source: str | os.PathLike | None = None) -> ProbeResult:
    return probe_vllm(source, runner="v1")
