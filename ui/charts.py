"""Plotly figures for the Benchmark page: ROC curves, score distributions, AUROC by length bucket."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mia_core import metrics


def roc_figure(labels, scores: pd.DataFrame, *, log_scale: bool = False) -> go.Figure:
    """One ROC line per method, with the chance line; optionally log-log (low-FPR regime)."""
    fig = go.Figure()
    floor = 1e-3
    for method in scores:
        fpr, tpr, _ = metrics.roc_curve(labels, scores[method].to_numpy())
        auc = metrics.auroc(labels, scores[method].to_numpy())
        if log_scale:
            fpr, tpr = np.maximum(fpr, floor), np.maximum(tpr, floor)
        fig.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", name=f"{method} (AUROC {auc:.3f})"))
    chance = np.logspace(-3, 0, 50) if log_scale else np.array([0.0, 1.0])
    fig.add_trace(go.Scatter(x=chance, y=chance, mode="lines", name="chance", line={"dash": "dash", "color": "gray"}))
    axis = {"type": "log", "range": [-3, 0]} if log_scale else {"range": [0, 1]}
    fig.update_layout(xaxis={"title": "false positive rate", **axis}, yaxis={"title": "true positive rate", **axis},
                      height=420, margin={"t": 30}, legend={"x": 0.55, "y": 0.05})
    return fig


def distribution_figure(labels, values: np.ndarray, method: str) -> go.Figure:
    """Overlaid histograms of one method's scores for members and non-members."""
    labels = np.asarray(labels)
    fig = go.Figure()
    for label, name in ((1, "members"), (0, "non-members")):
        fig.add_trace(go.Histogram(x=values[labels == label], name=name, opacity=0.6, nbinsx=30))
    fig.update_layout(barmode="overlay", xaxis_title=f"{method} score (higher = member)", yaxis_title="texts",
                      height=320, margin={"t": 30})
    return fig


def bucket_table(labels, scores: pd.DataFrame, texts) -> pd.DataFrame:
    """AUROC per method within WikiMIA-style word-length buckets (≤32, 33–64, …)."""
    labels = np.asarray(labels)
    buckets = metrics.length_buckets([len(t.split()) for t in texts])
    rows = []
    for bucket in pd.unique(buckets):
        mask = buckets == bucket
        if len(set(labels[mask])) < 2:
            continue
        row = {"words": bucket, "texts": int(mask.sum())}
        row.update({m: round(metrics.auroc(labels[mask], scores[m].to_numpy()[mask]), 3) for m in scores})
        rows.append(row)
    return pd.DataFrame(rows)
