"""Method comparison on labelled texts: metrics per method, the blind baseline, and its warning.

The blind baseline (Das, Zhang & Tramèr 2024) tells whether the labels are separable without the
model at all; if so, a high AUROC is not evidence of membership.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from . import metrics

#: Warn when the model-free classifier comes this close to the best method …
BLIND_MARGIN = 0.05
#: … or exceeds this AUROC on its own.
BLIND_LIMIT = 0.6


def evaluate_frame(scores: pd.DataFrame, labels, texts, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """`{method: metrics.evaluate(...), "blind_baseline": {...}, "n_members", "n_nonmembers", "warnings"}`."""
    labels = np.asarray(labels)
    with warnings.catch_warnings():  # every warning is kept in the report instead
        warnings.simplefilter("ignore", UserWarning)
        report: dict = {n: metrics.evaluate(labels, scores[n].to_numpy(), n_boot=n_boot, seed=seed) for n in scores}
        blind = metrics.blind_baseline(list(texts), labels, seed=seed)
    report["blind_baseline"] = blind
    report["n_members"] = int((labels == 1).sum())
    report["n_nonmembers"] = int((labels == 0).sum())
    report["warnings"] = blind_warnings(blind["auroc"], {n: report[n]["auroc"] for n in scores})
    return report


def blind_warnings(blind_auroc: float, method_aurocs: dict[str, float]) -> list[str]:
    """Warnings when a model-free classifier explains the labels as well as the methods do."""
    finite = [v for v in method_aurocs.values() if not math.isnan(v)]
    if math.isnan(blind_auroc) or not finite:
        return []
    best = max(finite)
    out = []
    if blind_auroc > BLIND_LIMIT:
        out.append(f"blind baseline AUROC {blind_auroc:.3f} > {BLIND_LIMIT}: members and non-members differ in "
                   "distribution (topic, date, style); method AUROCs here are not evidence of membership")
    elif blind_auroc >= best - BLIND_MARGIN:
        out.append(f"blind baseline AUROC {blind_auroc:.3f} is within {BLIND_MARGIN} of the best method ({best:.3f}): "
                   "the text alone nearly explains the labels")
    return out


def format_report(report: dict, methods: list[str]) -> str:
    """A plain-text table of the report for the terminal."""
    lines = [f"{'method':10s} {'AUROC':>6s} {'95% CI':>15s} {'TPR@5%':>7s} {'TPR@1%':>7s} {'FPR@95%TPR':>10s}"]
    for name in methods:
        m = report[name]
        lo, hi = m["auroc_ci"]
        lines.append(f"{name:10s} {m['auroc']:6.3f} [{lo:5.3f}, {hi:5.3f}] {m['tpr@5%fpr']:7.3f} "
                     f"{m['tpr@1%fpr']:7.3f} {m['fpr@95%tpr']:10.3f}")
    lines.append(f"{'blind':10s} {report['blind_baseline']['auroc']:6.3f}   (TF-IDF + logistic regression, no model)")
    lines.append(f"members: {report['n_members']}, non-members: {report['n_nonmembers']}")
    notes = report["warnings"] + sorted({w for n in methods for w in report[n]["warnings"]})
    lines += [f"warning: {w}" for w in notes]
    return "\n".join(lines)
