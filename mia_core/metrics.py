"""Evaluation metrics for membership-inference attacks (MIAs).

Conventions: members are the positive class (label 1) and scores are oriented so that
higher means "more likely a member". All ROC computations go through
:func:`sklearn.metrics.roc_curve` (``drop_intermediate=True``).

- :func:`roc_curve`, :func:`auroc`, :func:`tpr_at_fpr`, :func:`fpr_at_tpr`: point metrics.
- :func:`evaluate`: all metrics at once, with percentile-bootstrap confidence intervals
  (optionally a cluster bootstrap over ``groups``) and resolution warnings.
- :func:`length_buckets`: WikiMIA-style word-length buckets.
- :func:`benjamini_hochberg`: BH-adjusted p-values across books or texts (the audit, reference p-values).

The model-free blind baselines (Das, Zhang & Tramèr 2024) live in :mod:`mia_core.blind`.

A single class (all members or all non-members) yields NaN and a warning, not an error.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps
from sklearn import metrics as skm
from sklearn.exceptions import UndefinedMetricWarning

__all__ = ["roc_curve", "auroc", "auroc_interval", "tpr_at_fpr", "fpr_at_tpr", "evaluate", "length_buckets",
           "benjamini_hochberg"]

_MAX_DEGENERATE_SHARE = 0.05  # warn when more bootstrap resamples than this lack a class


def _check_labels(labels) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {y.shape}")
    if y.dtype.kind not in "biuf":
        raise ValueError(f"labels must be numeric 0/1 (1 = member), got dtype {y.dtype}")
    if (bad := ~np.isin(y, (0, 1))).any():
        raise ValueError(f"labels must be 0/1 (1 = member); found {np.unique(y[bad])[:5].tolist()}")
    return y.astype(np.int64)


def check_scores(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    """Validated 0/1 labels (int64) and finite float64 scores of the same shape; ValueError saying what is wrong."""
    y = _check_labels(labels)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != y.shape:
        raise ValueError(f"scores has shape {s.shape} but labels has shape {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"scores must be finite; {int((~np.isfinite(s)).sum())} are NaN/inf")
    return y, s


def _check_rate(x: float, name: str) -> float:
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {x}")
    return float(x)


def _single_class_msg(y: np.ndarray) -> str | None:
    n_pos = int(y.sum())
    if 0 < n_pos < y.size:
        return None
    which = "members" if n_pos else "non-members"
    return f"only {which} present ({y.size} samples): ROC metrics are undefined (NaN)"


def _pct(x: float) -> str:
    """Format a rate as a percentage for key names: 0.05 -> '5%', 0.001 -> '0.1%'."""
    return f"{round(x * 100, 10):g}%"


def _roc(y: np.ndarray, s: np.ndarray):
    with warnings.catch_warnings():  # a single class is reported by our own warning
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return skm.roc_curve(y, s)


def _curve(labels, scores):
    """Validated (fpr, tpr), or None with a warning (to the public caller) for a single class."""
    y, s = check_scores(labels, scores)
    if msg := _single_class_msg(y):
        warnings.warn(msg, stacklevel=3)
        return None
    return _roc(y, s)[:2]


def _tpr_at(fpr: np.ndarray, tpr: np.ndarray, x: float) -> float:
    return float(tpr[fpr <= x].max())  # (0, 0) is always on the curve, so never empty


def _fpr_at(fpr: np.ndarray, tpr: np.ndarray, t: float) -> float:
    return float(fpr[np.argmax(tpr >= t)])  # (1, 1) is always on the curve


def roc_curve(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve of a membership score (validated wrapper of ``sklearn.metrics.roc_curve``).

    Parameters
    ----------
    labels : array-like of shape (n_samples,)
        1 = member, 0 = non-member (bool/int/float); anything else raises ValueError.
    scores : array-like of shape (n_samples,)
        Finite scores, higher = more likely a member. The same two arguments are taken by
        :func:`auroc`, :func:`tpr_at_fpr`, :func:`fpr_at_tpr` and :func:`evaluate`.

    Returns
    -------
    fpr, tpr, thresholds : ndarray of shape (n_points,)
        With a single class, ``fpr`` or ``tpr`` is NaN and a warning is issued.

    Examples
    --------
    >>> fpr, tpr, _ = roc_curve([0, 1, 1], [0.1, 0.4, 0.9])
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.0, 1.0], [0.0, 0.5, 1.0, 1.0])
    """
    y, s = check_scores(labels, scores)
    if msg := _single_class_msg(y):
        warnings.warn(msg, stacklevel=2)
    return _roc(y, s)


def auroc(labels, scores) -> float:
    """Area under the ROC curve; NaN with a warning if only one class is present.

    >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    """
    curve = _curve(labels, scores)
    return math.nan if curve is None else float(skm.auc(*curve))


def tpr_at_fpr(labels, scores, fpr: float) -> float:
    """Largest TPR over ROC points with FPR ≤ ``fpr`` (in [0, 1]; 0.01 for TPR@1%FPR).

    >>> tpr_at_fpr([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.0)
    0.5
    """
    x = _check_rate(fpr, "fpr")
    curve = _curve(labels, scores)
    return math.nan if curve is None else _tpr_at(*curve, x)


def fpr_at_tpr(labels, scores, tpr: float = 0.95) -> float:
    """FPR at the first ROC point (from the strictest threshold) with TPR ≥ ``tpr`` (default 0.95).

    >>> fpr_at_tpr([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.5
    """
    t = _check_rate(tpr, "tpr")
    curve = _curve(labels, scores)
    return math.nan if curve is None else _fpr_at(*curve, t)


def evaluate(labels, scores, *, n_boot: int = 1000, seed: int = 0,
             fprs: Sequence[float] = (0.05, 0.01, 0.001), groups=None, ci: float = 0.95) -> dict:
    """AUROC, TPR@FPR, FPR@95%TPR with percentile-bootstrap confidence intervals.

    Parameters
    ----------
    labels, scores : array-like of shape (n_samples,)
        1 = member; scores higher = member.
    n_boot : int, default=1000
        Bootstrap resamples. Resamples missing a class are skipped (counted; warned if > 5%).
    seed : int, default=0
        Seed of the bootstrap generator (results are deterministic for a fixed seed).
    fprs : sequence of float, default=(0.05, 0.01, 0.001)
        FPR levels for ``tpr@{x}fpr`` keys (0.05 -> ``"tpr@5%fpr"``).
    groups : array-like of shape (n_samples,), default=None
        Cluster ids (e.g. book id); if given, whole groups are resampled (cluster bootstrap).
    ci : float, default=0.95
        Confidence level of the percentile intervals.

    Returns
    -------
    dict
        JSON-ready: ``auroc``, ``auroc_ci`` ([lo, hi]), ``tpr@5%fpr``, ``tpr@5%fpr_ci``, ...,
        ``fpr@95%tpr``, ``n_members``, ``n_nonmembers``, ``warnings`` (list of str, each also
        issued via :func:`warnings.warn`), e.g. when fewer than 1/FPR non-members exist: that
        ``tpr@{x}fpr`` and its interval are then NaN (null in JSON), as no threshold can reach the rate.

    Examples
    --------
    >>> r = evaluate([0] * 10 + [1] * 10, range(20), n_boot=200, fprs=(0.1,))
    >>> r["auroc"], r["auroc_ci"], r["tpr@10%fpr"], r["warnings"]
    (1.0, [1.0, 1.0], 1.0, [])
    """
    y, s = check_scores(labels, scores)
    fprs = [_check_rate(x, "fprs") for x in fprs]
    if not 0.0 < ci < 1.0 or int(n_boot) < 1:
        raise ValueError(f"need 0 < ci < 1 and n_boot >= 1, got ci={ci}, n_boot={n_boot}")
    # The plain bootstrap is the cluster bootstrap in which every sample is its own group.
    g = np.arange(y.size) if groups is None else np.asarray(groups)
    if g.shape != y.shape:
        raise ValueError(f"groups has shape {g.shape} but labels has shape {y.shape}")
    n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
    notes: list[str] = []
    unresolved = set()  # TPR@x%FPR keys reported as NaN (null in JSON): one false positive is already above x
    for x in fprs:
        needed = math.ceil(1.0 / x - 1e-9) if x > 0 else math.inf
        if n_neg < needed:
            unresolved.add(f"tpr@{_pct(x)}fpr")
            notes.append(f"TPR@{_pct(x)}FPR is not resolvable: {n_neg} non-members, "
                         f"need at least {needed} for one false positive to be ≤ {_pct(x)}")
    keys = ["auroc"] + [f"tpr@{_pct(x)}fpr" for x in fprs]

    def stats(yy: np.ndarray, ss: np.ndarray) -> list[float]:
        f, t, _ = _roc(yy, ss)
        return [float(skm.auc(f, t)), *(_tpr_at(f, t, x) for x in fprs), _fpr_at(f, t, 0.95)]

    cis = [[math.nan, math.nan]] * len(keys)
    if msg := _single_class_msg(y):
        notes.insert(0, msg)
        est = [math.nan] * (len(keys) + 1)
    else:
        est = stats(y, s)
        _, inverse = np.unique(g, return_inverse=True)
        n_groups = int(inverse.max()) + 1
        rng = np.random.default_rng(seed)
        boot, degenerate = [], 0
        for _ in range(int(n_boot)):
            counts = np.bincount(rng.integers(0, n_groups, n_groups), minlength=n_groups)
            idx = np.repeat(np.arange(y.size), counts[inverse])
            if y[idx].min() == y[idx].max():
                degenerate += 1
                continue
            boot.append(stats(y[idx], s[idx])[:-1])
        if degenerate > _MAX_DEGENERATE_SHARE * n_boot:
            notes.append(f"{degenerate}/{n_boot} bootstrap resamples had a single class and "
                         "were skipped; confidence intervals are unreliable")
        if boot:
            q = np.percentile(np.asarray(boot), [50 * (1 - ci), 50 * (1 + ci)], axis=0)
            cis = [[float(lo), float(hi)] for lo, hi in q.T]
    out: dict = {}
    for key, value, interval in zip(keys, est, cis):
        if key in unresolved:
            value, interval = math.nan, [math.nan, math.nan]
        out[key], out[f"{key}_ci"] = value, interval
    out.update({"fpr@95%tpr": est[-1], "n_members": n_pos, "n_nonmembers": n_neg,
                "warnings": notes})
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return out


def length_buckets(lengths, *, edges: Sequence[int] = (32, 64, 128, 256)) -> np.ndarray:
    """WikiMIA-style length buckets: "≤32", "33–64", "65–128", "129–256", ">256".

    Parameters
    ----------
    lengths : array-like of int of shape (n_samples,), or sequence of str
        Word counts; strings are counted with ``len(text.split())``.
    edges : sequence of int, default=(32, 64, 128, 256)
        Strictly increasing inclusive upper bounds of the buckets.

    Returns
    -------
    ndarray of str of shape (n_samples,)

    Examples
    --------
    >>> length_buckets([10, 32, 33, 300]).tolist()
    ['≤32', '≤32', '33–64', '>256']
    """
    n = np.asarray([len(v.split()) if isinstance(v, str) else v for v in lengths], dtype=float)
    e = np.asarray(edges, dtype=np.int64)
    if e.ndim != 1 or e.size == 0 or np.any(np.diff(e) <= 0):
        raise ValueError(f"edges must be a non-empty strictly increasing sequence, got {edges}")
    names = [f"≤{e[0]}"] + [f"{a + 1}–{b}" for a, b in zip(e[:-1], e[1:])] + [f">{e[-1]}"]
    return np.asarray(names)[np.searchsorted(e, n, side="left")]


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate: across books, across texts); NaNs stay NaN, uncounted."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = sps.false_discovery_control(p[finite], method="bh")
    return out


def auroc_interval(auroc: float | None, n_pos: int, n_neg: int, *, ci: float = 0.95) -> list[float | None]:
    """[lo, hi] of an AUROC over n_pos members and n_neg non-members: a normal interval on the Hanley & McNeil (1982)
    standard error (the blind baseline keeps no per-text scores to bootstrap); [None, None] when undefined."""
    if auroc is None or math.isnan(auroc) or min(n_pos, n_neg) < 1:
        return [None, None]
    q1, q2 = auroc / (2 - auroc), 2 * auroc ** 2 / (1 + auroc)
    var = (auroc * (1 - auroc) + (n_pos - 1) * (q1 - auroc ** 2) + (n_neg - 1) * (q2 - auroc ** 2)) / (n_pos * n_neg)
    half = float(sps.norm.ppf(0.5 + ci / 2)) * math.sqrt(max(var, 0.0))
    return [max(0.0, auroc - half), min(1.0, auroc + half)]
