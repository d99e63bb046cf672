"""Figure geometry, computed from result data: the templates draw it as inline SVG.

Everything here is numbers and short strings (coordinates in CSS pixels, colours as hex); no markup is
built in Python. ``templates/figures.html.j2`` holds the macros that turn these objects into SVG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

#: sequential scale for cosine similarity, light (low) to dark (high): ColorBrewer "Blues"
_BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")

#: a fixed colour per wiring name, so the same wiring has the same colour in every figure
WIRING_COLOURS = {"trained": "#2e7d32", "served": "#c62828", "fixed": "#1565c0", "live": "#ad1457", "server": "#6a1b9a"}
_MORE_COLOURS = ("#ef6c00", "#00838f", "#6d4c41", "#9e9d24", "#546e7a", "#283593")


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str = "none"
    title: str = ""


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"  # SVG text-anchor
    rotate: float = 0.0  # degrees, about (x, y)
    css: str = ""  # class: "muted", "ok", "warn", "bad", "strong"


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    css: str = "grid"


@dataclass(frozen=True)
class Stop:
    offset: float  # 0..1
    colour: str


@dataclass(frozen=True)
class Heatmap:
    """Slots x target states. Rows: each slot's trained state; columns: every captured state."""

    width: float
    height: float
    cells: tuple[Rect, ...]
    trained: tuple[Rect, ...]  # the cell of the state each slot was trained on
    served: tuple[Rect, ...]  # the cell the engine feeds instead (only where it differs)
    row_labels: tuple[Label, ...]
    row_notes: tuple[Label, ...]  # what each slot is served, coloured by its verdict
    col_labels: tuple[Label, ...]
    col_ticks: tuple[Line, ...]
    axis_title: Label
    legend: Rect  # where the colour gradient is drawn
    legend_stops: tuple[Stop, ...]
    legend_labels: tuple[Label, ...]
    key_trained: Rect  # swatches of the two marks, beside the gradient
    key_served: Rect
    key_labels: tuple[Label, ...]
    low: float  # the cosine at the light end of the scale


@dataclass(frozen=True)
class Bars:
    """Horizontal bars, one a row, on a shared value axis."""

    width: float
    height: float
    bars: tuple[Rect, ...]
    labels: tuple[Label, ...]  # row names, left of the axis
    values: tuple[Label, ...]  # the number at the end of each bar
    grid: tuple[Line, ...]
    ticks: tuple[Label, ...]
    axis_title: Label


@dataclass(frozen=True)
class Swatch:
    rect: Rect
    label: Label


@dataclass(frozen=True)
class Columns:
    """Grouped vertical bars: one group per draft position, one bar per wiring, rate 0..1."""

    width: float
    height: float
    bars: tuple[Rect, ...]
    grid: tuple[Line, ...]
    ticks: tuple[Label, ...]
    positions: tuple[Label, ...]
    axis_title: Label
    key: tuple[Swatch, ...]


def cosine_colour(value: float, low: float) -> str:
    """Colour of a cosine on the scale ``[low, 1]`` (values outside are clamped)."""
    t = 0.0 if value != value else min(1.0, max(0.0, (value - low) / (1.0 - low)))  # NaN -> light
    pos = t * (len(_BLUES) - 1)
    i = min(int(pos), len(_BLUES) - 2)
    return _mix(_BLUES[i], _BLUES[i + 1], pos - i)


def _mix(a: str, b: str, t: float) -> str:
    ca = [int(a[k:k + 2], 16) for k in (1, 3, 5)]
    cb = [int(b[k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ca, cb))


def wiring_colour(name: str, order: Sequence[str] = ()) -> str:
    if name in WIRING_COLOURS:
        return WIRING_COLOURS[name]
    others = [n for n in order if n not in WIRING_COLOURS]
    i = others.index(name) if name in others else len(others)
    return _MORE_COLOURS[i % len(_MORE_COLOURS)]


def scale_low(rows: Sequence[Sequence[float]]) -> float:
    """The light end of the cosine scale: 0, or higher (in steps of 0.1) when every value is above it,
    so that a deep target whose neighbouring states are all alike still shows contrast."""
    values = [v for row in rows for v in row if v == v]
    if not values:
        return 0.0
    low = math.floor(max(0.0, min(values)) * 10) / 10
    return min(low, 0.9)


# ----------------------------------------------------------------------------- heatmap

_ROW_H = 30
_LEFT = 118  # row labels
_RIGHT = 210  # row notes
_TOP = 10


def heatmap(states: Sequence[str], rows: Sequence[Sequence[float]], row_slots: Sequence[dict],
            value: str = "cosine", keys: tuple[str, str] = ("trained state", "served instead"),
            verbs: tuple[str, str] = ("trained on", "served")) -> Heatmap:
    """``row_slots[r]``: ``{"index", "trained", "served", "verdict", "css"}`` for heatmap row ``r``
    (labels as in ``states``; ``served`` may be None). Optional per row: ``"outlined"`` (the states whose
    cells get the first mark; default ``[trained]``) and ``"note"`` (the text right of the row). ``value``
    names the number in each cell; ``keys`` the two marks in the legend, ``verbs`` in their tooltips."""
    n = len(states)
    cw = max(12, min(28, 820 // max(n, 1)))
    grid_w, grid_h = n * cw, len(rows) * _ROW_H
    low = scale_low(rows)
    col = {s: i for i, s in enumerate(states)}
    cells, trained, served, row_labels, row_notes = [], [], [], [], []
    for r, (values, slot) in enumerate(zip(rows, row_slots)):
        y = _TOP + r * _ROW_H
        for c, v in enumerate(values[:n]):
            cells.append(Rect(_LEFT + c * cw, y, cw, _ROW_H, cosine_colour(v, low),
                              f"slot {slot['index']} ({slot['trained']}) vs {states[c]}: {value} {v:.3f}"))
        for mark in slot.get("outlined") or [slot["trained"]]:
            if mark in col:
                trained.append(Rect(_LEFT + col[mark] * cw, y, cw, _ROW_H,
                                    title=f"slot {slot['index']}: {verbs[0]} {mark}"))
        if slot["served"] in col and slot["served"] != slot["trained"]:
            served.append(Rect(_LEFT + col[slot["served"]] * cw, y, cw, _ROW_H,
                               title=f"slot {slot['index']}: {verbs[1]} {slot['served']}"))
        mid = y + _ROW_H / 2 + 4
        row_labels.append(Label(_LEFT - 8, mid, f"slot {slot['index']} · {slot['trained']}", "end", css="strong"))
        note = f"served {slot['served']}" if slot["served"] else "not served"
        if slot["verdict"] != "ok":
            note += f" · {slot['verdict']}"
        note = slot.get("note", note)
        row_notes.append(Label(_LEFT + grid_w + 10, mid, note, css=slot["css"]))
    step = 1 if n <= 36 else 5
    angle = -50 if cw >= 18 else -90  # narrow columns: upright labels do not collide
    col_labels, col_ticks = [], []
    base = _TOP + grid_h
    for c, s in enumerate(states):
        x = _LEFT + c * cw + cw / 2
        last = c == n - 1
        if c % step == 0 or last:
            col_ticks.append(Line(x, base, x, base + 5, "axis"))
            col_labels.append(Label(x + (3 if angle == -50 else 4), base + 10, s, "end", angle, "muted"))
        elif step > 1:
            col_ticks.append(Line(x, base, x, base + 2.5, "axis"))
    label_h = 62
    axis_title = Label(_LEFT + grid_w / 2, base + label_h + 6,
                       "target state (B0 = embedding output, Bk = output of layer k-1, +norm = after the final norm)",
                       "middle", css="muted")
    ly = base + label_h + 24
    legend = Rect(_LEFT, ly, 180, 12)
    stops = tuple(Stop(i / 8, cosine_colour(low + (1 - low) * i / 8, low)) for i in range(9))
    legend_labels = (Label(_LEFT, ly + 26, f"{low:.2f}" if low > 0 else "≤ 0", "middle", css="muted"),
                     Label(_LEFT + 90, ly + 26, f"{(low + 1) / 2:.2f}", "middle", css="muted"),
                     Label(_LEFT + 180, ly + 26, "1.00", "middle", css="muted"),
                     Label(_LEFT - 8, ly + 10, value, "end", css="muted"))
    kx = _LEFT + 230
    key_trained = Rect(kx, ly - 2, 16, 16)
    key_served = Rect(kx + 150, ly - 2, 16, 16)
    key_labels = (Label(kx + 24, ly + 11, keys[0]), Label(kx + 174, ly + 11, keys[1]))
    width = max(_LEFT + grid_w + _RIGHT, kx + 300)
    return Heatmap(width, ly + 36, tuple(cells), tuple(trained), tuple(served), tuple(row_labels), tuple(row_notes),
                   tuple(col_labels), tuple(col_ticks), axis_title, legend, stops, legend_labels, key_trained,
                   key_served, key_labels, low)


# ----------------------------------------------------------------------------- bars

def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def hbars(items: Sequence[tuple[str, float, str, str]], axis: str, fmt: str = "{:.2f}",
          limit: float | None = None) -> Bars:
    """``items``: (row label, value, colour, tooltip); ``limit``: the largest possible value, if known
    (the axis reaches it, so that a full-length bar means the best possible)."""
    left, plot_w, row_h, top = 190, 480, 28, 8
    largest = max([v for _, v, _, _ in items] + [0.0])
    ticks = nice_ticks(max(largest, limit or 0.0) or 1.0) if limit else nice_ticks(largest * 1.1 or 1.0)
    scale = plot_w / ticks[-1]
    bars, labels, values = [], [], []
    for i, (name, value, colour, title) in enumerate(items):
        y = top + i * row_h
        w = max(0.0, value) * scale
        bars.append(Rect(left, y + 5, w, row_h - 10, colour, title))
        labels.append(Label(left - 8, y + row_h / 2 + 4, name, "end"))
        values.append(Label(left + w + 6, y + row_h / 2 + 4, fmt.format(value), css="strong"))
    base = top + len(items) * row_h
    grid = tuple(Line(left + t * scale, top, left + t * scale, base, "grid" if t else "axis") for t in ticks)
    tick_labels = tuple(Label(left + t * scale, base + 14, f"{t:g}", "middle", css="muted") for t in ticks)
    return Bars(left + plot_w + 70, base + 40, tuple(bars), tuple(labels), tuple(values), grid, tick_labels,
                Label(left + plot_w / 2, base + 32, axis, "middle", css="muted"))


def columns(series: Sequence[tuple[str, Sequence[float], str]], axis: str) -> Columns:
    """``series``: (wiring, rate at each draft position, colour); rates in 0..1."""
    k = max((len(r) for _, r, _ in series), default=0)
    left, top, plot_h = 56, 10, 180
    bw = max(6, min(22, 300 // max(len(series), 1) // max(k, 1) * 2))
    gap = max(10, bw)
    group = len(series) * bw
    plot_w = k * (group + gap) + gap
    bars = []
    for p in range(k):
        x0 = left + gap + p * (group + gap)
        for s, (name, rates, colour) in enumerate(series):
            if p < len(rates) and rates[p] == rates[p]:
                v = min(1.0, max(0.0, float(rates[p])))
                h = max(plot_h * v, 1.5)  # a zero still shows as a sliver: measured, not missing
                bars.append(Rect(x0 + s * bw, top + plot_h - h, bw - 1, h, colour,
                                 f"{name}, position {p + 1}: {float(rates[p]):.3f}"))
    base = top + plot_h
    grid = tuple(Line(left, top + plot_h * (1 - t), left + plot_w, top + plot_h * (1 - t), "grid" if t else "axis")
                 for t in (0, 0.25, 0.5, 0.75, 1.0))
    ticks = tuple(Label(left - 6, top + plot_h * (1 - t) + 4, f"{t:g}", "end", css="muted")
                  for t in (0, 0.25, 0.5, 0.75, 1.0))
    positions = tuple(Label(left + gap + p * (group + gap) + group / 2, base + 16, str(p + 1), "middle", css="muted")
                      for p in range(k))
    key = []
    kx, ky = left, base + 50
    for name, _, colour in series:
        key.append(Swatch(Rect(kx, ky - 10, 12, 12, colour), Label(kx + 18, ky, name)))
        kx += 30 + 8 * len(name)
    width = max(left + plot_w + 20, kx + 20)
    return Columns(width, ky + 12, tuple(bars), grid, ticks, positions,
                   Label(left + plot_w / 2, base + 32, axis, "middle", css="muted"), tuple(key))
