"""DE-COP over a whole run (METHODS-API.md §19): the position-bias calibration, each book's accuracy, and the audited
books against the clean books run the same way — z, empirical percentile and a one-sided cluster bootstrap over
passages. A pure function of the books' stored results, so a verified record gives the same numbers.

Do not copy the authors' `3_get_results_blackbox.py`: it reports an in-sample, Youden-thresholded balanced accuracy
as "AUC". `book_auc` is the true ROC AUC of the books' accuracies, for labelled books.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from sklearn.metrics import roc_auc_score

from .decop import predicted

#: Clean books below which no comparison is made (§19: "≥ 10 clean books run identically").
MIN_CLEAN_BOOKS = 10
#: Bootstrap resamples of a book's passages, and their seed (ours).
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 19
#: One-sided level of the comparison (ours): z above its normal quantile and the bootstrap's lower bound above the
#: clean books' mean.
ALPHA = 0.05
Z_ONE_SIDED = 1.6448536269514722


def letter_means(results: Sequence[Mapping]) -> tuple[float, ...] | None:
    """`μ_ℓ`: each letter's mean probability over every question of the run with log-probs (all books, all 24 orders,
    so each letter holds the verbatim equally often and μ estimates pure position bias; ours, recorded)."""
    rows = [q[3] for r in results for q in r["questions"] if q[3] is not None]
    if not rows:
        return None
    return tuple(math.fsum(p[slot] for p in rows) / len(rows) for slot in range(4))


def calibrated_slot(p: Sequence[float], mu: Sequence[float]) -> int:
    """The argmax of `p'_ℓ = p_ℓ − μ_ℓ + 1/4` (the calibration that reproduces the authors' reviewer file)."""
    shifted = [p[s] - mu[s] + 0.25 for s in range(4)]
    return max(range(4), key=lambda s: shifted[s])


def correct(row: Sequence, mu: Sequence[float] | None) -> bool:
    """Whether a question was answered right: calibrated argmax (GL, when μ is known), else the raw prediction."""
    if mu is not None and row[3] is not None:
        return calibrated_slot(row[3], mu) == row[2]
    return predicted(row) == row[2]


def passage_scores(result: Mapping, mu: Sequence[float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per passage: questions right and questions asked (the bootstrap's clusters)."""
    right = np.zeros(result["n_passages"])
    asked = np.zeros(result["n_passages"])
    for row in result["questions"]:
        asked[row[0]] += 1
        right[row[0]] += correct(row, mu)
    return right, asked


def accuracy(result: Mapping, mu: Sequence[float] | None) -> float | None:
    right, asked = passage_scores(result, mu)
    return float(right.sum() / asked.sum()) if asked.sum() else None


def cluster_bootstrap(right: np.ndarray, asked: np.ndarray, threshold: float, *,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Resample passages with replacement: the one-sided (1 − ALPHA) lower bound of the accuracy, and the share of
    resamples at or below `threshold` (the clean books' mean) — a one-sided bootstrap p (ours)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(right), size=(resamples, len(right)))
    boot = right[picks].sum(axis=1) / asked[picks].sum(axis=1)
    return float(np.quantile(boot, ALPHA)), float(np.mean(boot <= threshold))


@dataclass(frozen=True)
class BookVerdict:
    """One audited book against the clean books (None where there are fewer than `MIN_CLEAN_BOOKS`)."""

    unit: str
    name: str
    accuracy: float | None
    accuracy_raw: float | None
    z: float | None
    percentile: float | None
    boot_lower: float | None
    boot_p: float | None

    @property
    def above_clean(self) -> bool:
        """z above the one-sided normal quantile and the bootstrap's lower bound above the clean mean (ours)."""
        return self.z is not None and self.z > Z_ONE_SIDED and self.boot_p is not None and self.boot_p < ALPHA


@dataclass(frozen=True)
class DecopSummary:
    """The run: μ (None at tier G), the clean books' accuracies and their mean and SD, and each audited book."""

    mu: tuple[float, ...] | None
    clean: dict[str, float]
    clean_mean: float | None
    clean_sd: float | None
    books: list[BookVerdict]

    @property
    def compared(self) -> bool:
        return len(self.clean) >= MIN_CLEAN_BOOKS


def summarize(results: Mapping[str, Mapping], roles: Mapping[str, str], names: Mapping[str, str]) -> DecopSummary:
    """Every book's calibrated accuracy; the clean books' ("control") mean and SD; each audited book ("book") with
    z, percentile (clean books below it, ties half) and the cluster bootstrap against the clean mean."""
    mu = letter_means(list(results.values()))
    scores = {u: accuracy(r, mu) for u, r in results.items()}
    clean = {names[u]: a for u, a in scores.items() if roles[u] == "control" and a is not None}
    values = np.array(list(clean.values()))
    mean = float(values.mean()) if len(values) else None
    sd = float(values.std(ddof=1)) if len(values) > 1 else None
    compared = len(values) >= MIN_CLEAN_BOOKS
    books = []
    for unit, result in results.items():
        if roles[unit] != "book":
            continue
        acc = scores[unit]
        z = percentile = lower = p = None
        if compared and acc is not None:
            z = (acc - mean) / sd if sd else (math.inf if acc > mean else -math.inf if acc < mean else 0.0)
            percentile = 100.0 * (np.sum(values < acc) + 0.5 * np.sum(values == acc)) / len(values)
            lower, p = cluster_bootstrap(*passage_scores(result, mu), mean)
        books.append(BookVerdict(unit, names[unit], acc, result.get("accuracy_raw"), z,
                                 None if percentile is None else float(percentile), lower, p))
    return DecopSummary(mu, clean, mean, sd, books)


def book_auc(accuracies: Sequence[float], members: Sequence[bool]) -> float:
    """The ROC AUC of book accuracies for labelled books (members = True): the real AUC, not a thresholded accuracy."""
    return float(roc_auc_score(np.asarray(members, dtype=int), np.asarray(accuracies, dtype=float)))
