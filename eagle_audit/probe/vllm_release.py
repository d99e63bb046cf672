"""What a vLLM release serves beyond its capture rules, read from its files: the speculative methods it accepts,
what its V1 runner refuses, and how it loads an EAGLE-3 draft's own ``embed_tokens`` / ``lm_head``.

* **Methods.** ``SpeculativeMethod = Literal[...]`` (``config.py`` up to 0.10, ``config/speculative.py`` from
  0.11), other ``Literal`` aliases expanded: a release whose methods lack ``dflash`` / ``dspark`` refuses such a
  draft at start-up (the config's validation), whatever its ids.
* **V1 refusals.** ``config/vllm.py`` ``_get_v1_model_runner_unsupported_features`` (from 0.29.0):
  ``if ...method == "dspark": unsupported.append("...")``, raised at start-up by the V1 runner's validation.
* **Draft weights.** The proposer's ``load_model`` (V1: ``v1/spec_decode/eagle.py`` up to 0.19,
  ``llm_base_proposer.py`` from 0.20; V2: ``v1/worker/gpu/spec_decode/eagle/utils.py``) replaces the draft's
  ``embed_tokens`` / ``lm_head`` with the target's: always (``target``), whenever the shapes agree
  (``target_if_same_shape``: a draft's own trained weights of the target's shape are discarded), or only when
  the draft's checkpoint has none or identical ones (``own_if_in_checkpoint``: ``has_own_embed_tokens`` /
  ``has_own_lm_head`` or ``loaded_weights``; vLLM PR #28549), or never for an ``eagle3`` draft (``own``). Each
  policy names the file:line of the assignment it was read from.

Every reader returns what it read with its site, or a "not read" line naming the file, never a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .results import Site
from .source import SourceTree, parse_python

CONFIG_FILES = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")
VLLM_CONFIG = "vllm/config/vllm.py"
V1_UNSUPPORTED = "_get_v1_model_runner_unsupported_features"
#: package-relative files the release probe reads besides the model files
EXTRA_PATHS = ("config.py", "config/__init__.py", "config/speculative.py", "config/vllm.py")
#: per runner, the files whose functions may replace the draft's weights with the target's
WEIGHTS = {"v1": ("vllm/v1/spec_decode/eagle.py", "vllm/v1/spec_decode/llm_base_proposer.py"),
           "v2": ("vllm/v1/worker/gpu/spec_decode/eagle/utils.py",)}
WEIGHT_FILES = tuple(sorted({p for ps in WEIGHTS.values() for p in ps}))
POLICIES = ("target", "target_if_same_shape", "own_if_in_checkpoint", "own")
#: block-draft kinds -> the speculative method that serves them
KIND_METHODS = {"dflash": "dflash", "dspark": "dspark"}


@dataclass(frozen=True)
class Methods:
    names: tuple[str, ...]
    site: Site | None
    problem: str = ""
    validated: bool = False  # SpeculativeConfig is a pydantic dataclass: a method outside the Literal is refused


def _validated(tree: ast.Module) -> bool:
    """Whether ``SpeculativeConfig`` validates its fields: ``dataclass`` imported from ``pydantic.dataclasses``
    (0.9.2-0.17), or decorated by vLLM's ``@config`` alone (0.18 on, which builds a pydantic dataclass). Up to
    0.9.1 it is a stdlib dataclass and its ``Literal`` is not enforced (an assumption stated in the notes)."""
    pydantic = any(isinstance(n, ast.ImportFrom) and n.module == "pydantic.dataclasses" and
                   any(a.name == "dataclass" for a in n.names) for n in tree.body)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"), None)
    if cls is None:
        return False
    names = [ast.unparse(d).split("(")[0] for d in cls.decorator_list]
    return ("dataclass" in names and pydantic) or names == ["config"]


def _literal_strings(node: ast.expr, aliases: dict[str, ast.expr], seen: frozenset = frozenset()) -> list[str] | None:
    """The strings of ``Literal["a", Alias, ...]`` with aliases of the same file expanded; None when not such."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out: list[str] = []
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                out.append(item.value)
            elif isinstance(item, ast.Name) and item.id in aliases and item.id not in seen:
                sub = _literal_strings(aliases[item.id], aliases, seen | {item.id})
                if sub is None:
                    return None
                out.extend(sub)
            else:
                return None
        return out
    return None


def read_methods(src: SourceTree) -> Methods:
    """The speculative methods the release accepts (``SpeculativeMethod``)."""
    for path in CONFIG_FILES:
        text = src.files.get(path)
        if text is None:
            continue
        try:
            tree = parse_python(text, filename=path)
        except SyntaxError as e:
            return Methods((), None, f"{path}:{e.lineno}: cannot be parsed ({e.msg})")
        aliases = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Name)}
        node = next((n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SpeculativeMethod" for t in n.targets)), None)
        if node is None:
            continue
        names = _literal_strings(node.value, aliases)
        if names is None:
            return Methods((), Site(path, node.lineno), f"{path}:{node.lineno}: SpeculativeMethod is not a Literal of "
                                                        "strings and aliases (unrecognised)")
        return Methods(tuple(dict.fromkeys(names)), Site(path, node.lineno, node.end_lineno), "", _validated(tree))
    return Methods((), None, f"no SpeculativeMethod in {' or '.join(CONFIG_FILES)}")


def method_refusals(src: SourceTree, version: str, methods: Methods) -> list[dict]:
    """``refuses`` entries for the block-draft kinds whose method this release does not accept."""
    if not methods.names or not methods.validated:
        return []
    out = []
    for kind, method in KIND_METHODS.items():
        if method in methods.names:
            continue
        out.append({"kinds": [kind], "error": "ValueError", "at": "start-up",
                    "message": f"vLLM {version} has no speculative method {method!r} (accepted: "
                               f"{', '.join(methods.names)})",
                    "source": f"{methods.site.path}:{methods.site.line}-{methods.site.end_line} SpeculativeMethod "
                              f"(pydantic validation of SpeculativeConfig.method)"})
    return out


def v1_refusals(src: SourceTree) -> tuple[list[dict], str]:
    """The V1 runner's refusals of block-draft kinds (``_get_v1_model_runner_unsupported_features``), and a
    note when the function is absent or not read."""
    text = src.files.get(VLLM_CONFIG)
    if text is None:
        return [], f"{VLLM_CONFIG}: not in this source (no V1 runner refusals read)"
    try:
        tree = parse_python(text, filename=VLLM_CONFIG)
    except SyntaxError as e:
        return [], f"{VLLM_CONFIG}:{e.lineno}: cannot be parsed"
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == V1_UNSUPPORTED), None)
    if fn is None:
        return [], (f"not read: {VLLM_CONFIG} has no {V1_UNSUPPORTED}, so what this release's V1 runner does with "
                    "a draft kind its V2 runner alone serves is not read")
    out = []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Eq) and isinstance(node.test.left, ast.Attribute)
                and node.test.left.attr == "method" and isinstance(node.test.comparators[0], ast.Constant)):
            continue
        method = node.test.comparators[0].value
        kind = next((k for k, m in KIND_METHODS.items() if m == method), None)
        feature = next((c.args[0].value for st in node.body for c in ast.walk(st) if isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Attribute) and c.func.attr == "append" and c.args
                        and isinstance(c.args[0], ast.Constant)), None)
        if kind is None or feature is None:
            continue
        out.append({"kinds": [kind], "error": "ValueError", "at": "start-up",
                    "message": f"Model Runner V1 does not support: {feature}",
                    "source": f"config/vllm.py:{node.lineno}-{node.end_lineno} {V1_UNSUPPORTED}"})
    return out, ""


# ------------------------------------------------------------------------------------------ draft weights


def _method_test(test: ast.expr) -> bool | None:
    """A test over ``...method`` as it evaluates for an ``eagle3`` draft; None when it is no such test."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Attribute) \
            and test.left.attr == "method" and isinstance(test.comparators[0], ast.Constant):
        eq = test.comparators[0].value == "eagle3"
        if isinstance(test.ops[0], ast.Eq):
            return eq
        if isinstance(test.ops[0], ast.NotEq):
            return not eq
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        vals = [_method_test(v) for v in test.values]
        return False if False in vals else None
    return None


def _paths(body: list[ast.stmt], above: tuple = ()):
    """(statement, the (test, taken) pairs above it) for every statement under ``body``."""
    for st in body:
        yield st, above
        if isinstance(st, ast.If):
            yield from _paths(st.body, above + ((st.test, True),))
            yield from _paths(st.orelse, above + ((st.test, False),))
        elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
            yield from _paths(st.body, above)
            for h in getattr(st, "handlers", ()):
                yield from _paths(h.body, above)
            yield from _paths(getattr(st, "orelse", []), above)
            yield from _paths(getattr(st, "finalbody", []), above)


def _flag_tests(fn: ast.FunctionDef, name: str) -> list[str]:
    """The texts of the tests above ``name = True`` in ``fn`` (a flag a later test reads)."""
    out = []
    for st, above in _paths(fn.body):
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
            out.extend(ast.unparse(t) for t, _ in above)
            out.append(ast.unparse(st.value))
    return out


@dataclass(frozen=True)
class WeightPolicy:
    weight: str  # "embed_tokens" | "lm_head"
    policy: str | None  # one of POLICIES; None: not read
    site: Site | None
    why: str

    def to_json(self) -> dict:
        return {"policy": self.policy, "source": f"{self.site.path}:{self.site.line}: {self.why}"}


def read_weight_policy(src: SourceTree, runner: str, weight: str) -> WeightPolicy:
    """How ``runner``'s proposer treats an EAGLE-3 draft's own ``weight`` (embed_tokens / lm_head)."""
    found: list[tuple[Site, str]] = []
    for path in WEIGHTS[runner]:
        text = src.files.get(path)
        if text is None:
            continue
        try:
            tree = parse_python(text, filename=path)
        except SyntaxError:
            continue
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            # a local bound to the target's module (``draft_head = target_lm_head``) counts as the target's
            targets = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and "target" in ast.unparse(n.value)
                       for t in n.targets if isinstance(t, ast.Name)}
            for st, above in _paths(fn.body):
                if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute)
                        and st.targets[0].attr == weight and ("target" in ast.unparse(st.value) or (
                            isinstance(st.value, ast.Name) and st.value.id in targets))):
                    continue
                if any(_method_test(t) is not taken for t, taken in above if _method_test(t) is not None):
                    found.append((Site(path, st.lineno), "own"))  # not on an eagle3 draft's path
                    continue
                tests = []
                for t, _ in above:
                    tests.append(ast.unparse(t))
                    if isinstance(t, ast.Name):
                        tests.extend(_flag_tests(fn, t.id))
                tests.append(ast.unparse(fn))  # a helper's own tests (``_should_share(draft, "has_own_...")``)
                text_all = " ".join(tests)
                if f"has_own_{weight}" in text_all or "loaded_weights" in " ".join(ast.unparse(t) for t, _ in above):
                    policy = "own_if_in_checkpoint"
                elif any(".shape" in ast.unparse(t) or "_shape" in ast.unparse(t) for t, _ in above):
                    policy = "target_if_same_shape"
                else:
                    policy = "target"
                found.append((Site(path, st.lineno), policy))
    if not found:
        files = ", ".join(WEIGHTS[runner])
        return WeightPolicy(weight, None, None, f"no assignment of the target's {weight} to the draft in {files}")
    reachable = [(s, p) for s, p in found if p != "own"]
    if not reachable:
        site = found[0][0]
        return WeightPolicy(weight, "own", site, "the target's is assigned only for methods other than eagle3")
    policies = {p for _, p in reachable}
    if len(policies) > 1:
        sites = ", ".join(f"{s.file}:{s.line} {p}" for s, p in reachable)
        return WeightPolicy(weight, None, reachable[0][0], f"assignments disagree ({sites}; unrecognised)")
    site, policy = reachable[0]
    why = {"target": f"the target's {weight} replaces the draft's (pipeline parallel size 1)",
           "target_if_same_shape": f"the target's {weight} replaces the draft's whenever their shapes agree: a "
                                   "draft's own trained weights of the target's shape are discarded",
           "own_if_in_checkpoint": f"the draft's own {weight} is kept when its checkpoint has one that differs "
                                   "from the target's (vLLM PR #28549)"}[policy]
    return WeightPolicy(weight, policy, site, why)


def draft_weights(src: SourceTree, runner: str) -> tuple[dict, list[str]]:
    """The ``draft_weights`` convention key and "not read" notes."""
    out, notes = {}, []
    for weight in ("embed_tokens", "lm_head"):
        p = read_weight_policy(src, runner, weight)
        if p.policy is None:
            notes.append(f"draft_weights.{weight}: not read: {p.why}")
            continue
        out[weight] = p.to_json()
    return out, notes
