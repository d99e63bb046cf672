"""Read an EAGLE-3 setter's body symbolically: what it stores for ``ids=None`` and for explicit ids.

The setter (``set_eagle3_layers_to_capture(self, layer_ids=None)``) is executed twice over the
``ast``, never run: once with the ids absent (the default path) and once with explicit ids. A setter with no
ids parameter (``set_eagle3_layers_to_capture(self)``, SGLang 0.4.4.post2-0.4.8) has the default path only:
its analysis has no explicit cases and ``takes_ids`` False. Values
are tracked symbolically:

* ``N``: ``self.config.num_hidden_layers``, ``self.config.text_config.num_hidden_layers``,
  ``self.config.get_text_config().num_hidden_layers``, ``len(self.model.layers)``, or a local
  variable holding one of those;
* a default list over N (``[2, num_layers // 2, num_layers - 3]``), with a shift;
* the explicit ids with a shift (``[val + 1 for val in layer_ids]``: +1; ``list(layer_ids)``: 0).

Where the ids go: ``self.<attr>.layers_to_capture = value`` or ``self.<attr>.set_eagle3_layers_to_capture
(value)`` (the sink; ``attr`` names the inner model), or ``self.<attr>.set_eagle3_layers_to_capture
(layer_ids)`` with the ids untouched (delegation to the class ``attr`` holds).

Branches on the explicit ids (``if layer_ids and layer_ids[0] == 1:``) become ordered cases whose
condition is rewritten into the expression language (``ids[0] == 1``; the truthiness test
``layer_ids and`` is dropped). An ``if`` whose body only returns or raises and that does not look at
the ids is a guard (pipeline rank, missing language model) and is skipped. ``hasattr(self.<attr>,
"set_eagle3_layers_to_capture")`` is decided from the class ``attr`` holds. Anything else raises
:class:`Unrecognised` with the line: the rule is reported, never guessed.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field, replace
from typing import Callable

from .. import expr as expr_lang
from .results import ProbedCase, Site

SETTER = "set_eagle3_layers_to_capture"


class Unrecognised(Exception):
    def __init__(self, node: ast.AST | None, message: str):
        super().__init__(message)
        self.line = getattr(node, "lineno", None)
        self.message = message


# ------------------------------------------------------------------ symbolic values

@dataclass(frozen=True)
class Num:  # a scalar expression over N, as expression-language AST
    node: ast.expr


@dataclass(frozen=True)
class DefaultList:  # a list over N, then a shift added to each element
    node: ast.expr
    shift: int = 0


@dataclass(frozen=True)
class Ids:  # the explicit ids, each shifted
    shift: int = 0
    raw: bool = True  # still the parameter object itself (not reassigned or transformed)


@dataclass(frozen=True)
class NoneVal:
    pass


@dataclass(frozen=True)
class Config:  # self.config or its text config: something with num_hidden_layers
    text: str


@dataclass(frozen=True)
class SinkRef:  # self.<attr>.layers_to_capture, read back (for loops over it)
    attr: str


@dataclass(frozen=True)
class OutOfRange:  # ``[i for i in ids if not lo <= i < hi]``: the ids outside lo..hi-1 (truthy when any is)
    lo: ast.expr
    hi: ast.expr


@dataclass(frozen=True)
class Unknown:
    node: ast.AST


N_NODE = ast.Name(id="N", ctx=ast.Load())


# ------------------------------------------------------------------ results

@dataclass(frozen=True)
class Sink:
    attr: str  # "" = self
    via_setter: bool  # stored through the inner model's own setter
    site: Site


@dataclass(frozen=True)
class FlagLoop:
    guarded: bool
    site: Site


@dataclass(frozen=True)
class SetterAnalysis:
    default_ids: str | None = None
    default_shift: int = 0
    default_site: Site | None = None
    explicit: tuple[ProbedCase, ...] = ()
    sink: Sink | None = None
    flag_loops: tuple[FlagLoop, ...] = ()
    n_from: str = ""
    delegate: str | None = None  # attribute the ids are handed to, unchanged
    delegate_site: Site | None = None
    checks: tuple[tuple[str, Site, str, str], ...] = ()  # (condition over ids, site, error, message): the setter raises
    sink_name: str = "layers_to_capture"  # the attribute the capture list is stored in
    takes_ids: bool = True  # False: ``set_eagle3_layers_to_capture(self)``, no ids parameter (explicit is empty)


@dataclass
class _State:
    env: dict
    conds: tuple[str, ...] = ()
    cond_line: int | None = None
    sink_value: object = None
    sink: Sink | None = None
    flags: list = field(default_factory=list)
    delegate: tuple[str, Site] | None = None
    sink_name: str = "layers_to_capture"

    def fork(self) -> "_State":
        return _State(dict(self.env), self.conds, self.cond_line, self.sink_value, self.sink, list(self.flags),
                      self.delegate, self.sink_name)


HasAttr = Callable[[str, str], bool | None]  # (attr, method) -> whether the held class has it; None: unknown


class SetterReader:
    """``setter``: the method read (EAGLE-3's by default; the DFlash / DSpark setters for
    :mod:`eagle_audit.probe.block`, which take no default: ``need_default=False``, and whose raising branches
    over the ids are kept as ``checks``). ``sinks``: the attributes a capture list may be stored in."""

    def __init__(self, path: str, fn: ast.FunctionDef, hasattr_fn: HasAttr, setter: str = SETTER,
                 need_default: bool = True, sinks: tuple[str, ...] = ("layers_to_capture",)):
        self.path = path
        self.fn = fn
        self.hasattr_fn = hasattr_fn
        self.setter, self.need_default, self.sinks = setter, need_default, sinks
        self.checks: list[tuple[str, Site, str, str]] = []
        args = fn.args.posonlyargs + fn.args.args
        if len(args) < 2 and (not need_default or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs):
            raise Unrecognised(fn, f"{setter} takes no ids parameter")
        # ``set_eagle3_layers_to_capture(self)`` (SGLang 0.4.4.post2-0.4.8): the default is all it can store
        self.param = args[1].arg if len(args) >= 2 else None
        self.n_from: set[str] = set()

    def site(self, node: ast.AST, start: int | None = None) -> Site:
        return Site(self.path, start or node.lineno, node.end_lineno)

    # ---------------------------------------------------------------- top level

    def read(self) -> SetterAnalysis:
        default = self._run(NoneVal()) if self.need_default else []  # block setters always get ids
        explicit = self._run(Ids()) if self.param is not None else []  # a setter without the parameter gets none
        delegates = {s.delegate[0] for s in default + explicit if s.delegate}
        if delegates:
            if len(delegates) > 1 or any(s.delegate is None for s in default + explicit):
                raise Unrecognised(self.fn, "the ids are delegated on some paths only")
            first = next(s for s in default + explicit if s.delegate)
            return SetterAnalysis(delegate=first.delegate[0], delegate_site=first.delegate[1],
                                  checks=tuple(dict.fromkeys(self.checks)))
        if not self.need_default and not default and explicit:
            return self._explicit_only(explicit)
        if len(default) != 1:
            raise Unrecognised(self.fn, f"{len(default)} paths set the default ids (expected one)")
        d = default[0]
        if not isinstance(d.sink_value, DefaultList):
            raise Unrecognised(self.fn, f"the default path stores {_describe(d.sink_value)}, not a list over N")
        cases = []
        for s in explicit:
            if not isinstance(s.sink_value, Ids):
                raise Unrecognised(self.fn, f"an explicit-ids path stores {_describe(s.sink_value)}")
            when = " and ".join(s.conds) or None
            cases.append(ProbedCase(shift=s.sink_value.shift, when=when,
                                    site=Site(self.path, s.cond_line or s.sink.site.line, s.sink.site.end_line)))
        # a case just before the catch-all with the catch-all's shift changes nothing: drop it
        while len(cases) > 1 and cases[-1].when is None and cases[-2].shift == cases[-1].shift:
            del cases[-2]
        sinks = {(s.sink.attr, s.sink.via_setter) for s in default + explicit}
        if len(sinks) != 1:
            raise Unrecognised(self.fn, "the paths store the ids in different places")
        flags = tuple(dict.fromkeys(f for s in default + explicit for f in s.flags))
        return SetterAnalysis(
            default_ids=ast.unparse(d.sink_value.node), default_shift=d.sink_value.shift,
            default_site=d.sink.site, explicit=tuple(cases), sink=d.sink, flag_loops=flags,
            n_from=", ".join(sorted(self.n_from)), takes_ids=self.param is not None)

    def _explicit_only(self, explicit: list[_State]) -> SetterAnalysis:
        """A setter that raises without ids (the DFlash / DSpark ones): its explicit cases and checks only."""
        cases = []
        for s in explicit:
            if not isinstance(s.sink_value, Ids):
                raise Unrecognised(self.fn, f"an explicit-ids path stores {_describe(s.sink_value)}")
            cases.append(ProbedCase(shift=s.sink_value.shift, when=" and ".join(s.conds) or None,
                                    site=Site(self.path, s.cond_line or s.sink.site.line, s.sink.site.end_line)))
        sinks = {(s.sink.attr, s.sink.via_setter, s.sink_name) for s in explicit}
        if len(sinks) != 1:
            raise Unrecognised(self.fn, "the paths store the ids in different places")
        first = explicit[0]
        flags = tuple(dict.fromkeys(f for s in explicit for f in s.flags))
        return SetterAnalysis(explicit=tuple(cases), sink=first.sink, flag_loops=flags,
                              n_from=", ".join(sorted(self.n_from)), checks=tuple(dict.fromkeys(self.checks)),
                              sink_name=first.sink_name)

    def _run(self, ids: object) -> list[_State]:
        state = _State(env={self.param: ids} if self.param is not None else {})
        return [s for s in self._block(list(self.fn.body), state) if s is not None]

    # ---------------------------------------------------------------- statements

    def _block(self, stmts: list[ast.stmt], state: _State) -> list[_State]:
        for i, stmt in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, ast.Return):
                if stmt.value is not None:
                    raise Unrecognised(stmt, "the setter returns a value")
                return [state]
            if isinstance(stmt, ast.Raise):
                return []
            if isinstance(stmt, ast.If):
                return self._if(stmt, rest, state)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._assign(stmt, state)
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                if self._call(stmt, state):
                    return [state]
                continue
            if isinstance(stmt, ast.For):
                self._for(stmt, state)
                continue
            raise Unrecognised(stmt, f"unrecognised statement `{ast.unparse(stmt).splitlines()[0][:60]}`")
        return [state]

    def _if(self, stmt: ast.If, rest: list[ast.stmt], state: _State) -> list[_State]:
        test = self._test(stmt.test, state)
        if test is True:
            return self._block(stmt.body + rest, state)
        if test is False:
            return self._block(stmt.orelse + rest, state)
        if isinstance(test, str):  # a condition over the explicit ids: ordered cases, then-branch first
            taken = state.fork()
            taken.conds = state.conds + (test,)
            taken.cond_line = taken.cond_line or stmt.lineno
            if not self.need_default and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], ast.Raise):
                self.checks.append((test, self.site(stmt), *_raised(stmt.body[-1])))  # it raises when test holds
                return self._block(rest, state)
            return self._block(stmt.body + rest, taken) + self._block(stmt.orelse + rest, state.fork())
        # a condition that does not look at the ids
        if not stmt.orelse and stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
            if not self.need_default and isinstance(stmt.body[-1], ast.Raise) and self._from_ids(stmt.test, state):
                raise Unrecognised(stmt, f"a check over the ids not read: `{ast.unparse(stmt.test)[:60]}`")
            return self._block(rest, state)  # a guard: the setter works only past it
        raise Unrecognised(stmt, f"unrecognised condition `{ast.unparse(stmt.test)[:60]}`")

    def _assign(self, stmt: ast.Assign | ast.AnnAssign, state: _State) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or stmt.value is None:
            raise Unrecognised(stmt, "unrecognised assignment")
        target = targets[0]
        value = self._eval(stmt.value, state)
        if isinstance(target, ast.Name):
            state.env[target.id] = replace(value, raw=False) if isinstance(value, Ids) else value
            return
        if isinstance(target, ast.Attribute) and target.attr in self.sinks:
            attr = _self_chain(target.value)
            if attr is None:
                raise Unrecognised(stmt, f"{target.attr} set on `{ast.unparse(target.value)}`")
            self._store(value, Sink(attr, False, self.site(stmt)), stmt, state)
            state.sink_name = target.attr
            return
        if isinstance(target, ast.Attribute) and _self_chain(target.value) is not None and \
                isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, bool):
            return  # a flag such as self.capture_aux_hidden_states = True
        raise Unrecognised(stmt, f"unrecognised assignment to `{ast.unparse(target)}`")

    def _store(self, value: object, sink: Sink, node: ast.AST, state: _State) -> None:
        if not isinstance(value, (DefaultList, Ids)):
            raise Unrecognised(node, f"stores {_describe(value)} as the capture list")
        state.sink_value = value
        state.sink = sink

    def _call(self, stmt: ast.Expr, state: _State) -> bool:
        """Handles a call statement; True when it ends the path (delegation)."""
        call = stmt.value
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in (self.setter, *self._also_delegates()):
            if len(call.args) != 1 or call.keywords:
                raise Unrecognised(stmt, f"{func.attr} called with unexpected arguments")
            arg = call.args[0]
            if isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
                attr = "super()"
            else:
                attr = _self_chain(func.value)
                if attr is None or (attr == "" and func.attr == self.setter):
                    raise Unrecognised(stmt, f"{func.attr} called on `{ast.unparse(func.value)}`")
            value = self._eval(arg, state)
            if isinstance(arg, ast.Name) and arg.id == self.param and isinstance(value, (Ids, NoneVal)) and \
                    (isinstance(value, NoneVal) or value.raw):
                state.delegate = (attr if func.attr == self.setter else f"{attr}#{func.attr}", self.site(stmt))
                return True
            if func.attr != self.setter:
                raise Unrecognised(stmt, f"transformed ids passed to {func.attr}")
            if attr == "super()":
                raise Unrecognised(stmt, "transformed ids passed to super()")
            self._store(value, Sink(attr, True, self.site(stmt)), stmt, state)
            return False
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("logger", "logging"):
            return False
        raise Unrecognised(stmt, f"unrecognised call `{ast.unparse(call)[:60]}`")

    def _for(self, stmt: ast.For, state: _State) -> None:
        """``for i in self.model.layers_to_capture: [if <bounds>:] setattr(self.model.layers[i], flag, True)``."""
        it = self._eval(stmt.iter, state)
        if not (isinstance(it, SinkRef) or isinstance(it, (Ids, DefaultList))) or not isinstance(stmt.target, ast.Name):
            raise Unrecognised(stmt, f"unrecognised loop over `{ast.unparse(stmt.iter)[:60]}`")
        body, guarded = stmt.body, False
        if len(body) == 1 and isinstance(body[0], ast.If) and not body[0].orelse:
            guarded, body = True, body[0].body
        if not all(_is_flag_setattr(s) for s in body) or stmt.orelse:
            raise Unrecognised(stmt, "unrecognised loop body")
        state.flags.append(FlagLoop(guarded, self.site(stmt)))

    # ---------------------------------------------------------------- expressions

    def _eval(self, node: ast.expr, state: _State) -> object:
        if isinstance(node, ast.Name):
            if node.id in state.env:
                return state.env[node.id]
            return Unknown(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return Num(ast.Constant(node.value))
        if isinstance(node, ast.Constant) and node.value is None:
            return NoneVal()
        n = self._n_source(node, state)
        if n is not None:
            self.n_from.add(n)
            return Num(N_NODE)
        if isinstance(node, ast.Attribute):
            if node.attr == "layers_to_capture" and _self_chain(node.value) is not None:
                return SinkRef(_self_chain(node.value))
            cfg = self._config(node, state)
            return cfg if cfg is not None else Unknown(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            left, right = self._eval(node.left, state), self._eval(node.right, state)
            if isinstance(left, Num) and isinstance(right, Num):
                return Num(ast.BinOp(left.node, node.op, right.node))
            return Unknown(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self._eval(node.operand, state)
            return Num(ast.UnaryOp(ast.USub(), v.node)) if isinstance(v, Num) else Unknown(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self._eval(e, state) for e in node.elts]
            if all(isinstance(v, Num) for v in items):
                return DefaultList(ast.List([v.node for v in items], ast.Load()))
            return Unknown(node)
        if isinstance(node, ast.ListComp) or (isinstance(node, ast.SetComp) and not self.need_default):
            return self._listcomp(node, state)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "set") \
                and len(node.args) == 1 and not node.keywords:
            v = self._eval(node.args[0], state)
            return replace(v, raw=False) if isinstance(v, Ids) else v
        if isinstance(node, ast.Call):
            cfg = self._config(node, state)
            if cfg is not None:
                return cfg
        return Unknown(node)

    def _config(self, node: ast.expr, state: _State) -> Config | None:
        text = ast.unparse(node)
        if text in ("self.config", "self.config.text_config", "self.config.get_text_config()",
                    "self.config.language_config", "self.config.llm_config"):
            return Config(text)
        if isinstance(node, ast.Name) and isinstance(state.env.get(node.id), Config):
            return state.env[node.id]
        if isinstance(node, ast.Attribute) and node.attr in ("text_config",):
            inner = self._config(node.value, state)
            return Config(f"{inner.text}.{node.attr}") if inner else None
        return None

    def _n_source(self, node: ast.expr, state: _State) -> str | None:
        """The text of an N source: a config's num_hidden_layers or the length of the layer list."""
        if isinstance(node, ast.Attribute) and node.attr == "num_hidden_layers":
            cfg = self._config(node.value, state)
            return f"{cfg.text}.num_hidden_layers" if cfg else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and \
                len(node.args) == 1 and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "layers" \
                and _self_chain(node.args[0].value) is not None:
            return ast.unparse(node)
        return None

    def _listcomp(self, node: ast.ListComp, state: _State) -> object:
        if len(node.generators) != 1:
            return Unknown(node)
        gen = node.generators[0]
        if gen.is_async or not isinstance(gen.target, ast.Name) or len(gen.ifs) > 1:
            return Unknown(node)
        var = gen.target.id
        if len(gen.ifs) == 1 and isinstance(self._eval(gen.iter, state), Ids) and \
                isinstance(node.elt, ast.Name) and node.elt.id == var:
            bounds = _range_filter(gen.ifs[0], var)
            if bounds is not None:
                lo, hi = (self._eval(b, state) for b in bounds)
                if isinstance(lo, Num) and isinstance(hi, Num):
                    return OutOfRange(lo.node, hi.node)
            return Unknown(node)
        if gen.ifs:
            return Unknown(node)
        shift = _elt_shift(node.elt, var)
        if shift is None:
            return Unknown(node)
        source = self._eval(gen.iter, state)
        if isinstance(source, Ids):
            return Ids(source.shift + shift, raw=False)
        if isinstance(source, DefaultList):
            return DefaultList(source.node, source.shift + shift)
        return Unknown(node)

    def _test(self, node: ast.expr, state: _State) -> bool | str | None:
        """True / False when decided on this path; a condition text over ids and N; None: not about ids."""
        if not self.need_default and isinstance(node, (ast.Call, ast.UnaryOp)):
            ranged = self._range_call(node, state)
            if ranged is not None:
                return ranged
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
            v = self._eval(node.left, state)
            if isinstance(v, (NoneVal, Ids, DefaultList)):
                is_none = isinstance(v, NoneVal)
                return is_none if isinstance(node.ops[0], ast.Is) else not is_none
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self._test(node.operand, state)
            if isinstance(inner, bool):
                return not inner
            if isinstance(inner, str):
                return f"not ({inner})"
            return None if not self._mentions_ids(node, state) else self._fail(node)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and not self.need_default:
            parts = []
            for v in node.values:
                if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) and isinstance(v.operand, ast.Name) \
                        and isinstance(state.env.get(v.operand.id), Ids):
                    parts.append("len(ids) == 0")  # ``not layer_ids``: the setter rejects an empty list
                    continue
                parts.append(self._test(v, state))
            if all(isinstance(p, str) for p in parts):
                return " or ".join(f"({p})" for p in parts)
            self._fail(node)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            parts = []
            for v in node.values:
                t = self._test(v, state)
                if t is False:
                    return False
                if t is None:
                    self._fail(node)
                if isinstance(t, str):
                    parts.append(t)
            return " and ".join(parts) if parts else True
        if isinstance(node, ast.Name) and isinstance(state.env.get(node.id), OutOfRange):
            v = state.env[node.id]
            return f"len(ids) > 0 and (min(ids) < {ast.unparse(v.lo)} or max(ids) >= {ast.unparse(v.hi)})"
        if isinstance(node, ast.Name) and node.id in state.env:
            v = state.env[node.id]
            if isinstance(v, NoneVal):
                return False
            if isinstance(v, (Ids, DefaultList)):
                return True  # truthiness of the ids: an empty list is not distinguished
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" and \
                len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            attr = _self_chain(node.args[0])
            if attr:
                has = self.hasattr_fn(attr, node.args[1].value)
                if has is None:
                    raise Unrecognised(node, f"cannot tell whether self.{attr} has {node.args[1].value}")
                return has
        if not self._mentions_ids(node, state):
            return None
        return self._condition(node, state)

    def _range_call(self, node: ast.expr, state: _State) -> str | None:
        """``any(i < lo or i >= hi for i in ids)`` / ``not all(lo <= i < hi for i in ids)``: some id is outside
        lo..hi-1, as a condition over ids; None for any other shape."""
        negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        call = node.operand if negated else node
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and len(call.args) == 1
                and isinstance(call.args[0], ast.GeneratorExp) and call.func.id == ("all" if negated else "any")):
            return None
        gen = call.args[0]
        if len(gen.generators) != 1 or gen.generators[0].ifs or not isinstance(gen.generators[0].target, ast.Name):
            return None
        var = gen.generators[0].target.id
        if not isinstance(self._eval(gen.generators[0].iter, state), Ids):
            return None
        test = ast.UnaryOp(ast.Not(), gen.elt) if negated else gen.elt
        bounds = _range_filter(test, var)
        if bounds is None:
            return None
        lo, hi = (self._eval(b, state) for b in bounds)
        if not (isinstance(lo, Num) and isinstance(hi, Num)):
            return None
        return f"len(ids) > 0 and (min(ids) < {ast.unparse(lo.node)} or max(ids) >= {ast.unparse(hi.node)})"

    def _also_delegates(self) -> tuple[str, ...]:
        """Other setters a block-draft setter may hand its ids to (Kimi-K3, MiniMax-M3: DFlash -> DSpark)."""
        return () if self.need_default else ("set_dflash_layers_to_capture", "set_dspark_layers_to_capture")

    def _from_ids(self, node: ast.AST, state: _State) -> bool:
        """Whether ``node`` reads a local computed from the ids (``bad = [i for i in layer_ids if ...]``)."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(state.env.get(n.id), Unknown):
                inner = state.env[n.id].node
                if any(isinstance(m, ast.Name) and m.id == self.param for m in ast.walk(inner)):
                    return True
        return False

    def _mentions_ids(self, node: ast.AST, state: _State) -> bool:
        return any(isinstance(n, ast.Name) and isinstance(state.env.get(n.id), (Ids, NoneVal)) for n in ast.walk(node))

    def _fail(self, node: ast.AST):
        raise Unrecognised(node, f"unrecognised condition `{ast.unparse(node)[:60]}`")

    def _condition(self, node: ast.expr, state: _State) -> str:
        """Rewrite a condition over the ids into the expression language: ids, N, max/min/len."""
        if any(isinstance(state.env.get(n.id), NoneVal) for n in ast.walk(node) if isinstance(n, ast.Name)):
            self._fail(node)

        reader = self

        class Rewrite(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name):
                v = state.env.get(n.id)
                if isinstance(v, Ids) and v.shift == 0:
                    return ast.Name("ids", ast.Load())
                if isinstance(v, Num):
                    return copy.deepcopy(v.node)
                if n.id in ("max", "min", "len", "sorted", "list", "set"):
                    return n
                reader._fail(node)

            def visit_Attribute(self, n: ast.Attribute):
                src = reader._n_source(n, state)
                if src is None:
                    reader._fail(node)
                reader.n_from.add(src)
                return ast.Name("N", ast.Load())

            def visit_Call(self, n: ast.Call):
                src = reader._n_source(n, state)
                if src is not None:
                    reader.n_from.add(src)
                    return ast.Name("N", ast.Load())
                return self.generic_visit(n)

        rewritten = Rewrite().visit(copy.deepcopy(node))
        text = ast.unparse(ast.fix_missing_locations(rewritten))
        try:
            expr_lang.parse(text)
        except expr_lang.ExprError:
            self._fail(node)
        return text


def _self_chain(node: ast.expr) -> str | None:
    """``self`` -> "", ``self.model`` -> "model", ``self.model.inner`` -> "model.inner"; else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self":
        return ".".join(reversed(parts))
    return None


def _elt_shift(elt: ast.expr, var: str) -> int | None:
    if isinstance(elt, ast.Name) and elt.id == var:
        return 0
    if isinstance(elt, ast.BinOp) and isinstance(elt.op, (ast.Add, ast.Sub)):
        left, right = elt.left, elt.right
        if isinstance(left, ast.Name) and left.id == var and isinstance(right, ast.Constant) and isinstance(right.value, int):
            return right.value if isinstance(elt.op, ast.Add) else -right.value
        if isinstance(elt.op, ast.Add) and isinstance(right, ast.Name) and right.id == var and \
                isinstance(left, ast.Constant) and isinstance(left.value, int):
            return left.value
    return None


def _is_flag_setattr(stmt: ast.stmt) -> bool:
    """``setattr(<x>.layers[i], "_is_layer_to_capture", True)`` or ``<x>.layers[i]._is_layer_to_capture = True``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
            and stmt.value.func.id == "setattr" and len(stmt.value.args) == 3:
        return isinstance(stmt.value.args[1], ast.Constant) and stmt.value.args[1].value == "_is_layer_to_capture"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute):
        return stmt.targets[0].attr == "_is_layer_to_capture"
    return False


def _describe(value: object) -> str:
    if isinstance(value, Unknown):
        return f"`{ast.unparse(value.node)[:60]}`"
    if value is None:
        return "nothing"
    return type(value).__name__


def _raised(stmt: ast.Raise) -> tuple[str, str]:
    """(exception name, its message's literal text, f-string fields as ``{...}``) of ``raise E("...")``."""
    exc = stmt.exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)):
        return (ast.unparse(exc)[:40] if exc is not None else "re-raise"), ""
    parts = []
    for arg in exc.args[:1]:
        nodes = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
        for v in nodes:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value.replace("{", "(").replace("}", ")"))
            else:
                parts.append("...")
    return exc.func.id, "".join(parts)


def _range_filter(test: ast.expr, var: str) -> tuple[ast.expr, ast.expr] | None:
    """(lo, hi) of a filter that keeps ``var`` outside ``lo..hi-1``: ``not lo <= var < hi`` or
    ``var < lo or var >= hi``; None for any other filter."""
    def is_var(n: ast.expr) -> bool:
        return isinstance(n, ast.Name) and n.id == var
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Compare):
        c = test.operand
        if len(c.ops) == 2 and isinstance(c.ops[0], ast.LtE) and isinstance(c.ops[1], ast.Lt) and is_var(c.comparators[0]):
            return c.left, c.comparators[1]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2:
        a, b = test.values
        if all(isinstance(x, ast.Compare) and len(x.ops) == 1 and is_var(x.left) for x in (a, b)) and \
                isinstance(a.ops[0], ast.Lt) and isinstance(b.ops[0], ast.GtE):
            return a.comparators[0], b.comparators[0]
    return None
