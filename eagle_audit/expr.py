"""A tiny, safe expression language for convention files.

Convention files (probes/*.json) state default ids and conditions as Python-like expressions over
``N`` (the target's ``num_hidden_layers``), ``ids`` (the draft's explicit ids), ``k`` (one capture
index, in ``index_failures`` and ``feeds``) and ``D`` (the draft's own layer count: DFlash defaults), for example
``"[2, N // 2, N - 3]"`` or ``"max(ids) == N"``. They are parsed with ``ast`` and evaluated over a
closed set of node types; nothing is imported or called beyond the functions listed here.

Bounds (a convention file may come from anyone): an expression is at most :data:`MAX_TEXT` characters
and :data:`MAX_NODES` syntax nodes; every integer stays within ``±MAX_INT``; every list, set or string
built stays within :data:`MAX_LEN` items. Anything outside, and every evaluation error (``N // 0``,
``max()``), is an :class:`ExprError` naming the expression (cut to a sane length).
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from .errors import BadConvention, shown

MAX_TEXT = 500
MAX_NODES = 200
MAX_INT = 10**9
MAX_LEN = 10_000

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b}
def _total(fn):
    """max/min of an empty list is None (as ``ids[0]`` of an empty list is): the engines guard these
    tests with ``layer_ids and ...``, so a condition over no ids is simply false."""
    return lambda *a: fn(*a) if len(a) > 1 or a[0] else None


def _spread(first: int, last: int, count: int) -> list[int]:
    """``count`` ids spread evenly over ``first..last``, rounded half to even: the DFlash default layer choice
    (SGLang ``speculative/dflash_utils.py`` ``build_target_layer_ids``; SpecForge and z-lab ``dflash`` state the
    same formula). ``count`` 1 gives ``[first]``: callers state the engines' own one-layer case separately."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last, count)) or not 0 < count <= MAX_LEN:
        raise ExprError(f"spread({first!r}, {last!r}, {count!r}): integers with 0 < count <= {MAX_LEN}")
    if count == 1:
        return [first]
    return [int(round(first + (i * (last - first)) / (count - 1))) for i in range(count)]


_FUNCS = {"max": _total(max), "min": _total(min), "len": len, "sorted": sorted, "list": list, "set": set,
          "spread": _spread}


class ExprError(BadConvention, ValueError):
    """A convention expression that cannot be parsed or evaluated (bad input: exit 2)."""


class MissingName(ExprError):
    """An expression names a value (``name``) its caller did not have (None): the caller may say why, in its terms."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def parse(text: str) -> ast.expr:
    if not isinstance(text, str):
        raise ExprError(f"an expression must be a string, got {shown(text)}")
    if len(text) > MAX_TEXT:
        raise ExprError(f"expression {shown(text)} is {len(text)} characters long; at most {MAX_TEXT} are allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"cannot parse expression {shown(text)}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, nesting deeper than the parser takes
        raise ExprError(f"cannot parse expression {shown(text)}") from None
    _check(tree.body, text)
    return tree.body


def _check(node: ast.AST, text: str) -> None:
    ok = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript, ast.Call,
          ast.List, ast.Tuple, ast.Set, ast.IfExp, ast.Load, ast.USub, ast.And, ast.Or, ast.Not, *_BINOPS, *_CMPOPS)
    nodes = list(ast.walk(node))
    if len(nodes) > MAX_NODES:
        raise ExprError(f"expression {shown(text)} has {len(nodes)} syntax nodes; at most {MAX_NODES} are allowed")
    for sub in nodes:
        if not isinstance(sub, ok):
            raise ExprError(f"unsupported syntax {type(sub).__name__} in {shown(text)}")
        if isinstance(sub, ast.Name) and sub.id not in ("N", "ids", "k", "D", *_FUNCS):
            raise ExprError(f"unknown name {shown(sub.id)} in {shown(text)} (allowed: N, ids, k, D, {', '.join(_FUNCS)})")
        if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCS):
            raise ExprError(f"unsupported call in {shown(text)}")
        if isinstance(sub, ast.Call) and sub.keywords:
            raise ExprError(f"keyword arguments are not supported in {shown(text)}")
        if isinstance(sub, ast.Constant) and not isinstance(sub.value, (int, str, bool, type(None))):
            raise ExprError(f"unsupported constant {shown(sub.value)} in {shown(text)} (integers, strings, "
                            "True/False/None)")


def evaluate(text: str, **names: Any) -> Any:
    node = parse(text)
    try:
        return _bounded(_eval(node, names), text)
    except ExprError as e:
        if "in expression" in e.message or shown(text) in e.message:
            raise
        message = f"{e.message} in expression {shown(text)}"
        raise (MissingName(e.name, message) if isinstance(e, MissingName) else ExprError(message)) from None
    except (TypeError, ValueError, ZeroDivisionError, IndexError, KeyError, OverflowError, RecursionError,
            MemoryError) as e:
        raise ExprError(f"expression {shown(text)} cannot be evaluated ({type(e).__name__}: "
                        f"{shown(str(e), 60)[1:-1]})") from None


def _bounded(value: Any, text: str = "") -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ExprError(f"an integer beyond ±{MAX_INT}")
    if isinstance(value, (str, list, tuple, set)) and len(value) > MAX_LEN:
        raise ExprError(f"a value of more than {MAX_LEN} items")
    return value


def _size(v: Any) -> int:
    return len(v) if isinstance(v, (str, list, tuple, set)) else 1


def _binop(op: type, a: Any, b: Any) -> Any:
    if op is ast.Mult:  # sequence repetition: check the size before building it
        seq, times = (a, b) if isinstance(b, int) else (b, a)
        if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and _size(seq) * max(times, 0) > MAX_LEN:
            raise ExprError(f"a value of more than {MAX_LEN} items")
    if op is ast.Add and _size(a) + _size(b) > MAX_LEN + 1:
        raise ExprError(f"a value of more than {MAX_LEN} items")
    return _bounded(_BINOPS[op](a, b))


def _eval(node: ast.AST, env: dict) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _FUNCS:
            return _FUNCS[node.id]
        if node.id not in env or env[node.id] is None:
            raise MissingName(node.id, f"{node.id} is not available here")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _binop(type(node.op), _eval(node.left, env), _eval(node.right, env))
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
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Subscript):
        seq = _eval(node.value, env)
        try:
            return seq[_eval(node.slice, env)]
        except IndexError:
            return None
    if isinstance(node, ast.Call):
        return _bounded(_eval(node.func, env)(*[_eval(a, env) for a in node.args]))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_eval(e, env) for e in node.elts}
    raise ExprError(f"unsupported node {type(node).__name__}")
