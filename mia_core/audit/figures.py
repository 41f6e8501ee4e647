"""Plotly figures of a book audit, shared by the HTML report and the dashboard's Book audit page.

Plotly reads labels as a little HTML (`<a href>`, `<b>`, `<br>`), so user strings (book names) are escaped.
"""
from __future__ import annotations

import html
import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..palette import LABEL_COLOURS, MEMBER, NEUTRAL, NONMEMBER
from .books import VERDICT_SHORT
from .calibration import Calibration

#: Bar colour per verdict: consistent with training is member-like (red), no evidence non-member-like (blue),
#: undecided, inconclusive and no verdict grey (palette.py).
VERDICT_COLOURS = {"evidence": MEMBER, "none": NONMEMBER, "weak": NEUTRAL, "inconclusive": NEUTRAL,
                   "uninformative": NEUTRAL, "weak_calibration": NEUTRAL, "too_few": NEUTRAL}
#: Book names longer than this are cut on the books chart's axis (the hover shows them whole).
LABEL_CHARS = 40
#: Legend names of the demo's ground-truth markers (the demo-known adapter's training split).
TRUTH_NAMES = {1: "ground truth: in demo-known's training", 0: "ground truth: held out of its training"}


def label(text: str) -> str:
    """A user string as a plotly label: its markup shown as text, never followed (plotly decodes the entities)."""
    return html.escape(str(text))


def calibration_figure(cal: Calibration) -> go.Figure:
    """ROC of the calibration snippets, the operating point at the threshold with its TPR/FPR intervals."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=cal.roc_fpr, y=cal.roc_tpr, mode="lines",
                             name=f"calibration ROC (AUROC {cal.auroc:.3f})"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="chance", line={"dash": "dash", "color": "gray"}))
    fig.add_trace(go.Scatter(
        x=[cal.fpr], y=[cal.tpr], mode="markers", marker={"size": 11, "color": "black"}, name="threshold",
        error_x={"type": "data", "symmetric": False, "array": [cal.fpr_ci[1] - cal.fpr], "arrayminus": [cal.fpr - cal.fpr_ci[0]]},
        error_y={"type": "data", "symmetric": False, "array": [cal.tpr_ci[1] - cal.tpr], "arrayminus": [cal.tpr - cal.tpr_ci[0]]},
        hovertemplate=f"threshold {cal.threshold:.4g}<br>TPR %{{y:.1%}}<br>FPR %{{x:.1%}}<extra></extra>"))
    fig.update_layout(xaxis={"title": "false positive rate (non-member snippets)", "range": [0, 1]},
                      yaxis={"title": "true positive rate (member snippets)", "range": [0, 1.02]},
                      height=380, margin={"t": 30, "b": 40}, legend={"x": 0.45, "y": 0.05})
    return fig


def books_figure(books: pd.DataFrame, cal: Calibration, keys: Sequence[str] | None = None,
                 truth: Mapping[str, int] | None = None) -> go.Figure:
    """Estimated prevalence per book with its interval, in the table's order (top row on top), and the raw rate beside it.

    keys : the verdict key of each row (`books.verdict_keys`): one bar trace per verdict, coloured by
        `VERDICT_COLOURS`, so the legend names them; without keys, one grey trace.
    truth : book → 1 / 0 known membership (the demo's ground truth), drawn as markers right of the bars.
    """
    names = axis_labels(books["book"])
    keys = list(keys) if keys is not None else [None] * len(books)
    fig = go.Figure()
    for key in dict.fromkeys(keys):  # verdicts in the order they first appear in the table
        mask = np.array([k == key for k in keys])
        rows = books[mask]
        fig.add_trace(go.Bar(
            y=np.asarray(names, dtype=object)[mask].tolist(), x=rows["prevalence"], orientation="h",
            customdata=[label(b) for b in rows["book"]],
            name=VERDICT_SHORT[key] if key else "estimated prevalence",
            marker={"color": VERDICT_COLOURS.get(key, NEUTRAL)},
            error_x={"type": "data", "symmetric": False, "array": rows["prevalence_hi"] - rows["prevalence"],
                     "arrayminus": rows["prevalence"] - rows["prevalence_lo"], "color": "#444"},
            hovertemplate="%{customdata}<br>estimated prevalence %{x:.1%}<extra>" + (label(VERDICT_SHORT[key]) if key else "")
                          + "</extra>"))
    fig.add_trace(go.Scatter(
        y=names, x=books["rate"], customdata=[label(b) for b in books["book"]], mode="markers",
        name="raw rate (share of snippets flagged)",
        marker={"symbol": "diamond", "color": "black", "size": 8},
        error_x={"type": "data", "symmetric": False, "array": books["rate_hi"] - books["rate"],
                 "arrayminus": books["rate"] - books["rate_lo"], "color": "black"},
        hovertemplate="%{customdata}<br>rate %{x:.1%}<extra></extra>"))
    right = 1.05
    if truth:
        right = 1.2
        for value, symbol in ((1, "star"), (0, "circle-open")):
            shown = [n for n, b in zip(names, books["book"]) if truth.get(b) == value]
            fig.add_trace(go.Scatter(
                y=shown, x=[1.12] * len(shown), mode="markers", name=TRUTH_NAMES[value],
                marker={"symbol": symbol, "size": 13, "color": LABEL_COLOURS[value], "line": {"width": 2}},
                hovertemplate="%{y}<br>" + TRUTH_NAMES[value] + "<extra></extra>"))
    if any(keys):  # the verdict and its test written beside each bar: equal bars, different verdicts, told apart
        fig.add_trace(go.Scatter(
            y=names, x=[right] * len(names), mode="text", textposition="middle right", showlegend=False,
            text=[f"{VERDICT_SHORT[k]} · p(BH) {p:.2g}" for k, p in zip(keys, books["p_adj"])],
            textfont={"color": [VERDICT_COLOURS.get(k, NEUTRAL) for k in keys], "size": 12},
            hoverinfo="skip"))
    fig.add_vline(x=cal.fpr, line={"dash": "dot", "color": "gray"},
                  annotation_text=f"calibration FPR {cal.fpr:.1%}", annotation_position="top")
    fig.update_layout(xaxis={"title": "share of the book's snippets", "range": [0, right + (0.55 if any(keys) else 0)],
                             "tickformat": ".0%",
                             "tickvals": [0, 0.2, 0.4, 0.6, 0.8, 1.0]},
                      yaxis={"categoryorder": "array", "categoryarray": names[::-1]},  # plotly draws bottom-up
                      height=max(300, 130 + 32 * len(books)), margin={"t": 40, "l": 10, "b": 90}, barmode="overlay",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.22})
    return fig


def axis_labels(books: pd.Series, width: int = LABEL_CHARS) -> list[str]:
    """Book names as category labels, long ones cut to `width` characters (full names when cutting would merge two)."""
    cut = [b if len(b) <= width else b[:width - 1] + "…" for b in map(str, books)]
    return [label(b) for b in (cut if len(set(cut)) == len(cut) else books)]


def snippet_scores_figure(snippets: pd.DataFrame, book: str, cal: Calibration) -> go.Figure:
    """A book's snippet scores along the book (whole-number snippet ticks), flagged ones red, with the threshold."""
    rows = snippets[snippets["book"] == book].sort_values("position")
    flagged = (rows["score"] >= cal.threshold).to_numpy()
    fig = go.Figure(go.Scatter(
        x=rows["position"], y=rows["score"], mode="lines+markers", name=label(book), line={"color": NEUTRAL},
        marker={"size": 8, "color": [MEMBER if f else NONMEMBER for f in flagged]},
        hovertemplate="snippet %{x}<br>score %{y:.4g}<extra></extra>"))
    fig.add_hline(y=cal.threshold, line={"dash": "dot", "color": "black"}, annotation_text="threshold")
    span = int(rows["position"].max() - rows["position"].min()) if len(rows) else 0
    fig.update_layout(xaxis={"title": "snippet (position in the book; red: at or above the threshold)",
                             "tickformat": "d", "tick0": 0, "dtick": max(1, math.ceil(span / 10))},
                      yaxis_title="score (higher = member)", height=280, margin={"t": 30}, showlegend=False)
    return fig
