"""Claims against the weights: the declared wiring, every trainer convention applied to the config and the engine,
each judged by :meth:`~eagle_audit.fingerprint.verdict.Inference.verdict`; the findings and the fix computed against
the engine with the measured wiring as the trained side (:func:`compare`), and which measured wiring that is
(:func:`settled`)."""

from __future__ import annotations

from typing import Sequence

from ..conventions import Convention, Wiring, builtin_conventions
from ..draft.read import DraftSpec
from ..errors import AuditError, param
from ..layers.diagnose import Context, Measured, diagnose, representation_mismatch, trained_wiring_differs
from ..layers.fix import plan_fix
from ..layers.result import Finding, Fix
from ..resolution import MEASURED, Resolution, SideWiring, given_side
from ..states import State, labels
from .result import Claim
from .verdict import Inference


def compare(inf: Inference, spec: DraftSpec, info, declared: SideWiring, trainer: Convention | None,
            served: SideWiring | None, standing: tuple[bool, str] | None = None
            ) -> tuple[tuple[Claim, ...], tuple[Finding, ...], Fix | None]:
    """Claims of the config / conventions / engine against the weights; the findings (the usual checks of
    :func:`eagle_audit.layers.diagnose.diagnose` with the measured wiring as the trained side, plus
    ``TRAINED_WIRING_DIFFERS`` / ``REPRESENTATION_MISMATCH``) and the fix against the engine.

    ``standing``: where the measured wiring differs from the declared one, whether what the weights say stands
    (:mod:`eagle_audit.fingerprint.confirm`: it beats the declared wiring in simulated accept length on other
    prompts) and the sentence that says so. Standing, the sentence is added to ``TRAINED_WIRING_DIFFERS``; not
    standing, the declared wiring is the trained side (no finding from the weights, the fix is the config's), and
    the declared claim agrees with the sentence as its note. None: the weights' scores alone decide."""
    n = info.num_layers
    engine = served.states if served is not None else None
    overruled = standing is not None and not standing[0]

    def claim(source: str, states, note: str) -> Claim:
        if overruled and states is not None and tuple(states) == tuple(declared.states):
            return Claim(source, states, True, "; ".join(x for x in (note, standing[1]) if x))  # the declared wiring
        agrees, why = inf.verdict(states)  # stood in accept length, whoever claims it
        return Claim(source, states, agrees, "; ".join(x for x in (note, why) if x))

    declared_verdict = inf.verdict(declared.states)[0]
    claims = [claim("declared", declared.states, f"{declared.wiring.convention} ({declared.wiring.ids_source})")]
    for name, conv in builtin_conventions("trainer").items():
        if spec.kind not in conv.draft_kinds:  # a convention for another kind of draft claims nothing of this one
            continue
        try:
            w = conv.resolve(spec.config, info.architecture, n)
        except AuditError as e:
            claims.append(Claim(name, None, None, e.message))
            continue
        fits = len(w.states) == len(inf.slots)
        claims.append(claim(name, w.states, "") if fits else
                      Claim(name, w.states, None, f"{len(w.states)} states; fc takes {len(inf.slots)}"))
    if served is not None:
        claims.append(claim("engine", served.states, f"{served.title} feeds this"))
    evidence = (f"Best wiring {labels(inf.best)}: top-1 {inf.top1:.3f}, mean log-prob {inf.logprob:.3f}; fed no "
                f"target information: top-1 {inf.baseline_top1:.3f}, mean log-prob {inf.baseline_logprob:.3f}."
                if inf.top1 is not None else f"{inf.scored_tokens} positions could be scored.")
    hint = ""
    if inf.states:
        hint = (f"{param('trained_boundaries', ','.join(_bound(s) for s in settled(inf, declared.states, engine)))}, or "
                f"{param('trainer', MEASURED)}")
    measured = Measured(declared.wiring, tuple(corpus_all(inf) if sl.undetermined else sl.admitted
                                              for sl in inf.slots) if inf.states else None,
                        inf.reason, evidence, hint, differs=declared_verdict is False and not overruled,
                        confirmed=standing[1] if standing is not None and standing[0] else "")
    trained = declared
    if inf.states and not overruled:
        states = settled(inf, declared.states, engine)
        trained = given_side(Wiring("fingerprint", "trainer", "-", "measured", None, "boundaries", "draft weights",
                                    tuple(s.boundary for s in states), states), spec, trainer)
    if served is None:  # the engine has no rule for this target: only the weights' own findings
        ctx = Context(spec, info, Resolution(trained, trained, info.architecture, n), len(inf.slots), (), measured)
        return tuple(claims), tuple(representation_mismatch(ctx)) + tuple(trained_wiring_differs(ctx)), None
    res = Resolution(trained, served, info.architecture, n)
    _, findings = diagnose(spec, info, res, None, measured)
    fix = None
    if (inf.states or overruled) and any(f.severity == "error" and f.code != "TRAINED_WIRING_DIFFERS" for f in findings):
        fix = plan_fix(res, spec, info.hidden_size)
    return tuple(claims), findings, fix


def settled(inf: Inference, declared: Sequence[State], served: Sequence[State] | None = None) -> tuple[State, ...]:
    """The measured wiring the audit goes on with: per slot, the declared state where the weights admit it
    (an ambiguous or undetermined slot gives no reason to doubt it), else the state the engine feeds
    (``served``) where it is one of the slot's unsearched neighbours (the weights were never asked about it:
    no fix may move the engine off it), else the best state."""
    if len(declared) != len(inf.slots):
        return inf.best
    served = tuple(served) if served is not None and len(served) == len(inf.slots) else (None,) * len(inf.slots)
    return tuple(d if sl.admits(d) else e if e is not None and e in sl.unsearched else sl.best
                 for sl, d, e in zip(inf.slots, declared, served))


def corpus_all(inf: Inference) -> tuple[State, ...]:
    """Every candidate state (what an undetermined slot admits)."""
    return tuple(inf.agreement.states)


def _bound(s: State) -> str:
    return "final" if s.normed else str(s.boundary)
