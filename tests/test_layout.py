"""docs/layout.md holds: the package is layered with no import cycle, at load time or through the imports
inside functions, and the state-source seam (eagle_audit/source/) imports nothing above it. Read with ast
(no module is imported): every ``import`` and ``from ... import`` of an eagle_audit module, at the top or
inside a function, except under ``if TYPE_CHECKING:``. Importing ``a.b.c`` also runs the packages ``a.b``
and ``a`` that the importer is not already inside."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "eagle_audit"
#: the root package (eagle_audit/__init__.py) stands on the top floor: its lazy exports reach the API
ROOT = "(root)"
#: docs/layout.md's order, from the ground up: a module imports only from its own floor or below ...
FLOORS = (("version", "errors", "cache", "threads", "terminal"), ("states", "expr", "kinds", "jsonfile", "target", "outputs", "demo"),
          ("conventions", "capture", "prompts"), ("source", "draft", "probe", "engines"), ("resolution", "provenance"),
          ("runtime",), ("simulate",), ("inputs",), ("accept", "layers"), ("fingerprint", "served", "report"), ("check",),
          ("api", "cli", ROOT))
#: ... except these, each inside one function (docs/layout.md says why)
UPWARD = {("eagle_audit.inputs", "eagle_audit.fingerprint.measured"), ("eagle_audit.layers.run", "eagle_audit.served.run")}
#: what eagle_audit/source/ may import, each with what lies under it (docs/layout.md: the seam stands below every
#: analysis; its server backend talks to the engine clients, which stand beside it)
SEAM_MAY_IMPORT = {"eagle_audit.errors", "eagle_audit.states", "eagle_audit.target", "eagle_audit.capture", "eagle_audit.engines",
                   "eagle_audit.cache"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports() -> dict[str, dict[str, str]]:
    """module -> {imported module: "top" or "lazy"} (a module imported both ways counts as "top")."""
    mods = _modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges: dict[str, str] = {}

        def add(target: str | None, lazy: bool) -> None:
            if target is None or not target.startswith("eagle_audit"):
                return
            chain = [target]  # the packages above the target that the importer is not inside run too
            while "." in chain[-1]:
                chain.append(chain[-1].rpartition(".")[0])
            for t in chain:
                if t != mod and not (mod + ".").startswith(t + "."):
                    edges[t] = "top" if not lazy or edges.get(t) == "top" else "lazy"

        def visit(node: ast.AST, lazy: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    continue
                inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for a in child.names:
                        add(known(a.name), inner)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        up = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                        base = ".".join(up + ([child.module] if child.module else []))
                    else:
                        base = child.module or ""
                    for a in child.names:
                        add(known(f"{base}.{a.name}") if f"{base}.{a.name}" in mods else known(base), inner)
                visit(child, inner)

        visit(ast.parse(path.read_text()), False)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, dict[str, str]], kinds: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    succ = {m: sorted(t for t, k in e.items() if k in kinds and t in graph) for m, e in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _show(graph, comps, kinds) -> str:
    return "; ".join(" ".join(f"{a} -> {b} ({graph[a][b]})" for a in c for b in sorted(graph[a])
                              if b in c and graph[a][b] in kinds) for c in comps)


def test_no_import_cycle_at_load_time():
    graph = imports()
    assert len(graph) > 100 and graph["eagle_audit.fingerprint.search"]["eagle_audit.fingerprint.score"] == "top"
    comps = cycles(graph, {"top"})
    assert not comps, f"import cycles at load time: {_show(graph, comps, {'top'})}"


def test_no_import_cycle_through_lazy_imports():
    """An import inside a function that closes a cycle is a cycle too (docs/layout.md: a lower module imports a
    higher one lazily only to stay torch-free, and never one that imports it back)."""
    graph = imports()
    comps = cycles(graph, {"top", "lazy"})
    assert not comps, f"import cycles through lazy imports: {_show(graph, comps, {'top', 'lazy'})}"


def test_the_seam_imports_nothing_above_it():
    graph = imports()
    above = {f"{m} -> {t}" for m, e in graph.items() if m.startswith("eagle_audit.source")
             for t in e if not t.startswith("eagle_audit.source")
             and not any(t == ok or t.startswith(ok + ".") for ok in SEAM_MAY_IMPORT)}
    assert not above, sorted(above)


def test_every_import_goes_down_but_the_two_named():
    graph = imports()
    floor = {name: i for i, names in enumerate(FLOORS) for name in names}
    part = {m: m.split(".")[1] if m != "eagle_audit" else ROOT for m in graph}
    unplaced = sorted({p for p in part.values() if p not in floor})
    assert not unplaced, f"not in docs/layout.md's order (and FLOORS here): {unplaced}"
    up = {(m, t): k for m, e in graph.items() if m in part for t, k in e.items()
          if t in part and floor[part[t]] > floor[part[m]]}
    named = {(m, t) for m, t in up if any(m == a and (t == b or (b + ".").startswith(t + ".")) for a, b in UPWARD)}
    assert set(up) - named == set(), sorted(f"{m} -> {t} ({up[m, t]})" for m, t in set(up) - named)
    assert all(up[e] == "lazy" for e in named)  # inside a function, as docs/layout.md says


def test_the_root_package_is_imported_by_no_module_and_imports_only_the_version_at_load():
    """``import eagle_audit`` stays light (its API is lazy, eagle_audit/__init__.py), and no module below reaches the
    top floor through it: the version is on the ground floor (eagle_audit/version.py)."""
    graph = imports()
    assert sorted(m for m, e in graph.items() if "eagle_audit" in e) == []
    assert {t for t, k in graph["eagle_audit"].items() if k == "top"} == {"eagle_audit.version"}


def test_the_checker_sees_a_cycle():
    graph = {"a": {"b": "top"}, "b": {"c": "lazy"}, "c": {"a": "top"}, "d": {"a": "top"}}
    assert cycles(graph, {"top"}) == [] and cycles(graph, {"top", "lazy"}) == [["a", "b", "c"]]


def test_tests_is_a_package_whose_helpers_import_by_package_path():
    """docs/testing.md: tests/ is a package (an ``__init__.py`` in every folder of Python files; the vLLM CPU
    plugin under tests/realvllm/cpu_fixes/ is its own distribution), no conftest edits ``sys.path`` when it is
    imported, and no module
    under tests/ or bench/ imports a test helper by its bare name (``import wheels``: a second copy of the module
    beside ``tests.wheels``)."""
    root = PKG.parent
    tests = root / "tests"
    files = [p for p in tests.rglob("*.py") if "cpu_fixes" not in p.relative_to(tests).parts]
    assert sorted({p.parent.relative_to(root).as_posix() for p in files if not (p.parent / "__init__.py").exists()}) == []
    # at import time (a wheel's site put on sys.path for one import and taken off, as tests/wheels.py does, is no edit)
    edits = [f"{p.relative_to(root)}:{node.lineno}" for p in files if p.name == "conftest.py"
             for node in ast.parse(p.read_text()).body
             if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and any(ast.unparse(n) == "sys.path" for n in ast.walk(node))]
    assert edits == []
    helpers = {p.stem for p in files if p.name != "__init__.py"} | {p.name for p in tests.iterdir() if p.is_dir()}
    bare = []
    for p in files + sorted((root / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            bare += [f"{p.relative_to(root)}:{node.lineno} {n}" for n in names if n.split(".")[0] in helpers]
    assert bare == []
