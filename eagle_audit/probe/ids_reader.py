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
"""

from __future__ import annotations

import ast

from .results import Site

KEY = "eagle_aux_hidden_state_layer_ids"


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
        tree = ast.parse(text, filename=path)
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
