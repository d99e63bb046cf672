"""Which class an instance attribute such as ``self.model`` or ``self.language_model`` holds.

Read from the ``__init__`` that assigns it, for one concrete class (subclasses change the answer):

* ``self.model = LlamaModel(...)``: a class named in that file or imported into it;
* ``self.model = self._init_model(...)``: the classes the method (the concrete class's override)
  returns;
* ``self.model = self.body_cls(...)``: a class attribute (``body_cls = qwen3_5.Qwen3_5ForCausalLM``);
* ``self.model = language_model_cls(...)``: an ``__init__`` parameter: the value a subclass passes to
  ``super().__init__``, else its default.

Anything else (``arch(config=...)`` with ``arch`` computed at run time) is unresolved, with its site.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .modules import ClassInfo, ModuleIndex
from .results import Site


@dataclass(frozen=True)
class Held:
    classes: tuple[ClassInfo, ...]  # empty: unresolved
    site: Site | None  # the assignment read (or the class, when none was found)
    reason: str = ""


def _self_attr(node: ast.AST, attr: str | None = None) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr if attr is None or node.attr == attr else None
    return None


def _assignments(fn: ast.FunctionDef, attr: str) -> list[ast.expr | ast.stmt]:
    found: list = []
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if _self_attr(t, attr) and node.value is not None:
                if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                    found.append(node)
    return found


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args]


def _param_default(fn: ast.FunctionDef, name: str) -> ast.expr | None:
    for arg, default in zip(reversed(fn.args.kwonlyargs), reversed(fn.args.kw_defaults)):
        if arg.arg == name:
            return default
    positional = fn.args.posonlyargs + fn.args.args
    for arg, default in zip(reversed(positional), reversed(fn.args.defaults)):
        if arg.arg == name:
            return default
    return None


def _super_init_call(fn: ast.FunctionDef, owner: ClassInfo) -> tuple[ast.Call, int] | None:
    """The call to the parent ``__init__`` and how many leading args precede the parent's own."""
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"):
            continue
        target = node.func.value
        if isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "super":
            return node, 0
        if isinstance(target, (ast.Name, ast.Attribute)) and node.args and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == "self":
            return node, 1
    return None


class HeldResolver:
    def __init__(self, index: ModuleIndex):
        self.index = index

    def held(self, concrete: ClassInfo, attr: str) -> Held:
        for owner in self.index.mro(concrete):
            init = owner.method("__init__")
            if init is None:
                continue
            stmts = _assignments(init, attr)
            if not stmts:
                continue
            classes: list[ClassInfo] = []
            for stmt in stmts:
                site = Site(owner.path, stmt.lineno, stmt.end_lineno)
                found = self._value(stmt.value, owner, init, concrete, depth=0)
                if not found:
                    return Held((), site, f"cannot tell which class self.{attr} holds "
                                          f"({ast.unparse(stmt.value)[:60]}) at {site}")
                classes.extend(c for c in found if c not in classes)
            first = Site(owner.path, stmts[0].lineno, stmts[-1].end_lineno)
            return Held(tuple(classes), first)
        return Held((), concrete.site(), f"no __init__ of {concrete.name} assigns self.{attr} ({concrete.site()})")

    def _value(self, value: ast.expr, owner: ClassInfo, fn: ast.FunctionDef, concrete: ClassInfo,
               depth: int) -> list[ClassInfo]:
        if depth > 6:
            return []
        if isinstance(value, ast.IfExp):
            a = self._value(value.body, owner, fn, concrete, depth + 1)
            b = self._value(value.orelse, owner, fn, concrete, depth + 1)
            return a + [c for c in b if c not in a] if a and b else []
        if not isinstance(value, ast.Call):
            return []
        func = value.func
        if isinstance(func, ast.Name) and func.id in _params(fn):
            return self._param(func.id, owner, fn, concrete, depth + 1)
        method = _self_attr(func)
        if method is not None:
            return self._self_callable(method, concrete, depth + 1)
        cls = self.index.resolve_class(owner.module, func)
        return [cls] if cls else []

    def _self_callable(self, name: str, concrete: ClassInfo, depth: int) -> list[ClassInfo]:
        """``self.<name>(...)``: a factory method's returned classes, or a class attribute."""
        for c in self.index.mro(concrete):
            fn = c.method(name)
            if fn is not None:
                returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
                out: list[ClassInfo] = []
                for r in returns:
                    found = self._value(r, c, fn, concrete, depth + 1)
                    if not found:
                        return []
                    out.extend(x for x in found if x not in out)
                return out
            value = c.class_attr(name)
            if value is not None:
                cls = self.index.resolve_class(c.module, value)
                return [cls] if cls else []
        return []

    def _param(self, name: str, owner: ClassInfo, fn: ast.FunctionDef, concrete: ClassInfo,
               depth: int) -> list[ClassInfo]:
        """The class an ``__init__`` parameter receives when ``concrete`` is built."""
        mro = self.index.mro(concrete)
        pos = _params(fn).index(name) - 1  # without self
        # the nearest more-derived class with an __init__ passes the value up through super()
        for child in reversed(mro[: mro.index(owner)]):
            init = child.method("__init__")
            if init is None:
                continue
            call = _super_init_call(init, child)
            if call is None:
                break
            node, skip = call
            passed = next((k.value for k in node.keywords if k.arg == name), None)
            if passed is None and len(node.args) - skip > pos >= 0:
                passed = node.args[pos + skip]
            if passed is None:
                break
            if isinstance(passed, ast.Name) and passed.id in _params(init):
                return self._param(passed.id, child, init, concrete, depth + 1)
            cls = self.index.resolve_class(child.module, passed)
            return [cls] if cls else []
        default = _param_default(fn, name)
        if default is None:
            return []
        cls = self.index.resolve_class(owner.module, default)
        return [cls] if cls else []
