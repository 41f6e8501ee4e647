"""Plotly figures for the audit pages: window scores along a long text, and the two-model ratio scatter."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mia_core.palette import LABEL_COLOURS, MEMBER, NONMEMBER

#: Window labels in words (colours: `palette.LABEL_COLOURS`, red member, blue non-member, as the heatmap below).
LABEL_NAMES = {1: "member passage", 0: "non-member passage", -1: "no label"}


def preview(text: str, words: int = 14) -> str:
    """The first words of a text on one line, for hover labels, escaped (plotly reads labels as HTML)."""
    head = text.split()
    return html.escape(" ".join(head[:words]) + (" …" if len(head) > words else ""))


def window_figure(table: pd.DataFrame, method_label: str, *, labels=None, picked: int | None = None) -> go.Figure:
    """Window score against the window's first token; markers coloured by label; the picked window ringed.

    One trace per label group (legend), each point's `customdata` is its window index.
    """
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=table["token_start"], y=table["score"], mode="lines", line={"color": "#bbbbbb"},
                             hoverinfo="skip", showlegend=False))
    groups = np.full(len(table), -1) if labels is None else np.asarray(labels)
    for label in (1, 0, -1):
        mask = groups == label
        if not mask.any():
            continue
        part = table[mask]
        fig.add_trace(go.Scatter(
            x=part["token_start"], y=part["score"], mode="markers", name=LABEL_NAMES[label],
            marker={"color": LABEL_COLOURS[label], "size": 8}, customdata=part["window"],
            text=[preview(t) for t in part["text"]],
            hovertemplate="window %{customdata} (from token %{x})<br>score %{y:.3f}<br>%{text}<extra></extra>"))
    if picked is not None and 0 <= picked < len(table):
        row = table.iloc[picked]
        fig.add_trace(go.Scatter(x=[row["token_start"]], y=[row["score"]], mode="markers", name="shown below",
                                 marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": "black"}},
                                 hoverinfo="skip"))
    fig.update_layout(xaxis_title="position in the text (first token of the window)",
                      yaxis_title=f"{method_label} of the window (higher = member)", height=380, margin={"t": 30},
                      legend={"orientation": "h", "y": 1.1})
    return fig


def ratio_figure(table: pd.DataFrame, band: float, method_label: str) -> go.Figure:
    """Score under the unlearned model against the original; the suspect band between y = x/band and y = x·band."""
    fig = go.Figure()
    x = table["score_original"].to_numpy(dtype=float)
    finite = x[np.isfinite(x)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 0.0)
    pad = 0.05 * (hi - lo) or 0.1
    span = np.linspace(lo - pad, hi + pad, 50)
    for factor, name in ((band, f"ratio {band:g}"), (1 / band, f"ratio 1/{band:g}")):
        fig.add_trace(go.Scatter(x=span, y=span * factor, mode="lines", name=name,
                                 line={"dash": "dash", "color": "#999999"}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=span, y=span, mode="lines", name="ratio 1", line={"color": "#cccccc"}, hoverinfo="skip"))
    for suspect, colour, name in ((False, NONMEMBER, "changed"), (True, MEMBER, "suspect (unlearning may have failed)")):
        part = table[table["suspect"] == suspect]
        fig.add_trace(go.Scatter(
            x=part["score_original"], y=part["score_unlearned"], mode="markers", name=name,
            marker={"color": colour, "size": 7}, customdata=np.stack([part["chunk_id"].map(html.escape), part["ratio"]], axis=-1)
            if len(part) else None, text=[preview(t) for t in part["text"]],
            hovertemplate="%{customdata[0]}  ratio %{customdata[1]:.3f}<br>%{text}<extra></extra>"))
    fig.update_layout(xaxis_title=f"{method_label} under the original model",
                      yaxis_title=f"{method_label} under the unlearned model", height=420, margin={"t": 30},
                      legend={"orientation": "h", "y": 1.12})
    return fig
