"""EM-MIA's loop over a ReCaLL matrix (METHODS-FIELD.md §15; `gyuwankim/em-mia` c0ee78b, `emmia.py -m NegPref`).

Pure NumPy on float64: `R[p, j]` is the ReCaLL ratio of judged text j after prefix p. Each iteration takes
pseudo-labels `y = [m > median(m)]` of the judged texts, scores every prefix by how well its row separates them
(`f(p)`), and sets membership `m = −f` (NaN → 0): a good prefix is a non-member. No labels are read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau, rankdata

PREFIX_SCORES = ("auc_roc", "kendall_tau", "rank_dist")


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """AUROC by ranks (Mann–Whitney, ties count half); NaN when one class is empty."""
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def prefix_score(row: np.ndarray, m: np.ndarray, labels: np.ndarray, metric: str) -> float:
    """How well one prefix's ReCaLL ratios follow the current membership scores `m` (pseudo-labels `labels`)."""
    if metric == "auc_roc":
        return auc(row, labels)
    if metric == "kendall_tau":
        return float(kendalltau(row, m).statistic)
    return float(1.0 - np.abs(rankdata(row) - rankdata(m)).mean() / (row.size - 1))


@dataclass(frozen=True)
class EmTrace:
    """Every iteration's prefix scores `f` and membership scores `m` (rows: iterations 1…T; columns: texts)."""

    prefix: np.ndarray
    membership: np.ndarray


def em_iterations(ratios: np.ndarray, judged: np.ndarray, init: np.ndarray, *, iterations: int, metric: str,
                  keep_diagonal: bool) -> EmTrace:
    """T rounds of `f(p) = score(R[p, ·], m[judged])`, `m = −f` (NaN → 0) over every prefix p.

    ratios : (N, K) ReCaLL ratios, row p = prefix p (one per scored text), column j = judged text `judged[j]`.
    judged : (K,) indices into the N texts of the texts each prefix is judged on (all N unless sampled).
    init : (N,) initial membership scores (NaN → 0); a constant init is refused (every AUC would be NaN).
    keep_diagonal : keep R[p, p] (a text after itself) in f(p), as the authors' code does; ours leaves it out.
    """
    m = np.where(np.isnan(init), 0.0, np.asarray(init, dtype=np.float64))
    if np.ptp(m) == 0:
        raise ValueError("EM-MIA's initial scores are all equal: every prefix score would be undefined (the "
                         "authors' code then scores every text 0); pick another init method")
    n = ratios.shape[0]
    fs, ms = np.empty((iterations, n)), np.empty((iterations, n))
    for it in range(iterations):
        target = m[judged]
        labels = target > np.median(target)  # ties go to the non-member side, as in the authors' code
        f = np.empty(n)
        for p in range(n):
            keep = np.ones(judged.size, dtype=bool) if keep_diagonal else judged != p
            f[p] = prefix_score(ratios[p, keep], target[keep], labels[keep], metric)
        m = np.where(np.isnan(f), 0.0, -f)
        fs[it], ms[it] = f, m
    return EmTrace(fs, ms)
