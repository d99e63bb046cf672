"""Per-architecture capture rules: find each registered class's EAGLE-3 setter and read it.

For every ``EntryClass`` member: the setter it defines or inherits (through the MRO); the rule its
body states (:mod:`.setter`); delegation to the class held by ``self.language_model`` / ``self.model``
(:mod:`.held`), followed recursively; and the reachable capture indices of the inner model
(:mod:`.reach`).
"""

from __future__ import annotations

from dataclasses import replace

from .held import HeldResolver
from .modules import ClassInfo, ModuleIndex
from .reach import ReachError, ReachReader
from .results import (DELEGATING_UNRESOLVED, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ArchResult, ProbedRule,
                      Site)
from .setter import SETTER, SetterReader, Unrecognised


class ArchitectureReader:
    def __init__(self, index: ModuleIndex):
        self.index = index
        self.held = HeldResolver(index)
        self.reach = ReachReader(index, self.held)

    def read_all(self) -> list[ArchResult]:
        out: list[ArchResult] = []
        seen: set[str] = set()
        for _module, _expr, cls in self.index.entry_classes():
            if cls is None:
                continue  # an EntryClass member defined outside the parsed files
            if cls.name in seen:
                continue
            seen.add(cls.name)
            out.append(self.read(cls))
        return out

    def read(self, cls: ClassInfo) -> ArchResult:
        result = self._read(cls, (), cls)
        return replace(result, arch=cls.name, cls_site=cls.site())

    def _hasattr(self, concrete: ClassInfo):
        def check(attr: str, name: str) -> bool | None:
            classes, err = self.reach.inner_classes(concrete, attr)
            if err or not classes:
                return None
            answers = {self.index.find_method(c, name) is not None for c in classes}
            return answers.pop() if len(answers) == 1 else None
        return check

    def _read(self, cls: ClassInfo, via: tuple[Site, ...], arch: ClassInfo) -> ArchResult:
        base = ArchResult(arch=arch.name, cls_site=arch.site(), status=UNSUPPORTED, via=via)
        found = self.index.find_method(cls, SETTER)
        if found is None:
            if via:
                return replace(base, reason=f"delegates to {cls.name} ({cls.site().short()}), which has no {SETTER}")
            return replace(base, reason=f"{cls.site().file} has no {SETTER}")
        owner, fn = found
        setter_site = Site(owner.path, fn.lineno, fn.end_lineno)
        try:
            analysis = SetterReader(owner.path, fn, self._hasattr(cls)).read()
        except Unrecognised as e:
            site = Site(owner.path, e.line or fn.lineno)
            return replace(base, status=UNRECOGNISED, setter=setter_site, reason=f"{e.message} at {site}")
        if analysis.delegate is not None:
            here = via + (analysis.delegate_site,)
            if len(here) > 5:
                return replace(base, status=UNRECOGNISED, reason=f"delegation too deep at {analysis.delegate_site}")
            if analysis.delegate == "super()":
                return replace(base, status=UNRECOGNISED, setter=setter_site,
                               reason=f"super().{SETTER}(ids) is not followed ({analysis.delegate_site})")
            held, err = self.reach.inner_classes(cls, analysis.delegate)
            if err:
                return replace(base, status=DELEGATING_UNRESOLVED, setter=setter_site,
                               reason=f"hands the ids to self.{analysis.delegate} at {analysis.delegate_site}: "
                                      f"{err.message}")
            results = [self._read(h, here, arch) for h in held]
            keys = {(r.status, r.rule.key() if r.rule else r.reason) for r in results}
            if len(keys) > 1:
                names = ", ".join(h.name for h in held)
                return replace(base, status=UNRECOGNISED, setter=setter_site,
                               reason=f"self.{analysis.delegate} may hold {names}, which capture differently "
                                      f"({analysis.delegate_site})")
            return results[0]
        reach = self.reach.reach(cls, analysis.sink.attr, analysis.sink.via_setter)
        if isinstance(reach, ReachError) and reach.never_read:
            return replace(base, setter=setter_site,
                           reason=f"has {SETTER} ({setter_site.short()}) but {reach.message}")
        if isinstance(reach, ReachError):
            status = DELEGATING_UNRESOLVED if reach.unresolved and analysis.sink.via_setter else UNRECOGNISED
            return replace(base, status=status, setter=setter_site, reason=f"reachable indices: {reach.message}")
        unguarded = next((f.site for f in analysis.flag_loops if not f.guarded), None)
        if unguarded and reach.unguarded is None:
            reach = replace(reach, unguarded=unguarded)
        rule = ProbedRule(default_ids=analysis.default_ids, default_shift=analysis.default_shift,
                          explicit=analysis.explicit, reach=reach, n_from=analysis.n_from)
        return replace(base, status=SUPPORTED, rule=rule, setter=setter_site)
