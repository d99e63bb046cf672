"""vLLM: capture rules from ``vllm/model_executor/models/*.py``, the ids' source from the model runner.

vLLM registers an architecture in ``model_executor/models/registry.py`` (``"Arch": ("module",
"Class")``). At start-up the runner reads the draft's ids (V2 runner, the default:
``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py`` ``get_eagle3_aux_layers_from_config``; V1 runner:
``v1/worker/gpu_model_runner.py`` ``_get_eagle3_aux_layers_from_config``), else the model's
``get_eagle3_default_aux_hidden_state_layers()`` (``interfaces.py`` ``SupportsEagle3``), and hands them
to ``set_aux_hidden_state_layers``, which stores them verbatim (no shift).

Two capture shapes are recognised in a decoder's ``forward``:

* the shared ``EagleModelMixin._maybe_add_hidden_state(aux, k, hidden_states, residual)``: a call with
  ``self.start_layer`` before the loop (index 0 = the embedding output) and ``idx + 1`` after each
  layer (so index N, the pre-norm final state, is reachable): id k = the stream entering layer k;
* DeepSeek's in-loop ``if idx in self.aux_hidden_state_layers: hidden_states + residual`` before each
  layer (index 0 unreachable: ``residual`` is None there) and ``self.end_layer in ...`` after the loop.

Anything else is reported ``unrecognised`` with its file and line, never guessed. Nothing is imported.
"""

from __future__ import annotations

import ast
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputNotFound
from .ids_reader import read_ids_from
from .results import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbedCase, ProbedRule, ProbeResult,
                      Reach, Site)
from .source import BadSource

PACKAGE = "vllm"
MODELS = "vllm/model_executor/models/"
REGISTRY = MODELS + "registry.py"
INTERFACES = MODELS + "interfaces.py"
#: runner -> (file, function) that reads the draft's ids
IDS_READERS = {
    "v2": ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "get_eagle3_aux_layers_from_config"),
    "v1": ("vllm/v1/worker/gpu_model_runner.py", "_get_eagle3_aux_layers_from_config"),
}
ENGINES = {"v2": "vllm", "v1": "vllm-v1"}
SETTER = "set_aux_hidden_state_layers"
DEFAULT = "get_eagle3_default_aux_hidden_state_layers"
# model files worth parsing: the rest cannot take part in EAGLE-3 capture
_MARKERS = ("SupportsEagle3", "EagleModelMixin", SETTER, "aux_hidden_state_layers")


@dataclass
class _Source:
    origin: str
    files: dict[str, str] = field(default_factory=dict)
    dist_version: str | None = None


def _wanted(rel: str) -> bool:
    if not rel.endswith(".py"):
        return False
    if rel.startswith(MODELS) and "/" not in rel[len(MODELS):]:
        return True
    return rel in ("vllm/version.py", "vllm/_version.py") or rel in {f for f, _ in IDS_READERS.values()}


def _load(source: str | os.PathLike | None) -> _Source:
    if source is None:
        import importlib.util
        try:
            spec = importlib.util.find_spec(PACKAGE)  # finds, never imports
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise InputNotFound("vllm is not installed in this Python environment",
                                hint="pass --source PATH: a source folder or a .whl")
        root = Path(list(spec.submodule_search_locations)[0]).parent
        try:
            import importlib.metadata
            dist = importlib.metadata.version(PACKAGE)
        except Exception:
            dist = None
        return _from_folder(root, str(root / PACKAGE), dist)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputNotFound(f"{path}: no vllm source (expected {MODELS}*.py); the path does not exist")
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as zf:
                files = {n: zf.read(n).decode("utf-8") for n in zf.namelist() if _wanted(n)}
        except (zipfile.BadZipFile, OSError, UnicodeDecodeError, EOFError) as e:
            raise BadSource(f"{path}: not a readable wheel ({e})") from None
        m = re.match(r"vllm-([^-]+)-", path.name)
        src = _Source(str(path), files, m.group(1) if m else None)
    else:
        root = path
        if not (root / MODELS).is_dir() and path.name == PACKAGE:
            root = path.parent
        src = _from_folder(root, str(path), None)
    if REGISTRY not in src.files:
        raise InputNotFound(f"{path}: no vllm source (expected {REGISTRY})")
    return src


def _from_folder(root: Path, origin: str, dist: str | None) -> _Source:
    files: dict[str, str] = {}
    for rel in [MODELS + p.name for p in sorted((root / MODELS).glob("*.py"))] + \
            ["vllm/version.py", "vllm/_version.py"] + [f for f, _ in IDS_READERS.values()]:
        full = root / rel
        if full.is_file():
            try:
                files[rel] = full.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise BadSource(f"{full}: cannot read ({e})") from None
    src = _Source(origin, files, dist)
    if REGISTRY not in files:
        raise InputNotFound(f"{origin}: no vllm source (expected {REGISTRY})")
    return src


def read_version(src: _Source) -> str:
    for name in ("vllm/_version.py", "vllm/version.py"):
        text = src.files.get(name)
        if not text:
            continue
        try:
            tree = ast.parse(text)
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


def read_ids(src: _Source, runner: str) -> tuple[tuple[str, ...] | None, Site | None, str | None]:
    """(places, site, problem): where ``runner`` reads the draft's ids; ``problem`` names file:line when
    the reader exists but its shape is not recognised."""
    path, function = IDS_READERS[runner]
    text = src.files.get(path)
    if text is None:
        return None, None, f"{path}: not in this source"
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return None, None, f"{path}:{e.lineno}: {e.msg}"
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == function), None)
    if fn is None:
        return None, None, f"{path}: no function {function}"
    found = read_ids_from(path, text, function)
    if not found:
        return None, None, f"{path}:{fn.lineno}: {function} reads no eagle_aux_hidden_state_layer_ids or " \
                           f"eagle_config layer_ids in a recognised shape (unrecognised)"
    return found[0], found[1], None


# ----------------------------------------------------------------------------------------- classes


@dataclass
class _Module:
    path: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef]
    imports: dict[str, str]  # name -> module stem it is imported from (".llama" -> "llama")


def _parse(path: str, text: str) -> _Module | None:
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError:
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imports: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            mod = node.module.rsplit(".", 1)[-1]
            if node.level or node.module.startswith("vllm.model_executor.models"):
                for alias in node.names:
                    imports[alias.asname or alias.name] = mod
    return _Module(path, tree, classes, imports)


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Index:
    def __init__(self, src: _Source):
        self.src = src
        self.modules: dict[str, _Module] = {}
        self.skipped: list[str] = []

    def module(self, stem: str) -> _Module | None:
        if stem in self.modules:
            return self.modules[stem]
        path = f"{MODELS}{stem}.py"
        text = self.src.files.get(path)
        if text is None or (stem != "interfaces" and not any(m in text for m in _MARKERS)):
            self.modules[stem] = None  # type: ignore[assignment]
            return None
        mod = _parse(path, text)
        if mod is None:
            self.skipped.append(f"{path}: syntax error")
        self.modules[stem] = mod  # type: ignore[assignment]
        return mod

    def resolve(self, name: str, mod: _Module) -> tuple[_Module, ast.ClassDef] | None:
        if name in mod.classes:
            return mod, mod.classes[name]
        stem = mod.imports.get(name)
        if stem:
            other = self.module(stem)
            if other is not None and name in other.classes:
                return other, other.classes[name]
        return None

    def mro(self, mod: _Module, cls: ast.ClassDef, depth: int = 0) -> list[tuple[_Module | None, str, ast.ClassDef | None]]:
        """The class and its ancestors (depth first, as far as the parsed files tell)."""
        out = [(mod, cls.name, cls)]
        if depth > 12:
            return out
        for b in cls.bases:
            name = _base_name(b)
            if name is None:
                continue
            found = self.resolve(name, mod)
            if found is None:
                out.append((None, name, None))
            else:
                out.extend(self.mro(found[0], found[1], depth + 1))
        return out


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


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
    tests = [n for n in ast.walk(fn) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
             and len(n.test.ops) == 1 and isinstance(n.test.ops[0], ast.In) and _is_aux_attr(n.test.comparators[0])]
    if not tests:
        return None, f"{path}:{fn.lineno}: no capture of aux_hidden_state_layers in forward"
    loop_tests = [t for t in tests if id(t) in looped and isinstance(t.test.left, ast.Name)]
    post = [t for t in tests if id(t) not in looped and _self_attr(t.test.left) == "end_layer"]
    if len(loop_tests) != 1:
        return None, f"{path}:{tests[0].lineno}: aux_hidden_state_layers tested in an unrecognised shape"
    test = loop_tests[0]
    adds = [n for s in test.body for n in ast.walk(s) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)
            and {getattr(n.left, "id", None), getattr(n.right, "id", None)} == {"hidden_states", "residual"}]
    guarded = any(isinstance(n, ast.IfExp) for s in test.body for n in ast.walk(s))
    if not adds:
        return None, f"{path}:{test.lineno}: in-loop capture does not add hidden_states + residual"
    # the test comes before the layer call in the loop body: the stream entering layer idx
    loop = next(lp for lp in ast.walk(fn) if isinstance(lp, ast.For) and any(n is test for n in ast.walk(lp)))
    layer_calls = [s.lineno for s in loop.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                   and isinstance(s.value.func, ast.Name) and s.value.func.id == "layer"]
    if not layer_calls or min(layer_calls) < test.lineno:
        return None, f"{path}:{test.lineno}: in-loop capture is not before the layer call"
    how = f"in-loop `{ast.unparse(test.test)}` before each layer: id k = stream entering layer k"
    min_capture = "0" if guarded else "1"
    if not guarded:
        how += " (hidden_states + residual; residual is None at index 0)"
    if post:
        how += f"; `{ast.unparse(post[0].test)}` after the loop: N reachable"
    end = max([test.lineno] + [p.lineno for p in post])
    return Reach(min_capture, "N" if post else "N - 1", Site(path, test.lineno, end), how), ""


# -------------------------------------------------------------------------------------------- probe


class _Prober:
    def __init__(self, src: _Source):
        self.idx = _Index(src)
        self.interfaces = self.idx.module("interfaces")
        if self.interfaces is None:
            raise BadSource(f"{src.origin}: {INTERFACES} missing or unparseable")
        self.holders: dict[str, tuple[Reach | None, str]] = {}
        self.default_cache: dict[str, tuple[str | None, Site]] = {}

    def registry(self) -> list[tuple[str, str, str, int]]:
        text = self.idx.src.files[REGISTRY]
        tree = ast.parse(text, filename=REGISTRY)
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

    def _eagle_mro(self, mro) -> bool:
        return any(name in ("SupportsEagle3", "EagleModelMixin") or (cls is not None and _method(cls, SETTER)
                   and (m is None or m.path != INTERFACES)) for m, name, cls in mro)

    def _init_attr(self, mro, attr: str) -> tuple[_Module, ast.ClassDef] | None:
        """The class assigned to ``self.<attr>`` in an ``__init__`` of the MRO."""
        for m, _, cls in mro:
            if cls is None:
                continue
            init = _method(cls, "__init__")
            if init is None:
                continue
            for n in ast.walk(init):
                if isinstance(n, ast.Assign) and any(_self_attr(t) == attr for t in n.targets) \
                        and isinstance(n.value, ast.Call):
                    found = self._constructed(mro, n.value.func)
                    if found:
                        return found
        return None

    def _constructed(self, mro, func: ast.expr) -> tuple[_Module, ast.ClassDef] | None:
        """The class ``func(...)`` builds: ``Name(...)``, ``self.model_cls(...)`` (a class attribute) or
        ``self._init_model(...)`` (a method returning ``Name(...)``)."""
        if isinstance(func, ast.Name):
            for m, _, cls in mro:
                if m is not None:
                    return self.idx.resolve(func.id, m)
            return None
        attr = _self_attr(func)
        if attr is None:
            return None
        for m, _, cls in mro:
            if cls is None or m is None:
                continue
            for n in cls.body:
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in n.targets) \
                        and isinstance(n.value, ast.Name):
                    return self.idx.resolve(n.value.id, m)
            fn = _method(cls, attr)
            if fn is not None:
                rets = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
                        and isinstance(r.value.func, ast.Name)]
                if len(rets) == 1:
                    return self.idx.resolve(rets[0].func.id, m)
                return None
        return None

    def _holder_reach(self, mod: _Module, cls: ast.ClassDef) -> tuple[Reach | None, str]:
        key = f"{mod.path}:{cls.name}"
        if key not in self.holders:
            fwd = None
            for m, _, c in self.idx.mro(mod, cls):
                if c is not None and _method(c, "forward"):
                    fwd = (m, _method(c, "forward"))
                    break
            if fwd is None:
                self.holders[key] = (None, f"{mod.path}:{cls.lineno}: {cls.name} has no forward")
            else:
                self.holders[key] = read_capture(fwd[1], fwd[0].path)
        return self.holders[key]

    def _all_mixin_holders(self) -> tuple[Reach | None, str]:
        """When the holder is only known at run time: every parsed EagleModelMixin decoder's reach, if all agree."""
        reaches: dict[tuple, Reach] = {}
        odd: list[str] = []
        for path in sorted(self.idx.src.files):
            if not path.startswith(MODELS):
                continue
            mod = self.idx.module(path[len(MODELS):-3])
            if mod is None:
                continue
            for cls in mod.classes.values():
                if any(_base_name(b) == "EagleModelMixin" for b in cls.bases) \
                        and any(c is not None and _method(c, "forward") for _, _, c in self.idx.mro(mod, cls)):
                    reach, why = self._holder_reach(mod, cls)
                    if reach is None:
                        odd.append(why.split(": ", 1)[0].rsplit("/", 1)[-1])
                        continue
                    reaches.setdefault((reach.min_capture, reach.max_capture), reach)
        if len(reaches) != 1:
            return None, "EagleModelMixin decoders capture in different shapes"
        reach = next(iter(reaches.values()))
        how = reach.how + "; holder built at run time: every recognised EagleModelMixin decoder captures this way" \
            + (f" (not recognised: {', '.join(odd)})" if odd else "")
        return Reach(reach.min_capture, reach.max_capture, reach.site, how), ""

    def default(self, mro) -> tuple[str | None, Site]:
        for m, _, cls in mro:
            if cls is not None and m is not None and (fn := _method(cls, DEFAULT)):
                return read_default(fn, m.path)
        sup = self.interfaces.classes.get("SupportsEagle3")
        fn = _method(sup, DEFAULT) if sup else None
        if fn is None:
            return None, Site(INTERFACES, 1)
        return read_default(fn, INTERFACES)

    def arch(self, arch: str, stem: str, clsname: str, line: int) -> ArchResult:
        reg = Site(REGISTRY, line)
        if "." in stem:  # "vllm.models.deepseek_v32": a package outside model_executor/models, not read
            return ArchResult(arch, reg, UNRECOGNISED, reason=f"{reg.short()}: registered from {stem}, outside "
                              f"{MODELS} (not read by this probe)")
        mod = self.idx.module(stem)
        if mod is None or clsname not in mod.classes:
            return ArchResult(arch, reg, UNSUPPORTED, reason=f"{MODELS}{stem}.py has no EAGLE-3 support "
                              f"(no SupportsEagle3 / EagleModelMixin / {SETTER})")
        cls = mod.classes[clsname]
        site = Site(mod.path, cls.lineno)
        mro = self.idx.mro(mod, cls)
        if not self._eagle_mro(mro):
            return ArchResult(arch, site, UNSUPPORTED, reason=f"{site.short()} {clsname} neither inherits "
                              f"SupportsEagle3 nor defines {SETTER}")
        own = next(((m, c) for m, _, c in mro if c is not None and m is not None and m.path != INTERFACES
                    and _method(c, SETTER)), None)
        if own is not None:
            fn = _method(own[1], SETTER)
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr in (SETTER, "_set_aux_hidden_state_layers") and _self_attr(n.func.value)]
            if calls:
                target = _self_attr(calls[0].func.value)
                setter = Site(own[0].path, fn.lineno, fn.end_lineno)
                return ArchResult(arch, site, DELEGATING_UNRESOLVED, setter=setter,
                                  reason=f"{setter.short()}: hands the ids to self.{target}.{calls[0].func.attr}, "
                                         f"whose class is built at run time (not resolved statically)")
        default, dsite = self.default(mro)
        if default is None:
            return ArchResult(arch, site, UNRECOGNISED, reason=f"{dsite.short()}: {DEFAULT} in an unrecognised shape")
        if own is not None:
            m, c = own
            fn = _method(c, SETTER)
            setter = Site(m.path, fn.lineno, fn.end_lineno)
            attr = None
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute) \
                        and n.targets[0].attr == "aux_hidden_state_layers" and _self_attr(n.targets[0].value) \
                        and isinstance(n.value, ast.Name) and n.value.id == fn.args.args[-1].arg:
                    attr = _self_attr(n.targets[0].value)
            holder = self._init_attr(self.idx.mro(m, c), attr) if attr else None
            if holder is None:
                return ArchResult(arch, site, UNRECOGNISED, setter=setter,
                                  reason=f"{setter.short()}: {SETTER} body not recognised (expected "
                                         f"self.<model>.aux_hidden_state_layers = layers with a resolvable <model>)")
            reach, why = self._holder_reach(*holder)
            n_from = f"len(self.{attr}.layers)"
        else:
            sup = self.interfaces.classes["SupportsEagle3"]
            fn = _method(sup, SETTER)
            setter = Site(INTERFACES, fn.lineno, fn.end_lineno)
            holder = self._init_attr(mro, "model")
            if holder is not None and self._eagle_mro(self.idx.mro(*holder)):
                reach, why = self._holder_reach(*holder)
            else:
                reach, why = self._all_mixin_holders()
            n_from = "len(holder.layers)"
        if reach is None:
            return ArchResult(arch, site, UNRECOGNISED, setter=setter, reason=why)
        rule = ProbedRule(default, 0, (ProbedCase(0, None, setter),), reach, n_from)
        return ArchResult(arch, site, SUPPORTED, rule=rule, setter=setter)


def probe_vllm(source: str | os.PathLike | None = None, runner: str = "v2") -> ProbeResult:
    """Probe vLLM's EAGLE-3 capture rules from ``source`` (a folder or a .whl) or the installed copy;
    ``runner``: "v2" (the default model runner) or "v1" (VLLM_USE_V2_MODEL_RUNNER=0): where the ids are read."""
    src = _load(source)
    prober = _Prober(src)
    archs = [prober.arch(*entry) for entry in prober.registry()]
    places, site, problem = read_ids(src, runner)
    skipped = list(prober.idx.skipped)
    if problem:
        skipped.append(f"ids reader unrecognised: {problem}")
    return ProbeResult(engine=ENGINES[runner], version=read_version(src), origin=src.origin, ids_from=places,
                       ids_site=site, archs=tuple(archs), skipped=tuple(skipped))


def probe_vllm_v1(source: str | os.PathLike | None = None) -> ProbeResult:
    return probe_vllm(source, runner="v1")
