"""A tiny, safe expression language for convention files.

Convention files (probes/*.json) state default ids and conditions as Python-like expressions over
``N`` (the target's ``num_hidden_layers``), ``ids`` (the draft's explicit ids) and ``k`` (one capture
index, in ``index_failures`` and ``feeds``), for example
``"[2, N // 2, N - 3]"`` or ``"max(ids) == N"``. They are parsed with ``ast`` and evaluated over a
closed set of node types; nothing is imported or called beyond the functions listed here.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b}
def _total(fn):
    """max/min of an empty list is None (as ``ids[0]`` of an empty list is): the engines guard these
    tests with ``layer_ids and ...``, so a condition over no ids is simply false."""
    return lambda *a: fn(*a) if len(a) > 1 or a[0] else None


_FUNCS = {"max": _total(max), "min": _total(min), "len": len, "sorted": sorted, "list": list, "set": set}


class ExprError(ValueError):
    pass


def parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"cannot parse expression {text!r}: {e.msg}") from None
    _check(tree.body, text)
    return tree.body


def _check(node: ast.AST, text: str) -> None:
    ok = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript, ast.Call,
          ast.List, ast.Tuple, ast.Set, ast.Load, ast.USub, ast.And, ast.Or, ast.Not, *_BINOPS, *_CMPOPS)
    for sub in ast.walk(node):
        if not isinstance(sub, ok):
            raise ExprError(f"unsupported syntax {type(sub).__name__} in {text!r}")
        if isinstance(sub, ast.Name) and sub.id not in ("N", "ids", "k", *_FUNCS):
            raise ExprError(f"unknown name {sub.id!r} in {text!r} (allowed: N, ids, k, {', '.join(_FUNCS)})")
        if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCS):
            raise ExprError(f"unsupported call in {text!r}")


def evaluate(text: str, **names: Any) -> Any:
    return _eval(parse(text), names)


def _eval(node: ast.AST, env: dict) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _FUNCS:
            return _FUNCS[node.id]
        if node.id not in env or env[node.id] is None:
            raise ExprError(f"{node.id} is not available here")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else (not v)
    if isinstance(node, ast.BoolOp):
        vals = (_eval(v, env) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript):
        seq = _eval(node.value, env)
        try:
            return seq[_eval(node.slice, env)]
        except IndexError:
            return None
    if isinstance(node, ast.Call):
        return _eval(node.func, env)(*[_eval(a, env) for a in node.args])
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_eval(e, env) for e in node.elts}
    raise ExprError(f"unsupported node {type(node).__name__}")
