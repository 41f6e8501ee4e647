"""The statistics of a book audit: prevalence correction, the book-level test, BH adjustment, bootstraps.

Snippets of one book are not independent (neighbouring pages share names, style and topic), so every
interval resamples clusters: whole books for the calibration set, blocks of consecutive snippets
within an audited book.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps


def prevalence(rate, tpr, fpr):
    """Rogan–Gladen estimate `(rate − FPR)/(TPR − FPR)` clipped to [0, 1]; NaN where TPR ≤ FPR.

    The share of a book's snippets that were seen in training, correcting the raw rate for the
    false positives a clean book shows (≈ FPR) and the members the detector misses (1 − TPR).

    >>> float(prevalence(0.5, 0.9, 0.1))
    0.5
    """
    rate, tpr, fpr = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (rate, tpr, fpr)))
    denom = tpr - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(denom > 0, (rate - fpr) / np.where(denom > 0, denom, 1.0), np.nan)
    return np.clip(raw, 0.0, 1.0)


def benjamini_hochberg(p_values) -> np.ndarray:
    """BH-adjusted p-values (false discovery rate) across books; NaN entries stay NaN and are not counted."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = sps.false_discovery_control(p[finite], method="bh")
    return out


def book_test(book_scores, nonmember_scores) -> float:
    """One-sided Mann–Whitney U p-value: are the book's snippet scores higher than non-member snippets'?

    The U test treats snippets as independent; neighbouring snippets are not, so the p-value is
    optimistic for strongly autocorrelated books (said in every report's limits section).
    """
    book, reference = np.asarray(book_scores, float), np.asarray(nonmember_scores, float)
    if book.size == 0 or reference.size == 0:
        return math.nan
    return float(sps.mannwhitneyu(book, reference, alternative="greater").pvalue)


def block_length(n: int) -> int:
    """Block length of the moving-block bootstrap: ⌈n^(1/3)⌉, the usual rate for a mean."""
    return max(1, math.ceil(n ** (1 / 3)))


def block_bootstrap_means(values, n_boot: int, rng: np.random.Generator, *, block: int | None = None) -> np.ndarray:
    """(n_boot,) means of circular moving-block resamples of `values` (ordered along the book)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    b = block or block_length(n)
    n_blocks = math.ceil(n / b)
    starts = rng.integers(0, n, size=(n_boot, n_blocks))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(n_boot, -1)[:, :n] % n
    return x[idx].mean(axis=1)


def cluster_bootstrap_rates(hits, groups, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) shares of hits after resampling whole groups (books) with replacement.

    `hits` are 0/1 per snippet, `groups` the book of each snippet; each resample draws as many
    books as there are, so books with more snippets weigh more, as in the pooled estimate.
    """
    h = np.asarray(hits, dtype=np.float64)
    _, inverse = np.unique(np.asarray(groups), return_inverse=True)
    n_groups = int(inverse.max()) + 1
    sums = np.bincount(inverse, weights=h, minlength=n_groups)
    sizes = np.bincount(inverse, minlength=n_groups).astype(np.float64)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    return sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)


def percentile_interval(samples, ci: float) -> tuple[float, float]:
    """The central `ci` percentile interval of bootstrap samples (NaNs ignored; NaN if none)."""
    s = np.asarray(samples, dtype=np.float64)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return math.nan, math.nan
    lo, hi = np.percentile(s, [50 * (1 - ci), 50 * (1 + ci)])
    return float(lo), float(hi)


def between_book_sd(scores, labels, books) -> float:
    """Spread of book means beyond snippet noise: the one-way random-effects (ANOVA) estimate, pooled over classes.

    Books differ in how predictable they are (genre, style, repetition), which shifts all their
    snippet scores together; a clean but predictable book shows a higher rate than the calibration
    FPR. Returns 0 when no class has two books (the spread cannot be estimated).
    """
    s, y, g = np.asarray(scores, float), np.asarray(labels), np.asarray(books, dtype=object)
    estimates, weights = [], []
    for label in np.unique(y):
        frame = [(s[(y == label) & (g == book)]) for book in dict.fromkeys(g[y == label])]
        k, n = len(frame), sum(len(x) for x in frame)
        if k < 2 or n <= k:
            continue
        grand = np.concatenate(frame).mean()
        msb = sum(len(x) * (x.mean() - grand) ** 2 for x in frame) / (k - 1)
        msw = sum(((x - x.mean()) ** 2).sum() for x in frame) / (n - k)
        n0 = (n - sum(len(x) ** 2 for x in frame) / n) / (k - 1)
        estimates.append(max(0.0, (msb - msw) / n0))
        weights.append(k - 1)
    return float(np.sqrt(np.average(estimates, weights=weights))) if estimates else 0.0


def predictive_rates(scores, books, threshold: float, spread: float, n_boot: int,
                     rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) rates ≥ threshold for a *new* book of this class: whole books resampled, plus a book offset.

    Each resample draws the calibration books with replacement and an offset δ ~ N(0, spread²) for
    the new book, and counts the resampled snippets with score + δ ≥ threshold.
    """
    s = np.asarray(scores, float)
    _, inverse = np.unique(np.asarray(books, dtype=object), return_inverse=True)
    groups = [np.sort(s[inverse == i]) for i in range(int(inverse.max()) + 1)]
    sizes = np.array([x.size for x in groups], dtype=np.float64)
    draws = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    cut = threshold - rng.normal(0.0, spread, size=n_boot) if spread > 0 else np.full(n_boot, threshold)
    above = np.stack([x.size - np.searchsorted(x, cut, side="left") for x in groups], axis=1)  # (n_boot, n_groups)
    chosen = np.take_along_axis(above, draws, axis=1)
    return chosen.sum(axis=1) / sizes[draws].sum(axis=1)
