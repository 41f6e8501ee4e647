"""Threshold calibration on known member and known non-member books (docs/methods.md, "Book and corpus audits").

The threshold holds a target FPR on the non-member snippets (default 5%) or maximises snippet
accuracy (the Min-K% book study). The TPR and FPR at that threshold carry exact (Clopper–Pearson)
intervals on effective snippet counts (a Kish design effect for snippets of one book), so zero
false positives never give a [0, 0] interval. Paired draws of a *new* book's TPR/FPR (calibration
books resampled, plus one book offset shared by both) feed every per-book prevalence interval.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import roc_curve

from .. import metrics
from .statistics import (book_offsets, centre_books, clopper_pearson, intraclass_correlation, kish_design_effect,
                         predictive_rates, variance_components)

RULES = ("fpr", "accuracy")
#: Below this many books of a class the intervals are rough, and the report says so.
FEW_BOOKS = 5
#: A verdict needs the calibration's FPR pinned down: the upper end of its interval at most this many times the
#: target FPR (50% for the default 5%; with `rule="accuracy"`, times the larger of the FPR found and 5%). A
#: convention, stated: with no false positive it asks for at least 6 effective non-member snippets (Clopper–Pearson
#: 95%: 1 − 0.025^(1/6) = 46%). The demo's 2 + 2 plays of 5 snippets reach 34.6% (its design effect 1.15). Fewer
#: snippets per book also fail the book test's own bar (`books.can_reach`).
FPR_SLACK = 10.0
#: The FPR the slack multiplies under `rule="accuracy"` at least (no target is set there).
FPR_FLOOR = 0.05
#: Which interval each number carries (reports and `Calibration.summary()` name them).
RATE_INTERVAL = ("Clopper–Pearson (exact binomial) on effective snippet counts: n / design effect, the Kish design "
                 "effect from the correlation of hits within a calibration book")
PREVALENCE_INTERVAL = ("exact binomial test of the book's effective hit count inverted over paired draws of a new "
                       "book's TPR/FPR (calibration books resampled, one between-book offset shared by both)")
BOOK_RATE_INTERVAL = ("Clopper–Pearson on the book's effective snippet count: n / serial design effect along the "
                      "book (Bartlett window of ⌈n^(1/3)⌉ snippets)")


@dataclass
class Calibration:
    """A threshold and how the detector behaves at it on the calibration books.

    `tpr_ci`/`fpr_ci` are Clopper–Pearson intervals on `n / tpr_deff` and `n / fpr_deff` effective
    snippets (`RATE_INTERVAL`). `pred_tpr`/`pred_fpr` are (n_boot,) paired draws of what a *new*
    book's TPR/FPR may be: calibration books resampled (their own offsets removed) plus one offset
    `book_sd · t_df` added to both; per-book prevalence intervals use these. `nonmember_scores` are
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
    tpr_deff: float
    fpr_deff: float
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

    @property
    def fpr_allowed(self) -> float:
        """The most the FPR's upper bound may be for verdicts to rest on this calibration (`FPR_SLACK`)."""
        target = self.target_fpr if self.target_fpr is not None else max(self.fpr, FPR_FLOOR)
        return min(1.0, FPR_SLACK * target)

    @property
    def supports_verdicts(self) -> bool:
        """Whether the FPR at the threshold is known well enough for a verdict (`FPR_SLACK`)."""
        return self.fpr_ci[1] <= self.fpr_allowed

    def summary(self) -> dict:
        """JSON-ready numbers for reports and the store (no arrays)."""
        keys = ("threshold", "rule", "target_fpr", "tpr", "fpr", "accuracy", "tpr_ci", "fpr_ci", "auroc", "auroc_ci",
                "n_member_books", "n_nonmember_books", "n_member_snippets", "n_nonmember_snippets", "tpr_deff", "fpr_deff",
                "book_sd", "ci", "seed", "warnings")
        intervals = {"rate_interval": RATE_INTERVAL, "book_rate_interval": BOOK_RATE_INTERVAL,
                     "prevalence_interval": PREVALENCE_INTERVAL, "auroc_interval": "percentile, whole books resampled"}
        return ({k: getattr(self, k) for k in keys} | {"informative": self.informative,
                                                       "supports_verdicts": self.supports_verdicts} | intervals)


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
    """Pick the threshold on labelled snippets; exact TPR/FPR intervals, a new book's TPR/FPR draws, AUROC.

    Parameters
    ----------
    scores, labels, books : array-like of shape (n_snippets,)
        Snippet scores (higher = member), 1/0 membership of the snippet's book, and its book name.
    rule, target_fpr : threshold rule, see `choose_threshold`.
    n_boot, seed, ci : predictive TPR/FPR draws and AUROC resamples, generator seed, interval level.
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
    between, within, df = variance_components(s, y, g)
    score_icc = between / (between + within) if between + within > 0 else math.nan
    tpr_deff, fpr_deff = (_design_effect(hits[mask], g[mask], score_icc) for mask in (member, nonmember))
    offsets = book_offsets(between, df, n_boot, rng)  # one per draw, shared by TPR and FPR
    pred_tpr = predictive_rates(centre_books(s[member], g[member], between, within), g[member], threshold, offsets, rng)
    pred_fpr = predictive_rates(centre_books(s[nonmember], g[nonmember], between, within), g[nonmember], threshold,
                                offsets, rng)
    with warnings.catch_warnings():  # its warnings are kept in `Calibration.warnings`
        warnings.simplefilter("ignore")
        evaluation = metrics.evaluate(y, s, n_boot=auroc_boot or n_boot, seed=seed, groups=g, ci=ci, fprs=())
    roc_fpr, roc_tpr, _ = metrics.roc_curve(y, s)
    n_books = (len(set(g[member])), len(set(g[nonmember])))
    tpr, fpr = float(hits[member].mean()), float(hits[nonmember].mean())
    n_tpr, n_fpr = member.sum() / tpr_deff, nonmember.sum() / fpr_deff
    cal = Calibration(
        threshold=threshold, rule=rule, target_fpr=target_fpr if rule == "fpr" else None,
        tpr=tpr, fpr=fpr, accuracy=float((hits == (y == 1)).mean()),
        tpr_ci=clopper_pearson(tpr * n_tpr, n_tpr, ci), fpr_ci=clopper_pearson(fpr * n_fpr, n_fpr, ci),
        auroc=float(evaluation["auroc"]), auroc_ci=tuple(evaluation["auroc_ci"]),
        n_member_books=n_books[0], n_nonmember_books=n_books[1],
        n_member_snippets=int(member.sum()), n_nonmember_snippets=int(nonmember.sum()),
        roc_fpr=roc_fpr, roc_tpr=roc_tpr, tpr_deff=tpr_deff, fpr_deff=fpr_deff, pred_tpr=pred_tpr, pred_fpr=pred_fpr,
        book_sd=math.sqrt(between), nonmember_scores=s[nonmember],
        ci=ci, seed=seed)
    cal.warnings = _warnings(cal, evaluation["warnings"])
    return cal


def _design_effect(hits: np.ndarray, books: np.ndarray, score_icc: float) -> float:
    """Kish design effect of a class's hit rate: the ICC of its hits, or of the scores when the hits cannot give one.

    With no hit (or only hits) in a class, or one book, the hits' ICC is undefined; the scores' ICC
    then bounds it from above (dichotomising a Gaussian score lowers its correlation), so the
    interval errs wide, never [0, 0]-narrow.
    """
    icc = intraclass_correlation(hits.astype(np.float64), books)
    return kish_design_effect(books, icc if np.isfinite(icc) else score_icc)


def weak_calibration_reason(cal: Calibration) -> str | None:
    """Why no verdict rests on this calibration's FPR, and how many more non-member snippets (and books like these)
    would pin it down; None when it supports verdicts."""
    if cal.supports_verdicts:
        return None
    n_effective = cal.n_nonmember_snippets / cal.fpr_deff
    needed = next((n for n in np.unique(np.geomspace(max(n_effective, 1), 10**7, 400).round())
                   if clopper_pearson(cal.fpr * n, n, cal.ci)[1] <= cal.fpr_allowed), None)
    text = (f"the false-positive rate at the threshold is {cal.fpr:.1%} with an interval up to {cal.fpr_ci[1]:.0%}, "
            f"more than {FPR_SLACK:g}× the {cal.fpr_allowed / FPR_SLACK:.0%} it should hold, from "
            f"{cal.n_nonmember_snippets} non-member snippets in {cal.n_nonmember_books} books")
    if needed is None:
        return text
    more = max(1, math.ceil(needed * cal.fpr_deff) - cal.n_nonmember_snippets)
    per_book = cal.n_nonmember_snippets / max(cal.n_nonmember_books, 1)
    return (f"{text}; about {more} more non-member snippets (some {math.ceil(more / per_book)} more non-member "
            f"books of this length, or longer books) would pin it down")


def _warnings(cal: Calibration, evaluation_warnings: list[str]) -> list[str]:
    """What limits the evidence of this calibration, in plain words."""
    notes = []
    if min(cal.n_member_books, cal.n_nonmember_books) < FEW_BOOKS:
        notes.append(f"only {cal.n_member_books} member and {cal.n_nonmember_books} non-member calibration books: "
                     "the intervals rest on very few books and are rough")
    if cal.target_fpr is not None and cal.n_nonmember_snippets < math.ceil(1 / cal.target_fpr - 1e-9):
        notes.append(f"{cal.n_nonmember_snippets} non-member snippets cannot resolve an FPR of {cal.target_fpr:.1%}")
    if cal.informative and (reason := weak_calibration_reason(cal)):
        notes.append(f"calibration too weak for a verdict: {reason}")
    if not cal.informative:
        notes.append(f"the method does not separate the calibration books (AUROC {cal.auroc:.2f}, interval "
                     f"{cal.auroc_ci[0]:.2f}–{cal.auroc_ci[1]:.2f}; TPR {cal.tpr:.1%} at FPR {cal.fpr:.1%}): "
                     "no verdict can rest on it")
    if max(cal.n_member_books, cal.n_nonmember_books) < 2:
        notes.append("with one book per class the spread between books cannot be estimated; the TPR, FPR and "
                     "prevalence intervals ignore it and are too narrow")
    notes += evaluation_warnings
    return notes
