"""Threshold calibration on known member and known non-member books (docs/methods.md, "Book and corpus audits").

The threshold holds a target FPR on the non-member snippets (default 5%) or maximises snippet
accuracy (the Min-K% book study). The validation TPR and FPR at that threshold come with
bootstrap distributions from resampling whole books of each class, which every per-book prevalence
interval then carries along.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import roc_curve

from .. import metrics
from .statistics import between_book_sd, cluster_bootstrap_rates, percentile_interval, predictive_rates

RULES = ("fpr", "accuracy")
#: Below this many books of a class the intervals are rough, and the report says so.
FEW_BOOKS = 5


@dataclass
class Calibration:
    """A threshold and how the detector behaves at it on the calibration books.

    `boot_tpr`/`boot_fpr` are (n_boot,) values at the fixed threshold after resampling whole books
    of each class (the uncertainty of the calibration's own TPR/FPR). `pred_tpr`/`pred_fpr` are what
    a *new* book's TPR/FPR may be: the same resamples plus a book offset drawn with the calibration's
    between-book spread `book_sd`; per-book prevalence intervals use these. `nonmember_scores` are
    the non-member snippet scores each book is tested against.
    """

    threshold: float
    rule: str
    target_fpr: float | None
    tpr: float
    fpr: float
    accuracy: float
    tpr_ci: tuple[float, float]
    fpr_ci: tuple[float, float]
    auroc: float
    auroc_ci: tuple[float, float]
    n_member_books: int
    n_nonmember_books: int
    n_member_snippets: int
    n_nonmember_snippets: int
    roc_fpr: np.ndarray
    roc_tpr: np.ndarray
    boot_tpr: np.ndarray
    boot_fpr: np.ndarray
    pred_tpr: np.ndarray
    pred_fpr: np.ndarray
    book_sd: float
    nonmember_scores: np.ndarray
    ci: float
    seed: int
    warnings: list[str] = field(default_factory=list)

    @property
    def informative(self) -> bool:
        """False when the detector does not separate the calibration books (no verdict can rest on it)."""
        return self.tpr > self.fpr and not (self.auroc_ci[0] <= 0.5)

    def summary(self) -> dict:
        """JSON-ready numbers for reports and the store (no arrays)."""
        keys = ("threshold", "rule", "target_fpr", "tpr", "fpr", "accuracy", "tpr_ci", "fpr_ci", "auroc", "auroc_ci",
                "n_member_books", "n_nonmember_books", "n_member_snippets", "n_nonmember_snippets", "book_sd", "ci", "seed",
                "warnings")
        return {k: getattr(self, k) for k in keys} | {"informative": self.informative}


def choose_threshold(labels, scores, *, rule: str = "fpr", target_fpr: float = 0.05) -> float:
    """The snippet-score threshold (member when score ≥ threshold) under `rule`.

    rule="fpr": the lowest ROC threshold whose FPR ≤ target_fpr (the most members found at that FPR).
    rule="accuracy": the threshold of maximal snippet accuracy (highest threshold among ties).
    """
    if rule not in RULES:
        raise ValueError(f"threshold rule must be one of {RULES} (got {rule!r})")
    if not 0 < target_fpr < 1:
        raise ValueError(f"target FPR must be in (0, 1) (got {target_fpr})")
    y, s = np.asarray(labels, int), np.asarray(scores, float)
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)  # every distinct score is a candidate
    if rule == "fpr":
        i = int(np.flatnonzero(fpr <= target_fpr + 1e-12)[-1])
    else:
        n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
        i = int(np.argmax(tpr * n_pos + (1 - fpr) * n_neg))
    return float(thresholds[i])


def calibrate(scores, labels, books, *, rule: str = "fpr", target_fpr: float = 0.05, n_boot: int = 1000,
              seed: int = 0, ci: float = 0.95, auroc_boot: int | None = None) -> Calibration:
    """Pick the threshold on labelled snippets and measure TPR/FPR/AUROC with whole-book bootstraps.

    Parameters
    ----------
    scores, labels, books : array-like of shape (n_snippets,)
        Snippet scores (higher = member), 1/0 membership of the snippet's book, and its book name.
    rule, target_fpr : threshold rule, see `choose_threshold`.
    n_boot, seed, ci : bootstrap resamples, generator seed, interval level.
    auroc_boot : resamples for the AUROC interval only (default `n_boot`; simulations lower it for speed).
    """
    s, y, g = np.asarray(scores, float), np.asarray(labels, int), np.asarray(books, dtype=object)
    if set(np.unique(y)) != {0, 1}:
        raise ValueError("calibration needs snippets of both known members (1) and known non-members (0)")
    if not np.all(np.isfinite(s)):
        raise ValueError("calibration scores must be finite")
    threshold = choose_threshold(y, s, rule=rule, target_fpr=target_fpr)
    hits = s >= threshold
    member, nonmember = y == 1, y == 0
    rng = np.random.default_rng(seed)
    boot_tpr = cluster_bootstrap_rates(hits[member], g[member], n_boot, rng)
    boot_fpr = cluster_bootstrap_rates(hits[nonmember], g[nonmember], n_boot, rng)
    book_sd = between_book_sd(s, y, g)
    pred_tpr = predictive_rates(s[member], g[member], threshold, book_sd, n_boot, rng)
    pred_fpr = predictive_rates(s[nonmember], g[nonmember], threshold, book_sd, n_boot, rng)
    with warnings.catch_warnings():  # its warnings are kept in `Calibration.warnings`
        warnings.simplefilter("ignore")
        evaluation = metrics.evaluate(y, s, n_boot=auroc_boot or n_boot, seed=seed, groups=g, ci=ci, fprs=())
    roc_fpr, roc_tpr, _ = metrics.roc_curve(y, s)
    n_books = (len(set(g[member])), len(set(g[nonmember])))
    cal = Calibration(
        threshold=threshold, rule=rule, target_fpr=target_fpr if rule == "fpr" else None,
        tpr=float(hits[member].mean()), fpr=float(hits[nonmember].mean()), accuracy=float((hits == (y == 1)).mean()),
        tpr_ci=percentile_interval(boot_tpr, ci), fpr_ci=percentile_interval(boot_fpr, ci),
        auroc=float(evaluation["auroc"]), auroc_ci=tuple(evaluation["auroc_ci"]),
        n_member_books=n_books[0], n_nonmember_books=n_books[1],
        n_member_snippets=int(member.sum()), n_nonmember_snippets=int(nonmember.sum()),
        roc_fpr=roc_fpr, roc_tpr=roc_tpr, boot_tpr=boot_tpr, boot_fpr=boot_fpr, pred_tpr=pred_tpr, pred_fpr=pred_fpr,
        book_sd=book_sd, nonmember_scores=s[nonmember],
        ci=ci, seed=seed)
    cal.warnings = _warnings(cal, evaluation["warnings"])
    return cal


def _warnings(cal: Calibration, evaluation_warnings: list[str]) -> list[str]:
    """What limits the evidence of this calibration, in plain words."""
    notes = []
    if min(cal.n_member_books, cal.n_nonmember_books) < FEW_BOOKS:
        notes.append(f"only {cal.n_member_books} member and {cal.n_nonmember_books} non-member calibration books: "
                     "the intervals rest on very few books and are rough")
    if cal.target_fpr is not None and cal.n_nonmember_snippets < math.ceil(1 / cal.target_fpr - 1e-9):
        notes.append(f"{cal.n_nonmember_snippets} non-member snippets cannot resolve an FPR of {cal.target_fpr:.1%}")
    if not cal.informative:
        notes.append(f"the method does not separate the calibration books (AUROC {cal.auroc:.2f}, interval "
                     f"{cal.auroc_ci[0]:.2f}–{cal.auroc_ci[1]:.2f}; TPR {cal.tpr:.1%} at FPR {cal.fpr:.1%}): "
                     "no verdict can rest on it")
    if max(cal.n_member_books, cal.n_nonmember_books) < 2:
        notes.append("with one book per class the spread between books cannot be estimated; the prevalence "
                     "intervals ignore it and are too narrow")
    notes += evaluation_warnings
    return notes
