"""Where an engine reads the draft's layer ids from: the ``ids_from`` places of a convention.

Reads of the key ``eagle_aux_hidden_state_layer_ids`` (and ``layer_ids``) in one function are
classified by the object they are read from:

* ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` / ``.get(...)``, with ``eagle_config`` bound to
  ``getattr(<cfg>, "eagle_config", ...)``, ``<cfg>.eagle_config`` or ``<cfg>["eagle_config"]``: ``nested``;
* ``getattr(<cfg>, "eagle_aux_hidden_state_layer_ids", ...)`` or ``<cfg>.eagle_aux_hidden_state_layer_ids``
  on any other object: ``top_level``;
* ``layer_ids`` read from the nested ``eagle_config``: ``nested_layer_ids``.

``getattr(cfg, name)`` with ``name`` looping over constants that include ``"eagle_config"`` counts as
the nested config (vLLM's ``for config_name in ("dflash_config", "eagle_config")``).

Places are listed in source order (the engines read them in turn, first present wins).

:func:`read_id_places` says, besides, how each place is read (the ``ids_from`` entries of a convention):

* the DFlash/DSpark keys vLLM's V2 runner also reads: ``target_layer_ids`` on ``dflash_config``
  (``dflash_target_layer_ids``) or on the config itself (``target_layer_ids``), ``dspark_target_layer_ids``,
  and ``layer_ids`` on ``dflash_config`` (``dflash_layer_ids``; a loop over ``("dflash_config",
  "eagle_config")`` yields both, in loop order);
* ``shift``: the read flows, directly or through one variable, into ``[i + 1 for i in ...]``;
* ``verbatim_model_types``: an ``if ...model_type... == "X":`` branch takes that variable as it is;
* ``empty``: ``"absent"`` when the variable the read is stored in is tested for truthiness (``if not
  layer_ids``, ``if layer_ids and ...``), so an empty list falls through; else ``"read"``.
"""

from __future__ import annotations

import ast

from .results import Site
from .source import parse_python

KEY = "eagle_aux_hidden_state_layer_ids"
KEYS = (KEY, "layer_ids", "target_layer_ids", "dspark_target_layer_ids")


def _str_arg(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_eagle_config(node: ast.expr, bound: set[str], loops: dict[str, set[str]]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Attribute):
        return node.attr == "eagle_config"
    if isinstance(node, ast.Subscript):
        return _str_arg(node.slice) == "eagle_config"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
        name = node.args[1]  # a constant, or a loop over constants: for n in ("dflash_config", "eagle_config")
        return _str_arg(name) == "eagle_config" or (isinstance(name, ast.Name) and "eagle_config" in loops.get(name.id, ()))
    if isinstance(node, ast.BoolOp):  # getattr(cfg, "eagle_config", None) or {}
        return any(_is_eagle_config(v, bound, loops) for v in node.values)
    return False


def _loop_constants(fn: ast.FunctionDef) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.Tuple, ast.List)):
            values = {_str_arg(e) for e in node.iter.elts}
            if None not in values:
                out.setdefault(node.target.id, set()).update(values)
    return out


def _reads(fn: ast.FunctionDef) -> list[tuple[int, str]]:
    bound: set[str] = set()
    loops = _loop_constants(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and _is_eagle_config(node.value, set(), loops):
            bound.add(node.targets[0].id)
    found: list[tuple[int, str]] = []
    for node in ast.walk(fn):
        key, obj = None, None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key, obj = _str_arg(node.slice), node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            key, obj = _str_arg(node.args[0]), node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            key, obj = _str_arg(node.args[1]), node.args[0]
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr == KEY:
            key, obj = KEY, node.value
        if key not in (KEY, "layer_ids") or obj is None:
            continue
        nested = _is_eagle_config(obj, bound, loops)
        if key == KEY:
            found.append((node.lineno, "nested" if nested else "top_level"))
        elif nested:
            found.append((node.lineno, "nested_layer_ids"))
    return sorted(found)


def read_ids_from(path: str, text: str, function: str | None = None) -> tuple[tuple[str, ...], Site] | None:
    """The places ``function`` (or, when absent, every function of the file) reads the ids from."""
    try:
        tree = parse_python(text, filename=path)
    except SyntaxError:
        return None
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if function is not None and any(f.name == function for f in fns):
        fns = [f for f in fns if f.name == function]
    reads: list[tuple[int, str]] = []
    for fn in fns:
        reads.extend(_reads(fn))
    if not reads:
        return None
    reads.sort()
    places = tuple(dict.fromkeys(p for _, p in reads))
    return places, Site(path, reads[0][0], reads[-1][0])


# ------------------------------------------------------------------ how each place is read

def _config_name(node: ast.expr, bound: dict[str, set[str]], loops: dict[str, set[str]]) -> set[str]:
    """Which sub-config ``node`` is: {"eagle_config"}, {"dflash_config"}, both (a loop), or set() (the top)."""
    if isinstance(node, ast.Name):
        return set(bound.get(node.id, ()))
    if isinstance(node, ast.Attribute) and node.attr in ("eagle_config", "dflash_config"):
        return {node.attr}
    if isinstance(node, ast.Subscript) and _str_arg(node.slice) in ("eagle_config", "dflash_config"):
        return {_str_arg(node.slice)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
        name = node.args[1]
        if _str_arg(name) in ("eagle_config", "dflash_config"):
            return {_str_arg(name)}
        if isinstance(name, ast.Name):
            return {v for v in loops.get(name.id, ()) if v in ("eagle_config", "dflash_config")}
    if isinstance(node, ast.BoolOp):
        return set().union(*(_config_name(v, bound, loops) for v in node.values))
    return set()


def _place(key: str, sub: set[str], loop_order: list[str]) -> list[str]:
    if key == KEY:
        return ["nested" if "eagle_config" in sub else "top_level"]
    if key == "dspark_target_layer_ids":
        return ["dspark_target_layer_ids"]
    if key == "target_layer_ids":
        return ["dflash_target_layer_ids" if "dflash_config" in sub else "target_layer_ids"]
    names = {"dflash_config": "dflash_layer_ids", "eagle_config": "nested_layer_ids"}
    return [names[c] for c in loop_order if c in sub] if sub else []


def _plus_one_over(fn: ast.FunctionDef) -> list[tuple[ast.comprehension, ast.expr]]:
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            elt = node.elt
            if isinstance(elt, ast.BinOp) and isinstance(elt.op, ast.Add) and isinstance(elt.left, ast.Name) \
                    and isinstance(gen.target, ast.Name) and elt.left.id == gen.target.id \
                    and isinstance(elt.right, ast.Constant) and elt.right.value == 1:
                out.append((gen, gen.iter))
    return out


def _contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    return {t.id for st in stmts for n in ast.walk(st) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name)}


def _later_overrides(fn: ast.FunctionDef, entries: list[tuple[int, dict]],
                     bound: dict[str, set[str]]) -> list[tuple[int, dict]]:
    """Sibling ``if`` statements that assign the same variable: a later one whose test starts with a sub-config
    (``if eagle_config and isinstance(eagle_config, dict): layer_ids = eagle_config.get(...)``) overrides the
    earlier ones whenever that sub-config is truthy. Its reads are moved first, and the earlier siblings' reads
    are skipped when it is truthy (``unless_truthy``): vLLM's V1 runner from 0.22.0, where a non-empty
    ``eagle_config`` overrides the DFlash ids even when it holds no ids."""
    for body in (getattr(n, "body", None) for n in ast.walk(fn)):
        if not isinstance(body, list):
            continue
        ifs = [st for st in body if isinstance(st, ast.If)]
        for j, later in enumerate(ifs):
            head = later.test.values[0] if isinstance(later.test, ast.BoolOp) and isinstance(later.test.op, ast.And) \
                else later.test
            config = sorted(bound.get(head.id, ())) if isinstance(head, ast.Name) else []
            if len(config) != 1 or later.orelse:
                continue
            shared = _assigned(later.body)
            earlier = [st for st in ifs[:j] if _assigned(st.body) & shared]
            inside = lambda line, st: st.lineno <= line <= (st.end_lineno or st.lineno)  # noqa: E731
            moved = [(ln, e) for ln, e in entries if inside(ln, later)]
            if not earlier or not moved:
                continue
            first = min(ln for ln, e in entries if any(inside(ln, st) for st in earlier)) \
                if any(inside(ln, st) for ln, _ in entries for st in earlier) else None
            if first is None:
                continue
            out = []
            for ln, e in entries:
                if any(inside(ln, st) for st in earlier):
                    e = {**e, "unless_truthy": config[0]}
                if ln == first:
                    out.extend((ln, m) for _, m in moved)
                if not inside(ln, later):
                    out.append((ln, e))
            return out
    return entries


def read_id_places(path: str, text: str, function: str) -> tuple[tuple[dict, ...], Site] | None:
    """The ``ids_from`` entries (dicts: place, shift, empty[, verbatim_model_types]) ``function`` reads, in
    source order, and its site; None when it reads none."""
    try:
        tree = parse_python(text, filename=path)
    except SyntaxError:
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == function), None)
    if fn is None:
        return None
    loops = _loop_constants(fn)
    loop_order: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List)):
            loop_order += [v for v in (_str_arg(e) for e in node.iter.elts) if v and v not in loop_order]
    loop_order += [c for c in ("dflash_config", "eagle_config") if c not in loop_order]
    bound: dict[str, set[str]] = {}
    stored: dict[int, str] = {}  # id(read node) -> variable it is assigned to
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            sub = _config_name(node.value, {}, loops)
            if sub and not isinstance(node.value, ast.Name):
                bound[node.targets[0].id] = sub
            stored[id(node.value)] = node.targets[0].id
    truthy: set[str] = set()  # variables tested for truthiness
    for node in ast.walk(fn):
        tests = []
        if isinstance(node, (ast.If, ast.While)):
            tests.append(node.test)
        for t in tests:
            for sub in ast.walk(t):
                if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.Not) and isinstance(sub.operand, ast.Name):
                    truthy.add(sub.operand.id)
                if isinstance(sub, ast.BoolOp) and isinstance(sub.values[0], ast.Name):
                    truthy.add(sub.values[0].id)
            if isinstance(t, ast.Name):
                truthy.add(t.id)
    plus_one = _plus_one_over(fn)
    verbatim: dict[str, list[str]] = {}  # variable -> model_types for which it is taken as it is
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1 \
                and "model_type" in ast.unparse(node.test.left) and _str_arg(node.test.comparators[0]):
            for st in node.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and \
                        isinstance(st.value.func, ast.Name) and st.value.func.id == "list" and \
                        st.value.args and isinstance(st.value.args[0], ast.Name):
                    verbatim.setdefault(st.value.args[0].id, []).append(_str_arg(node.test.comparators[0]))
    entries: list[tuple[int, dict]] = []
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(fn):
        key, obj = None, None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key, obj = _str_arg(node.slice), node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            key, obj = _str_arg(node.args[0]), node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            key, obj = _str_arg(node.args[1]), node.args[0]
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr == KEY:
            key, obj = KEY, node.value
        if key not in KEYS or obj is None:
            continue
        sub = _config_name(obj, bound, loops)
        if key == KEY and not sub and _is_eagle_config(obj, {b for b, c in bound.items() if "eagle_config" in c}, loops):
            sub = {"eagle_config"}
        places = _place(key, sub, loop_order)
        if not places:
            continue
        # the variable the read ends in: walk up through `or []`, the call, to an assignment
        holder: ast.AST = node
        while id(holder) in parents and isinstance(parents[id(holder)], ast.BoolOp):
            holder = parents[id(holder)]
        var = first = stored.get(id(holder))
        shift = 0
        for gen, it in plus_one:
            if _contains(it, node) or (var and any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(it))):
                shift = 1
                comp = parents.get(id(gen))
                var = stored.get(id(comp), var) if comp is not None else var
        for place in places:
            entry = {"place": place, "shift": shift, "empty": "absent" if {var, first} & truthy else "read"}
            models = verbatim.get(first or "", [])
            if models:
                entry["verbatim_model_types"] = models
            entries.append((node.lineno, entry))
    if not entries:
        return None
    entries.sort(key=lambda e: e[0])
    entries = _later_overrides(fn, entries, bound)
    out: list[dict] = []
    for _, e in entries:
        if e["place"] not in [o["place"] for o in out]:
            out.append(e)
    lines = [line for line, _ in entries]
    return tuple(out), Site(path, min(lines), max(lines))
