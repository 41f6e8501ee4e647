"""The strip plot of a text's extraction: log10 p_z of every window along the text, the windows with p_z = 0 on a
floor of their own, the greedy ones marked, lines at p_z = 0.5 (extractable) and 10⁻².

Points are coloured on the text view's scale (`render.pz_rgb`); the hover shows the window's place and the start
of its suffix, escaped (plotly decodes entities in labels) with its control and bidi characters as escapes.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .render import FLOOR_LOG10, css, format_pz, pz_rgb, visible
from .result import EXTRACTABLE, ExtractionResult

#: The legend name of the windows drawn on the floor.
ZERO_NAME = "p_z = 0 (a suffix token outside the top k)"
#: Characters of a suffix shown on hover.
HOVER_CHARS = 60


def zero_floor(log10_pz: np.ndarray) -> float:
    """Where windows with p_z = 0 are drawn: a whole step below the lowest finite log10 p_z and the scale's floor."""
    finite = log10_pz[np.isfinite(log10_pz)]
    lowest = min(float(finite.min()), FLOOR_LOG10) if finite.size else FLOOR_LOG10
    return math.floor(lowest) - max(1, math.ceil(-lowest / 10))


def y_ticks(floor: float) -> tuple[list[float], list[str]]:
    """About eight whole-decade ticks from the floor to 0, the floor's labelled "p_z = 0"."""
    step = max(1, math.ceil(-floor / 8))
    values = list(range(0, int(floor), -step))[::-1]
    if values and values[0] - floor < step / 2:
        values = values[1:]  # too close to the floor's label
    return [floor, *values], ["p_z = 0", *(("1" if v == 0 else f"1e{v}") for v in values)]


def hover_lines(result: ExtractionResult) -> list[str]:
    """Each window's hover: its number, suffix characters and tokens, p_z, greedy flag, draws for p = 0.5, and how its
    suffix starts."""
    out = []
    for row in result.windows.itertuples(index=False):
        suffix = result.text[row.suffix_char_start : row.char_end]
        shown = visible(suffix[:HOVER_CHARS]).replace("\n", "⏎") + ("…" if len(suffix) > HOVER_CHARS else "")
        n50 = "∞" if not math.isfinite(row.n_for_p50) else f"{row.n_for_p50:,.0f}"
        out.append(f"window {row.window}: suffix tokens {row.token_start + row.prefix_tokens}–"
                   f"{row.token_start + row.prefix_tokens + row.suffix_tokens - 1}, "
                   f"characters {row.suffix_char_start}–{row.char_end - 1}<br>p_z = {format_pz(row.log10_pz)}"
                   f"{' · greedy' if row.greedy else ''} · draws for p = 0.5: {n50}<br>“{shown}”")
    return out


def strip_figure(result: ExtractionResult, *, height: int = 340) -> go.Figure:
    """log10 p_z per window (x: the token where its suffix starts), p_z = 0 on a floor, greedy windows as diamonds."""
    w = result.windows
    x = w["token_start"].to_numpy() + w["prefix_tokens"].to_numpy()
    y = w["log10_pz"].to_numpy()
    floor = zero_floor(y)
    finite, greedy = np.isfinite(y), w["greedy"].to_numpy()
    hover = np.array(hover_lines(result), dtype=object)
    fig = go.Figure()
    for name, keep, symbol, size in (("p_z > 0", finite & ~greedy, "circle", 8),
                                     ("greedy: the model's top token at every suffix position", greedy, "diamond", 11)):
        fig.add_trace(go.Scatter(x=x[keep], y=y[keep], mode="markers", name=name, text=hover[keep],
                                 hovertemplate="%{text}<extra></extra>",
                                 marker={"symbol": symbol, "size": size, "line": {"width": 1, "color": "#333"},
                                         "color": [css(pz_rgb(v)) for v in y[keep]]}))
    zero = ~finite
    fig.add_trace(go.Scatter(x=x[zero], y=np.full(int(zero.sum()), float(floor)), mode="markers", name=ZERO_NAME,
                             text=hover[zero], hovertemplate="%{text}<extra></extra>",
                             marker={"symbol": "x-thin", "size": 8, "line": {"width": 1.5, "color": "#777"}}))
    for value, words, where in ((EXTRACTABLE, f"p_z = {EXTRACTABLE:g}: extractable", "top left"),
                                (1e-2, "p_z = 10⁻²", "bottom left")):
        fig.add_hline(y=math.log10(value), line={"dash": "dash", "color": "#555", "width": 1},
                      annotation_text=words, annotation_position=where)
    ticks, labels = y_ticks(floor)
    fig.update_layout(height=height, margin={"t": 30, "b": 40},
                      xaxis={"title": "token where the window's suffix starts"},
                      yaxis={"title": "p_z (log scale)", "range": [floor - 0.6, 0.4], "tickvals": ticks,
                             "ticktext": labels},
                      legend={"orientation": "h", "y": 1.12, "x": 0})
    return fig
