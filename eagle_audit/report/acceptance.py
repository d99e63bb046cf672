"""The acceptance part of a report's view, from an accept-rate result (``eagle-audit/accept-rate/1``).

Every key is optional and read tolerantly: ``verdict``, ``accept_length`` (wiring -> mean accept length),
``failures`` (wiring -> why it cannot run), ``per_position`` (wiring -> acceptance rate at each draft
position), ``attribution`` (``[{slot, trained, served, accept_length}]``: the served wiring with one slot
corrected), ``live`` (``{accept_length, tokens_per_s, speedup, lossless}``), ``server``
(``{accept_length, kind, url, source}``), ``arbiter`` (``{status, decides, chosen}``: when the live server decides
the verdict, the summary says so) and ``settings.num_steps`` (the longest possible accept length
is num_steps + 1). A missing or non-numeric value leaves its row or figure out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import figures


@dataclass(frozen=True)
class AcceptView:
    verdict: str | None  # the accept-rate result's own verdict, when it has one
    lengths: list[tuple[str, float]]  # (wiring, mean accept length)
    lengths_figure: figures.Bars | None  # the wirings, then live decoding and the server when measured
    failures: list[tuple[str, str]]  # (wiring, why it cannot run at all)
    positions: list[tuple[str, list[float]]]  # (wiring, acceptance rate at each draft position)
    positions_figure: figures.Columns | None
    max_positions: int
    attribution: list[tuple[str, float]]  # ("slot k (served -> trained)", accept length)
    attribution_figure: figures.Bars | None
    live: tuple[float, str] | None  # (accept length, what else was measured)
    server: tuple[float, str] | None  # (accept length, which server)
    summary: str
    empty: bool


def as_dict(x: Any) -> dict:
    return dict(x) if isinstance(x, Mapping) else {}


def as_list(x: Any) -> list:
    """``x`` if it is a JSON array, else empty: a result's value of the wrong type is left out, not a crash."""
    return list(x) if isinstance(x, list) else []


def label(state: Any) -> str:
    """A state's label from its JSON form (``{"label": "B3", ...}``) or a plain label string."""
    if isinstance(state, Mapping):
        return str(state.get("label") or f"B{state.get('boundary')}" + ("+norm" if state.get("normed") else ""))
    return "-" if state is None else str(state)


def number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else None


def accept_view(acc: Mapping) -> AcceptView:
    """Every key is optional: a missing or non-numeric value leaves its row or figure out."""
    raw_lengths = as_dict(acc.get("accept_length"))
    lengths = [(str(k), float(v)) for k, v in raw_lengths.items() if number(v) is not None]
    failures = [(str(k), str(v)) for k, v in as_dict(acc.get("failures")).items() if v]
    order = list(raw_lengths) + list(as_dict(acc.get("per_position")))
    items = [(k, v, figures.wiring_colour(k, order), f"{k}: mean accept length {v:.3f}") for k, v in lengths]
    live = None
    live_raw = as_dict(acc.get("live"))
    if number(live_raw.get("accept_length")) is not None:
        extra = []
        if number(live_raw.get("tokens_per_s")) is not None:
            extra.append(f"{live_raw['tokens_per_s']:.1f} tok/s")
        if number(live_raw.get("speedup")) is not None:
            extra.append(f"{live_raw['speedup']:.2f}× the target alone")
        if isinstance(live_raw.get("lossless"), bool):
            extra.append("output identical to the target's" if live_raw["lossless"]
                         else "output DIFFERS from the target's")
        live = (float(live_raw["accept_length"]), ", ".join(extra))
        items.append(("live decoding (served)", live[0], figures.WIRING_COLOURS["live"],
                      f"live speculative decoding with the served wiring: {live[0]:.3f}"))
    server_raw = as_dict(acc.get("server"))
    server = None
    if number(server_raw.get("accept_length")) is not None:
        who = " ".join(str(x) for x in (server_raw.get("kind"), server_raw.get("url")) if x) or str(
            server_raw.get("source") or "server")
        n = number(server_raw.get("requests"))
        scope = f" over the {n:g} audited requests" if n is not None else ""
        lifetime = [number(v) for v in server_raw.get("lifetime_accept_length") or [] if number(v) is not None] \
            if isinstance(server_raw.get("lifetime_accept_length"), list) else []
        context = ("; the server's lifetime figure (all its traffic since start, not this audit): "
                   + ", ".join(f"{v:.2f}" for v in lifetime)) if lifetime else ""
        server = (float(server_raw["accept_length"]), who + scope + context)
        short = f"server ({server_raw['kind']})" if server_raw.get("kind") else (
            f"server ({who})" if len(who) <= 22 else "server")
        items.append((short, server[0], figures.WIRING_COLOURS["server"],
                      f"measured by the server {who}{scope}: {server[0]:.3f}"
                      + (f" ({server_raw['source']})" if server_raw.get("source") else "")))
    positions = []
    for k, rates in as_dict(acc.get("per_position")).items():
        if isinstance(rates, list) and rates:
            positions.append((str(k), [float(r) if number(r) is not None else float("nan") for r in rates]))
    attribution = []
    for a in as_list(acc.get("attribution")):
        if isinstance(a, Mapping) and number(a.get("accept_length")) is not None:
            name = f"slot {a.get('slot', '?')}"
            if a.get("served") and a.get("trained"):
                name += f" ({label(a['served'])} → {label(a['trained'])})"
            attribution.append((name, float(a["accept_length"])))
    by_name = dict(lengths)
    summary = ""
    if "trained" in by_name and "served" in by_name:
        t, sv = by_name["trained"], by_name["served"]
        summary = f"mean accept length: trained {t:.2f}, served {sv:.2f}"
        if t > 0:
            summary += f" ({(sv - t) / t:+.0%})"
    elif lengths:
        summary = "mean accept length: " + ", ".join(f"{k} {v:.2f}" for k, v in lengths)
    for k, _ in failures:
        summary += ("; " if summary else "") + f"{k} wiring fails"
    arb = as_dict(acc.get("arbiter"))
    if arb.get("decides") is True and isinstance(arb.get("status"), str):  # the verdict follows the live server
        chosen = f": {arb['chosen']}" if isinstance(arb.get("chosen"), str) else ""
        summary += ("; " if summary else "") + f"verdict from the live server ({arb['status']}{chosen})"
    verdict = acc.get("verdict") if acc.get("verdict") in ("match", "mismatch") else None
    steps = number(as_dict(acc.get("settings")).get("num_steps"))
    limit = steps + 1 if steps else None  # every draft token accepted, plus the target's own
    axis = "mean accept length (tokens per verify step" + (
        f"; at most {limit:g} with {steps:g} draft steps)" if limit else ")")
    return AcceptView(
        verdict=verdict, lengths=lengths,
        lengths_figure=figures.hbars(items, axis, limit=limit) if items else None,
        failures=failures, positions=positions, max_positions=max((len(r) for _, r in positions), default=0),
        positions_figure=figures.columns([(k, r, figures.wiring_colour(k, order)) for k, r in positions],
                                         "draft position") if positions else None,
        attribution=attribution,
        attribution_figure=figures.hbars([(n, v, "#546e7a", f"{n}: {v:.3f}") for n, v in attribution],
                                         "mean accept length", limit=limit) if attribution else None,
        live=live, server=server, summary=summary,
        empty=not (lengths or server or live or positions or attribution or failures))
