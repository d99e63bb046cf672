"""Which capture indices a target's forward can reach (``min_capture`` / ``max_capture``).

Heuristic, read from the class that holds ``layers_to_capture`` (the inner model, for example
``LlamaModel``), over every method it has (its own and inherited):

* a membership test ``i in self.layers_to_capture`` whose ``i`` is a ``for`` loop variable, or a
  per-layer flag ``_is_layer_to_capture`` read in the forward: capture inside the layer loop, so
  indices 0 .. N-1 (the loop is taken to be the decoder-layer loop, ``range(start_layer, end_layer)``
  or ``enumerate(self.layers)``, as in every 0.5.23 model; index 0 is the embedding output);
* a membership test of an N-valued expression, ``self.end_layer in self.layers_to_capture``,
  ``num_layers in ...`` with ``num_layers = len(self.layers)`` or ``self.config.num_hidden_layers``:
  capture of the final boundary after the loop (the pre-norm output of the last layer), so 0 .. N;
* ``self.start_layer in ...`` before the loop together with ``i + 1 in ...`` after each layer call (SGLang
  0.5.17-0.5.20 GPT-OSS): index 0 (the embedding output) and the output of every layer, so 0 .. N;
* any other membership test (``i - 1 in ...``): unrecognised, with its line.

An in-loop capture that appends ``hidden_states + residual`` unguarded in a forward that starts with
``residual = None`` (every SGLang release before the layer-boundary rewrite) raises TypeError at index 0: the
reach then starts at 1 and ``none_add`` names the line.

The inner model's own setter (``self.model.set_eagle3_layers_to_capture(list)``) is read too: a loop
``setattr(self.layers[i], "_is_layer_to_capture", True)`` without a bounds check turns an index >= N
into an IndexError at start-up; that is recorded as ``unguarded``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .held import HeldResolver
from .modules import ClassInfo, ModuleIndex
from .results import Reach, Site
from .setter import SETTER, _is_flag_setattr, _self_chain


@dataclass(frozen=True)
class ReachError:
    site: Site
    message: str
    unresolved: bool = False  # the inner model's class could not be told
    never_read: bool = False  # the inner model never reads what the setter stores


def _n_valued(node: ast.expr, locals_: dict[str, ast.expr]) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in ("end_layer", "num_hidden_layers"):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args \
            and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "layers":
        return True
    if isinstance(node, ast.Name) and node.id in locals_:
        return _n_valued(locals_[node.id], {})
    return False


def _loop_vars(fn: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(fn):
        targets = [node.target] if isinstance(node, (ast.For, ast.comprehension)) else []
        for t in targets:
            names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _locals(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, node.value)
    return out


class ReachReader:
    """``setter``: the target's setter whose inner-model counterpart receives the ids (EAGLE-3's by default)."""

    def __init__(self, index: ModuleIndex, held: HeldResolver, setter: str = SETTER):
        self.index = index
        self.held = held
        self.setter = setter

    def inner_classes(self, concrete: ClassInfo, attr: str) -> tuple[tuple[ClassInfo, ...], ReachError | None]:
        if attr == "":
            return (concrete,), None
        first, _, rest = attr.partition(".")
        h = self.held.held(concrete, first)
        if not h.classes:
            return (), ReachError(h.site or concrete.site(), h.reason, unresolved=True)
        if rest:
            out: list[ClassInfo] = []
            for c in h.classes:
                inner, err = self.inner_classes(c, rest)
                if err:
                    return (), err
                out.extend(inner)
            return tuple(out), None
        return h.classes, None

    def reach(self, concrete: ClassInfo, attr: str, via_setter: bool) -> Reach | ReachError:
        classes, err = self.inner_classes(concrete, attr)
        if err:
            return err
        results = [self._one(c, via_setter) for c in classes]
        errors = [r for r in results if isinstance(r, ReachError)]
        if errors:
            return errors[0]
        keys = {(r.min_capture, r.max_capture, r.unguarded is not None, r.count_check is not None, r.branch is not None,
                 r.none_add is not None) for r in results}
        if len(keys) > 1:
            names = ", ".join(c.name for c in classes)
            return ReachError(results[0].site, f"self.{attr} may hold {names}, which capture differently")
        return results[0]

    def _one(self, inner: ClassInfo, via_setter: bool) -> Reach | ReachError:
        unguarded = None
        if via_setter:
            found = self.index.find_method(inner, self.setter)
            if found is None:
                return ReachError(inner.site(), f"{inner.name} ({inner.site()}) has no {self.setter} to receive the ids")
            owner, fn = found
            checked = _inner_setter(owner, fn)
            if isinstance(checked, ReachError):
                return checked
            unguarded = checked
        in_loop: Site | None = None
        final: Site | None = None
        packer: Site | None = None
        branch: Site | None = None
        start: Site | None = None  # ``self.start_layer in ...`` before the loop: index 0 (the embedding output)
        after: Site | None = None  # ``i + 1 in ...`` after the layer call: the output of layer i, so up to N
        none_add: Site | None = None  # ``hidden_states + residual`` at index 0, where residual is still None
        for owner, fn in self.index.methods(inner):
            if fn.name in (SETTER, self.setter):
                continue
            loop_vars, locals_ = _loop_vars(fn), _locals(fn)
            paired = _paired_with_residual(fn)
            residual_none = _assigns_none(fn, "residual")
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == PACKER:
                    packer = packer or Site(owner.path, node.lineno, node.end_lineno)
                if isinstance(node, ast.If) and _is_capture_test(node.test):
                    for sub in node.body:
                        appended = _appended_name(sub)
                        if appended is not None and appended in paired:
                            branch = branch or Site(owner.path, sub.lineno, sub.end_lineno)
                    left = node.test.left
                    if residual_none and isinstance(left, ast.Name) and left.id in loop_vars:
                        add = next((a for sub in _nested(node.body) if (a := _unguarded_residual_add(sub))), None)
                        if add is not None:
                            none_add = none_add or Site(owner.path, add.lineno, add.end_lineno)
                if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In) and \
                        isinstance(node.comparators[0], ast.Attribute) and \
                        node.comparators[0].attr == "layers_to_capture":
                    site = Site(owner.path, node.lineno, node.end_lineno)
                    left = node.left
                    if isinstance(left, ast.Name) and left.id in loop_vars:  # may be re-based: i + start_layer
                        in_loop = _first(in_loop, site)
                    elif _n_valued(left, locals_):
                        final = _first(final, site)
                    elif isinstance(left, ast.Attribute) and left.attr == "start_layer":
                        start = _first(start, site)
                    elif isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and \
                            isinstance(left.left, ast.Name) and left.left.id in loop_vars and \
                            isinstance(left.right, ast.Constant) and left.right.value == 1:
                        after = _first(after, site)
                    else:
                        return ReachError(site, f"unrecognised capture test `{ast.unparse(node)[:60]}` at {site}")
                elif _reads_flag(node):
                    in_loop = _first(in_loop, Site(owner.path, node.lineno, node.end_lineno))
        extra = dict(unguarded=unguarded, count_check=packer, branch=branch, none_add=none_add)
        low = "1" if none_add else "0"
        if none_add:
            extra_how = f"; index 0 adds hidden_states + residual with residual None ({none_add.short()}): TypeError"
        else:
            extra_how = ""
        if after:
            if not start:
                return ReachError(after, f"capture test `i + 1 in layers_to_capture` at {after} without a capture "
                                         "of index start_layer before the loop")
            how = (f"index start_layer (0, the embedding output) before the layer loop ({start.short()}); "
                   f"i + 1 after layer i ({after.short()}): 0 .. N")
            return Reach("0", "N", Site(after.path, min(start.line, after.line), after.end_line), how, **extra)
        if final:
            how = f"final boundary captured after the layer loop ({final.short()})" + extra_how
            return Reach(low, "N", final, how, **extra)
        if in_loop:
            return Reach(low, "N - 1", in_loop, f"capture only inside the layer loop ({in_loop.short()})" + extra_how,
                         **extra)
        if not any(_reads_capture_state(fn) for _, fn in self.index.all_definitions(inner)
                   if fn.name not in (SETTER, self.setter)):
            return ReachError(inner.site(), f"{inner.name} ({inner.site()}) never reads layers_to_capture: "
                                            "nothing is captured", never_read=True)
        return ReachError(inner.site(), f"no capture test found in {inner.name} ({inner.site()})")


#: SGLang's collector that counts its captures and raises in ``finalize()`` when one is missing
#: (layers/aux_hidden_states.py ``AuxHiddenStatePacker``).
PACKER = "AuxHiddenStatePacker"


def _is_capture_test(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) and \
        isinstance(test.comparators[0], ast.Attribute) and test.comparators[0].attr == "layers_to_capture"


def _nested(body: list[ast.stmt]):
    """The statements of ``body`` and of every branch nested in it (SGLang 0.5.7-0.5.12's DeepSeek capture appends
    ``hidden_states + residual`` in the ``else`` of an all-gather branch)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _nested(stmt.body)
            yield from _nested(stmt.orelse)


def _appended_name(stmt: ast.stmt) -> str | None:
    """``aux.append(name)``: the name appended."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr == "append" and len(stmt.value.args) == 1 and isinstance(stmt.value.args[0], ast.Name):
        return stmt.value.args[0].id
    return None


def _paired_with_residual(fn: ast.FunctionDef) -> set[str]:
    """Names bound as the first of a ``(name, residual) = layer(...)`` pair: in such a decoder the full
    residual stream is ``name + residual``, so appending ``name`` alone captures the layer's branch output
    (SGLang's Gemma 3 forward)."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                and isinstance(node.value, ast.Call):
            elts = node.targets[0].elts
            if len(elts) == 2 and all(isinstance(e, ast.Name) for e in elts) and elts[1].id == "residual":
                out.add(elts[0].id)
    return out


def _assigns_none(fn: ast.FunctionDef, name: str) -> bool:
    """Whether ``fn`` binds ``name = None`` somewhere (SGLang's first pipeline rank: ``residual = None``)."""
    return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None and
               any(isinstance(t, ast.Name) and t.id == name for t in n.targets) for n in ast.walk(fn))


def _unguarded_residual_add(stmt: ast.stmt) -> ast.BinOp | None:
    """``aux.append(hidden_states + residual)`` with no ``... if residual is not None else ...`` around the sum:
    the add (older SGLang releases; it raises TypeError where residual is still None, before layer 0)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "append" and len(stmt.value.args) == 1):
        return None
    arg = stmt.value.args[0]
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and \
            {getattr(arg.left, "id", None), getattr(arg.right, "id", None)} == {"hidden_states", "residual"}:
        return arg
    return None


def _reads_capture_state(fn: ast.FunctionDef) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr == "layers_to_capture" and isinstance(n.ctx, ast.Load))
               or _reads_flag(n) for n in ast.walk(fn))


def _first(a: Site | None, b: Site) -> Site:
    """The earlier of two sites in one file (ast.walk is breadth-first); else the one found first."""
    return b if a is None or (b.path == a.path and b.line < a.line) else a


def _reads_flag(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
            len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value == "_is_layer_to_capture"
    return isinstance(node, ast.Attribute) and node.attr == "_is_layer_to_capture" and isinstance(node.ctx, ast.Load)


def _inner_setter(owner: ClassInfo, fn: ast.FunctionDef) -> Site | None | ReachError:
    """An inner model's setter: ``self.layers_to_capture = arg`` plus an optional flag loop.
    Returns the site of an unguarded flag loop, None when guarded or absent."""
    args = fn.args.posonlyargs + fn.args.args
    site = Site(owner.path, fn.lineno, fn.end_lineno)
    if len(args) != 2:
        return ReachError(site, f"unrecognised inner setter signature at {site}")
    param = args[1].arg
    unguarded = None
    stored = False
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
                and stmt.targets[0].attr == "layers_to_capture" and _self_chain(stmt.targets[0].value) == "" \
                and (isinstance(stmt.value, ast.Name) and stmt.value.id == param
                     or isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
                     and stmt.value.func.id in ("list", "tuple") and len(stmt.value.args) == 1
                     and isinstance(stmt.value.args[0], ast.Name) and stmt.value.args[0].id == param):
            stored = True
            continue
        if isinstance(stmt, ast.For) and not stmt.orelse:
            body = stmt.body
            if len(body) == 1 and isinstance(body[0], ast.If) and not body[0].orelse:
                if all(_is_flag_setattr(s) for s in body[0].body):
                    continue
            elif all(_is_flag_setattr(s) for s in body):
                unguarded = unguarded or Site(owner.path, stmt.lineno, stmt.end_lineno)
                continue
        line = Site(owner.path, stmt.lineno, stmt.end_lineno)
        return ReachError(line, f"unrecognised statement in inner setter at {line}")
    if not stored:
        return ReachError(site, f"inner setter at {site} does not store layers_to_capture")
    return unguarded

