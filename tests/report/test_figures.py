"""Figure geometry (eagle_audit.report.figures): readable at 60 layers, colours on a monotone scale."""

from __future__ import annotations

from eagle_audit.report import figures


def _slots(n):
    return [{"index": i, "trained": f"B{i * 12}", "served": f"B{i * 12 + 1}", "verdict": "offset +1", "css": "warn"}
            for i in range(n)]


def test_heatmap_60_layers_5_slots_fits_and_labels_every_fifth():
    states = [f"B{k}" for k in range(61)] + ["B60+norm"]
    rows = [[1.0 - abs(k - 12 * r) / 62 for k in range(62)] for r in range(5)]
    h = figures.heatmap(states, rows, _slots(5))
    assert len(h.cells) == 5 * 62
    assert len(h.trained) == 5 and len(h.served) == 5
    assert h.width <= 1176  # the page's content width: no sideways scrolling
    labels = [lab.text for lab in h.col_labels]
    assert labels == [f"B{k}" for k in range(0, 61, 5)] + ["B60+norm"]
    assert all(lab.rotate == -90 for lab in h.col_labels)  # narrow columns: upright labels
    cell_w = h.cells[1].x - h.cells[0].x
    assert cell_w >= 12


def test_heatmap_small_target_labels_every_column():
    states = [f"B{k}" for k in range(31)] + ["B30+norm"]
    h = figures.heatmap(states, [[0.5] * 32], _slots(1))
    assert [lab.text for lab in h.col_labels] == states


def test_served_equal_to_trained_is_not_marked_twice():
    h = figures.heatmap(["B0", "B1"], [[1.0, 0.2]], [{"index": 0, "trained": "B1", "served": "B1", "verdict": "ok",
                                                      "css": "ok"}])
    assert len(h.trained) == 1 and h.served == ()


def test_cosine_colour_is_monotone_and_clamped():
    def lum(c):
        return sum(int(c[i:i + 2], 16) for i in (1, 3, 5))

    shades = [lum(figures.cosine_colour(v / 10, 0.0)) for v in range(11)]
    assert shades == sorted(shades, reverse=True)  # darker as cosine grows
    assert figures.cosine_colour(-0.5, 0.0) == figures.cosine_colour(0.0, 0.0)
    assert figures.cosine_colour(float("nan"), 0.0) == figures.cosine_colour(0.0, 0.0)


def test_scale_low_keeps_contrast_for_alike_states():
    assert figures.scale_low([[0.95, 1.0], [0.97, 0.99]]) == 0.9
    assert figures.scale_low([[-0.01, 1.0]]) == 0.0


def test_nice_ticks():
    assert figures.nice_ticks(3.42) == [0, 1, 2, 3, 4]
    assert figures.nice_ticks(1.0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_bars_scale_to_the_largest_value():
    b = figures.hbars([("trained", 3.0, "#000000", ""), ("served", 1.5, "#000000", "")], "x")
    assert abs(b.bars[1].w * 2 - b.bars[0].w) < 1e-6


def test_wiring_colours_stable():
    assert figures.wiring_colour("trained") == figures.WIRING_COLOURS["trained"]
    assert figures.wiring_colour("a", ["a", "b"]) != figures.wiring_colour("b", ["a", "b"])
