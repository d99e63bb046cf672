"""A static index of a package's model files: classes, imports, base classes, EntryClass lists.

Names are resolved the way Python would at import time, but from the ``ast`` alone: a class name
used in a file is looked up in that file, then through its ``import`` statements (following
re-exports between parsed files). Classes with the same name in different files stay distinct.
Base classes outside the parsed files (``nn.Module``) are dropped from the MRO.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .results import Site
from .source import parse_python


@dataclass(frozen=True, eq=False)
class ClassInfo:
    name: str
    module: str  # dotted module name
    path: str  # package-relative path
    node: ast.ClassDef = field(repr=False)

    def site(self) -> Site:
        return Site(self.path, self.node.lineno, self.node.end_lineno)

    def method(self, name: str) -> ast.FunctionDef | None:
        for item in self.node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item
        return None

    def class_attr(self, name: str) -> ast.expr | None:
        for item in self.node.body:
            if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in item.targets):
                return item.value
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                return item.value
        return None


@dataclass(frozen=True)
class ModuleRef:
    module: str


@dataclass
class _Module:
    name: str
    path: str
    tree: ast.Module
    classes: dict[str, ClassInfo]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None for a module)
    aliases: dict[str, ast.expr]  # module-level `Name = <Name or Attribute>`
    entry: ast.expr | None  # the value of `EntryClass = ...`


def module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _collect_imports(tree: ast.Module, modname: str, is_pkg: bool) -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    package = modname if is_pkg else modname.rpartition(".")[0]
    for node in ast.walk(tree):  # imports inside functions count: sglang often imports lazily
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out.setdefault(a.asname, (a.name, None))
                else:
                    top = a.name.split(".")[0]
                    out.setdefault(top, (top, None))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                if a.name != "*":
                    out.setdefault(a.asname or a.name, (base, a.name))
    return out


class ModuleIndex:
    """Every parsed module of a source tree. ``files``: package-relative path -> text."""

    def __init__(self, files: dict[str, str]):
        self.modules: dict[str, _Module] = {}
        self.skipped: list[str] = []
        for path in sorted(files):
            try:
                tree = parse_python(files[path], filename=path)
            except SyntaxError as e:
                self.skipped.append(f"{path}:{e.lineno or 1}: {e.msg}")
                continue
            name = module_name(path)
            classes = {n.name: ClassInfo(n.name, name, path, n) for n in tree.body if isinstance(n, ast.ClassDef)}
            aliases: dict[str, ast.expr] = {}
            entry = None
            for n in tree.body:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    if n.targets[0].id == "EntryClass":
                        entry = n.value
                    elif isinstance(n.value, (ast.Name, ast.Attribute)):
                        aliases[n.targets[0].id] = n.value
            imports = _collect_imports(tree, name, path.endswith("/__init__.py"))
            self.modules[name] = _Module(name, path, tree, classes, imports, aliases, entry)
        self._mro: dict[int, list[ClassInfo]] = {}

    # ------------------------------------------------------------------ names

    def resolve(self, module: str, expr: ast.expr, depth: int = 0) -> ClassInfo | ModuleRef | None:
        """The class or module ``expr`` (a Name or a dotted Attribute) denotes inside ``module``."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Name):
            return self._lookup(module, expr.id, depth)
        if isinstance(expr, ast.Attribute):
            base = self.resolve(module, expr.value, depth + 1)
            if isinstance(base, ModuleRef):
                sub = f"{base.module}.{expr.attr}"
                if sub in self.modules:
                    return ModuleRef(sub)
                if base.module in self.modules:
                    return self._lookup(base.module, expr.attr, depth + 1)
                return ModuleRef(sub)  # a package that was not parsed: keep following the dotted name
        return None

    def _lookup(self, module: str, name: str, depth: int) -> ClassInfo | ModuleRef | None:
        mod = self.modules.get(module)
        if mod is None:
            return None
        if name in mod.classes:
            return mod.classes[name]
        if name in mod.aliases:
            return self.resolve(module, mod.aliases[name], depth + 1)
        if name in mod.imports:
            target, attr = mod.imports[name]
            if attr is None:
                return ModuleRef(target)
            if f"{target}.{attr}" in self.modules:
                return ModuleRef(f"{target}.{attr}")
            if target in self.modules:
                return self._lookup(target, attr, depth + 1)
        return None

    def resolve_class(self, module: str, expr: ast.expr) -> ClassInfo | None:
        found = self.resolve(module, expr)
        return found if isinstance(found, ClassInfo) else None

    # ------------------------------------------------------------------ classes

    def entry_classes(self) -> list[tuple[str, ast.expr, ClassInfo | None]]:
        """(module, expression, class) for every EntryClass member of every top-level model file."""
        out = []
        for mod in self.modules.values():
            if mod.entry is None:
                continue
            elts = mod.entry.elts if isinstance(mod.entry, (ast.List, ast.Tuple)) else [mod.entry]
            for e in elts:
                out.append((mod.name, e, self.resolve_class(mod.name, e)))
        return out

    def module_path(self, module: str) -> str:
        return self.modules[module].path

    def bases(self, cls: ClassInfo) -> list[ClassInfo]:
        found = (self.resolve_class(cls.module, b) for b in cls.node.bases)
        return [b for b in found if b is not None and b is not cls]

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over the parsed classes (unparsed bases are left out)."""
        key = id(cls)
        if key not in self._mro:
            self._mro[key] = [cls]  # guards against cycles while computing
            seqs = [self.mro(b) for b in self.bases(cls)] + [self.bases(cls)]
            self._mro[key] = [cls] + _c3_merge([list(s) for s in seqs])
        return self._mro[key]

    def find_method(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, ast.FunctionDef] | None:
        for c in self.mro(cls):
            fn = c.method(name)
            if fn is not None:
                return c, fn
        return None

    def find_class_attr(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, ast.expr] | None:
        for c in self.mro(cls):
            value = c.class_attr(name)
            if value is not None:
                return c, value
        return None

    def methods(self, cls: ClassInfo) -> list[tuple[ClassInfo, ast.FunctionDef]]:
        """The method definitions a call on an instance can run: for each name the most derived one,
        plus the next one up the MRO whenever a definition calls ``super().<name>(...)``."""
        defs: dict[str, list[tuple[ClassInfo, ast.FunctionDef]]] = {}
        for c in self.mro(cls):
            for item in c.node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defs.setdefault(item.name, []).append((c, item))
        out = []
        for name, chain in defs.items():
            for c, fn in chain:
                out.append((c, fn))
                if not _calls_super(fn, name):
                    break
        return out

    def all_definitions(self, cls: ClassInfo) -> list[tuple[ClassInfo, ast.FunctionDef]]:
        """Every method defined anywhere in the class's MRO, overridden or not."""
        return [(c, item) for c in self.mro(cls) for item in c.node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _calls_super(fn: ast.FunctionDef, name: str) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name:
            target = node.func.value
            if isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "super":
                return True
    return False


def _c3_merge(seqs: list[list[ClassInfo]]) -> list[ClassInfo]:
    out: list[ClassInfo] = []
    seqs = [s for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:  # inconsistent hierarchy: fall back to depth-first order
            for seq in seqs:
                out.extend(c for c in seq if c not in out)
            return out
        out.append(head)
        seqs = [[c for c in s if c is not head] for s in seqs]
        seqs = [s for s in seqs if s]
    return out
