"""The `layers` audit, end to end: load, resolve both wirings, capture, diagnose, fix.

One function, :func:`run_layers`, that the CLI and :func:`eagle_audit.api.audit_layers` call; it returns a
frozen :class:`LayersResult`. What it shares with `accept-rate` (inputs, loading, resolution) lives in
:mod:`eagle_audit.inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..draft.read import DraftSpec
from ..errors import AuditError, param
from ..inputs import AuditInputs, prepare
from ..provenance import provenance
from ..resolution import BLOCKS, MEASURED, Resolution
from ..runtime.load import network
from ..states import State, all_states
from .diagnose import SlotStats, diagnose, with_config_fix
from .fix import known_releases, plan_fix
from .result import Heatmap, LayersResult


@dataclass(frozen=True)
class LayersOptions(AuditInputs):
    device_map: str | None = None
    static: bool = False
    scan: bool = True


def measure(target, prompts_ids: list[list[int]], trained: tuple[State, ...], served: tuple[State, ...],
            reachable: tuple[int, int], scan: bool, progress: Callable | None = None
            ) -> tuple[dict[int, SlotStats], Heatmap | None, int]:
    """Token-mean cosine of each trained state against its served state (and, with ``scan``, every state)."""
    import torch

    from ..source import as_source

    source = as_source(target)
    n = target.info.num_layers
    columns = all_states(n) if scan else tuple(sorted(set(trained) | set(served)))
    if scan:  # a hyper-connection view (B3.s0) trained or served is a column too; the scan itself walks the means
        columns += tuple(dict.fromkeys(s for s in trained + served if s not in columns))
    if scan:  # a source that gives fewer states (a server) scans what it gives; the needed ones are asked anyway
        columns = tuple(s for s in columns if s in source.spec.states or s in trained or s in served)
    sums = None  # [trained, columns] float64, on the device of the captures (one copy back at the end)
    tokens = 0
    with torch.inference_mode():
        for i, ids in enumerate(prompts_ids):
            caps = source.teacher_forced([ids], columns)[0].states  # {state: [pos, hidden]}
            dev = caps[trained[0]].device if trained else torch.device("cpu")
            cols = torch.stack([caps[c].to(dev, torch.float32) for c in columns])  # [columns, pos, hidden]
            cols = torch.nn.functional.normalize(cols, dim=-1, eps=1e-8)
            refs = cols[[columns.index(t) for t in trained]]  # [trained, pos, hidden]: trained states are columns
            part = torch.einsum("rph,cph->rc", refs, cols).double()  # [trained, columns]: summed over positions
            sums = part if sums is None else sums + part
            tokens += len(ids)
            if progress:
                progress(i + 1, len(prompts_ids))
    sums = sums.cpu() if sums is not None else torch.zeros(len(trained), len(columns), dtype=torch.float64)
    means = sums / max(tokens, 1)
    index = {s: c for c, s in enumerate(columns)}
    stats = {}
    lo, hi = reachable
    servable = [c for c, s in enumerate(columns) if not s.normed and lo <= s.boundary <= hi]
    for r, t in enumerate(trained):
        s = served[r] if r < len(served) else None
        cos = float(means[r, index[s]]) if s is not None else None
        best = max(servable, key=lambda c: means[r, c]) if servable else None
        stats[r] = SlotStats(cos, columns[best] if best is not None else None,
                             float(means[r, best]) if best is not None else None)
    heat = Heatmap(columns, tuple(tuple(round(float(v), 5) for v in row) for row in means)) if scan else None
    return stats, heat, tokens


SEMANTIC_STEPS = 3


def semantics_differ(res: Resolution, draft: DraftSpec, target_hidden: int) -> bool:
    """Whether the two sides run this draft differently (a norm block, or fc skipped on one side only)."""
    t, s = res.trained.flags, res.served.flags
    fc = (t.fc_skip_at_hidden_width != s.fc_skip_at_hidden_width and draft.use_aux_hidden_state
          and draft.fc_in == draft.hidden_size)
    return fc or any(getattr(t, b.attr) != getattr(s, b.attr) for b in BLOCKS)


def measure_semantics(target, draft: DraftSpec, res: Resolution, prompts_ids: list[list[int]]) -> tuple[float, ...]:
    """Per draft step, the share of positions where the draft run the engine's way predicts the same token as
    run the trainer's way: both fed the trained states of the audit prompts, three teacher-forced steps."""
    import torch

    with torch.inference_mode():
        return _measure_semantics(target, draft, res, prompts_ids)


def _measure_semantics(target, draft: DraftSpec, res: Resolution, prompts_ids: list[list[int]]) -> tuple[float, ...]:
    import torch

    from ..runtime.rollout import rollout
    from ..runtime.load import load_draft
    from ..source import as_source

    source = as_source(target)
    models = [load_draft(draft, target, side.flags) for side in (res.trained, res.served)]
    agree, total = [0] * SEMANTIC_STEPS, [0] * SEMANTIC_STEPS
    for ids in prompts_ids:
        if len(ids) < 2:
            continue
        caps = source.teacher_forced([ids], res.trained.states)[0].states  # {state: [pos, hidden]}
        dev = models[0].device
        aux = torch.cat([caps[st] for st in res.trained.states], dim=-1)[None, :-1].to(dev)  # [1, T, n*H_t]
        nxt = torch.tensor([ids[1:]], device=dev)  # [1, T]: x[t+1]
        teacher = torch.cat([nxt, torch.zeros(1, SEMANTIC_STEPS - 1, dtype=nxt.dtype, device=dev)], dim=1)
        a, b = (rollout(m, nxt, aux, SEMANTIC_STEPS, teacher=teacher) for m in models)
        for k in range(SEMANTIC_STEPS):
            agree[k] += int((a.tokens[k] == b.tokens[k]).sum())
            total[k] += a.tokens[k].numel()
    return tuple(round(x / max(n, 1), 4) for x, n in zip(agree, total))


def run_layers(opts: LayersOptions, status: Callable[[str], None] | None = None,
               progress: Callable[[int, int], None] | None = None, source=None) -> LayersResult:
    """``source``: an open state source to take the target's states from (else one is opened)."""
    prompts = None
    if not opts.static:  # a bad prompts file fails before the target is loaded
        from ..prompts import load_prompts

        prompts = load_prompts(opts.prompts, opts.max_prompts)
    p = prepare(opts, load_weights=not opts.static, device_map=opts.device_map, status=status, source=source)
    draft, engine, target, info, res, trainer, notes = p.draft, p.engine, p.target, p.info, p.resolution, p.trainer, p.notes
    stats, heat, tokens, n_prompts, agreement = None, None, 0, 0, None
    if target is not None:
        from ..prompts import encode

        ids = encode(prompts, target.tokenizer, opts.max_tokens)
        n_prompts = len(ids)
        if status:
            status(f"capturing {info.num_layers + 2 if opts.scan else 'needed'} states over {n_prompts} prompts")
        stats, heat, tokens = measure(target, ids, res.trained.states, res.served.states,
                                      res.served.reach or (0, info.num_layers), opts.scan,
                                      progress)
        if (res.served.wiring.unsupported is None and semantics_differ(res, draft, info.hidden_size)
                and len(res.trained.states) == draft.aux_count(info.hidden_size)
                and network(draft.draft_kind).flags_apply):  # else the flags change nothing the family runs
            try:
                agreement = measure_semantics(target, draft, res, ids)
            except AuditError as e:
                notes.append(f"the cost of the draft-semantics difference was not measured: {e.message}")
    slots, findings = diagnose(draft, info, res, stats, agreement=agreement)
    served_json = None
    if opts.states_server is not None and target is not None:
        if target.spec.backend == "server":
            notes.append(f"every state came from the server: {target.spec.origin}; the draft ran here")
            served_json = {"mode": "states from the server", "source": target.spec.to_json()}
        else:
            from ..served.run import served_check

            check = served_check(opts.states_server, target, ids, res.served.states, res.served.title, status,
                                 progress, draft.config, res.served.convention)
            findings = findings + check.findings
            served_json = {"mode": "served vs local", **check.to_json()}
            notes.append(f"served states: {check.capture.slots} slots ({', '.join(s.label() for s in check.capture.states)}) "
                         f"from {opts.states_server.url} over {check.tokens} tokens, compared with the local capture "
                         f"({target.spec.origin})")
            notes.extend(check.notes)
    hint = _suggestion(opts.trainer is not None or bool(opts.trained_boundaries), res, p.aux,
                      [s.cosine for s in slots if s.verdict != "ok"])
    if hint:
        notes.append(f"suggestion: {hint}")
    errors = [f for f in findings if f.severity == "error"]
    fix = plan_fix(res, draft, info.hidden_size, info, known_releases(res.served)) if errors else None
    findings = with_config_fix(findings, fix)
    prov = provenance(command=opts.command, engine=engine, trainer=trainer, target=target, prompts=opts.prompts,
                      num_prompts=n_prompts, tokens=tokens, notes=notes, static=opts.static)
    others = _across(engine, p, opts, heat)
    worst = "mismatch" if errors or any(o.verdict != "match" for o in others) else "match"
    return LayersResult(worst, info.to_json(), draft.to_json(), res.trained.wiring,
                        res.served.wiring, slots, findings, fix, heat, prov, (hint,) if hint else (), served_json,
                        others)


def _across(engine, p, opts: LayersOptions, heat) -> tuple:
    """The verdict on every other engine where none was named, and on every other release of a range given
    (:mod:`.across`)."""
    from ..conventions.releases import ASSUMED
    from .across import other_engines, range_releases, verdict_on

    if engine.release_how == ASSUMED:
        convs = other_engines(engine)
    elif engine.release_span:
        convs = range_releases(engine, engine.release_span)
    else:
        return ()
    return tuple(verdict_on(c, p.draft, p.info, p.resolution, opts.trainer, opts.trained_boundaries, opts.trained_ids,
                            heat) for c in convs)


def _suggestion(trainer_given: bool, resolution: Resolution, aux: int, cosines: Sequence[float | None]) -> str | None:
    """When ``layers`` should point at the fingerprint (``--trainer fingerprint``, :data:`MEASURED`): the trained side is a convention assumed from the
    layout, or it does not fit fc, or a slot's trained and served states are far apart (cosine < 0.9) while
    the trained side rests only on a convention."""
    trained = resolution.trained
    if trained.wiring.ids_source == "boundaries":  # given directly, recorded by a canary, or measured
        return None
    why = None
    if len(trained.states) != aux:
        why = f"the trained wiring {trained.wiring.convention} assumes has {len(trained.states)} states, fc takes {aux}"
    elif not trainer_given:
        why = "the trainer was not given, so the trained wiring is assumed from the draft's layout"
    elif any(c is not None and c < 0.9 for c in cosines):
        why = "a slot's trained and served states are far apart, and the trained side rests on a convention alone"
    return f"{why}; measure it on the draft's weights: {param('trainer', MEASURED)} (or eagle-audit fingerprint)" if why else None
