"""Plotly figures for the Benchmark page: ROC curves (one run, or several overlaid), score distributions, AUROC by
length bucket. Users see method labels; red and blue keep their one meaning (member / non-member, mia_core.palette),
so curves of methods and runs take other colours."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go

import mia_core
from mia_core import metrics
from mia_core.palette import MEMBER, NEUTRAL, NONMEMBER, rgba

#: Curve colours: ColorBrewer Dark2 without its grey (grey is the chance line and "no label").
CURVE_COLOURS = tuple(plotly.colors.qualitative.Dark2[:-1])
#: Line dashes that tell methods apart when runs are overlaid (a run keeps one colour).
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
#: Histogram transparency: both classes stay visible where they overlap.
HIST_ALPHA = 0.55
#: The lowest rate drawn on log-log axes.
LOG_FLOOR = 1e-3


def method_label(method: str) -> str:
    """The registry label of a method id ("min_k_pp" → "Min-K%++"); unknown names as they are."""
    return mia_core.METHODS[method].label if method in mia_core.METHODS else method


def _roc_trace(labels, values: np.ndarray, name: str, colour: str, dash: str, *, log_scale: bool,
               group: str | None = None) -> go.Scatter:
    """One ROC curve named `name` (escaped: names may hold file names) with its AUROC in the legend."""
    fpr, tpr, _ = metrics.roc_curve(labels, values)
    auc = metrics.auroc(labels, values)
    if log_scale:
        fpr, tpr = np.maximum(fpr, LOG_FLOOR), np.maximum(tpr, LOG_FLOOR)
    return go.Scatter(x=fpr, y=tpr, mode="lines", name=f"{html.escape(name)} (AUROC {auc:.3f})",
                      line={"color": colour, "dash": dash}, legendgroup=group)


def _roc_frame(fig: go.Figure, *, log_scale: bool, height: int = 420) -> go.Figure:
    """The chance line and the axes shared by every ROC figure."""
    chance = np.logspace(-3, 0, 50) if log_scale else np.array([0.0, 1.0])
    fig.add_trace(go.Scatter(x=chance, y=chance, mode="lines", name="chance", line={"dash": "dash", "color": NEUTRAL}))
    axis = {"type": "log", "range": [-3, 0]} if log_scale else {"range": [0, 1]}
    fig.update_layout(xaxis={"title": "false positive rate", **axis}, yaxis={"title": "true positive rate", **axis},
                      height=height, margin={"t": 30})
    return fig


def roc_figure(labels, scores: pd.DataFrame, *, log_scale: bool = False) -> go.Figure:
    """One ROC line per method (its label and AUROC in the legend), with the chance line; optionally log-log."""
    fig = go.Figure()
    for i, method in enumerate(scores):
        fig.add_trace(_roc_trace(labels, scores[method].to_numpy(), method_label(method),
                                 CURVE_COLOURS[i % len(CURVE_COLOURS)], "solid", log_scale=log_scale))
    fig.update_layout(legend={"x": 0.55, "y": 0.05})
    return _roc_frame(fig, log_scale=log_scale)


def runs_roc_figure(runs: Sequence[tuple[str, np.ndarray, pd.DataFrame]], *, log_scale: bool = False) -> go.Figure:
    """ROC curves of several runs `(run label, labels, scores)` overlaid: one colour per run, one dash per method."""
    fig = go.Figure()
    methods = list(dict.fromkeys(m for _, _, scores in runs for m in scores))
    for i, (name, labels, scores) in enumerate(runs):
        for method in scores:
            fig.add_trace(_roc_trace(labels, scores[method].to_numpy(), f"{name} — {method_label(method)}",
                                     CURVE_COLOURS[i % len(CURVE_COLOURS)], DASHES[methods.index(method) % len(DASHES)],
                                     log_scale=log_scale, group=name))
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "x": 0})
    return _roc_frame(fig, log_scale=log_scale, height=520)


def distribution_figure(labels, values: np.ndarray, method: str) -> go.Figure:
    """Overlaid, half-transparent histograms of one method's scores: members red, non-members blue (the palette)."""
    labels = np.asarray(labels)
    fig = go.Figure()
    for label, name, colour in ((1, "members (label 1)", MEMBER), (0, "non-members (label 0)", NONMEMBER)):
        fig.add_trace(go.Histogram(x=values[labels == label], name=name, nbinsx=30,
                                   marker={"color": rgba(colour, HIST_ALPHA), "line": {"color": colour, "width": 1}}))
    fig.update_layout(barmode="overlay", yaxis_title="texts", height=320, margin={"t": 30},
                      xaxis_title=f"{html.escape(method_label(method))} score (higher = member-like)")
    return fig


def bucket_table(labels, scores: pd.DataFrame, texts) -> pd.DataFrame:
    """AUROC per method (columns named by label) within WikiMIA-style word-length buckets (≤32, 33–64, …)."""
    labels = np.asarray(labels)
    buckets = metrics.length_buckets([len(t.split()) for t in texts])
    rows = []
    for bucket in pd.unique(buckets):
        mask = buckets == bucket
        if len(set(labels[mask])) < 2:
            continue
        row = {"words": bucket, "texts": int(mask.sum())}
        row.update({method_label(m): round(metrics.auroc(labels[mask], scores[m].to_numpy()[mask]), 3) for m in scores})
        rows.append(row)
    return pd.DataFrame(rows)
