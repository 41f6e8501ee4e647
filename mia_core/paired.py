"""Two AUROCs on the same labelled texts, compared as a pair: DeLong's test and a paired bootstrap of the difference.

When two runs (two models, or two settings of a method) score the same texts, their AUROCs are correlated, and the
unpaired intervals of each overlap more than the difference deserves. Both answers here use the pairing:

- :func:`delong`: DeLong, DeLong & Clarke-Pearson (1988), "Comparing the areas under two or more correlated receiver
  operating characteristic curves: a nonparametric approach", Biometrics 44(3); computed with the midrank algorithm of
  Sun & Xu (2014), "Fast implementation of DeLong's algorithm …", IEEE Signal Processing Letters 21(11). Written here:
  neither scipy nor scikit-learn offers it, and the small PyPI packages that do were not fit to depend on (one,
  MLstatkit 0.1.91, falls back silently to a bootstrap whose p-value is 0 for two identical score vectors).
- :func:`paired_bootstrap`: a percentile interval of ΔAUROC over seeded resamples of the texts, each resample the same
  texts for both score vectors (resamples with a single class are skipped, as :func:`metrics.evaluate` does).

ΔAUROC is always ``AUROC(b) − AUROC(a)``. Labels: 1 = member; scores: higher = member.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from .metrics import check_scores

__all__ = ["DeLong", "BootstrapDelta", "delong", "paired_bootstrap"]

#: Resampled score values held in memory at once by the paired bootstrap (rows × texts).
_BOOT_CELLS = 2_000_000


@dataclass(frozen=True)
class DeLong:
    """DeLong's test of AUROC(b) − AUROC(a): the difference, its standard error, a normal interval, z and the
    two-sided p-value. With a zero standard error: p = 1 when the difference is 0 too (e.g. identical scores), else
    z and p are NaN (the test is undefined; the bootstrap interval still speaks)."""

    auroc_a: float
    auroc_b: float
    delta: float
    se: float
    ci: tuple[float, float]
    z: float
    p: float
    n_members: int
    n_nonmembers: int


@dataclass(frozen=True)
class BootstrapDelta:
    """A percentile interval of AUROC(b) − AUROC(a) over `n_used` paired resamples (`skipped` had a single class)."""

    ci: tuple[float, float]
    n_boot: int
    seed: int
    n_used: int
    skipped: int


def _paired(labels, scores_a, scores_b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated labels and both score vectors (same length, finite); ValueError unless both classes are present."""
    y, a = check_scores(labels, scores_a)
    _, b = check_scores(labels, scores_b)
    if y.min() == y.max():
        raise ValueError(f"a paired AUROC comparison needs members and non-members; got only "
                         f"{'members' if y[0] else 'non-members'} ({y.size} texts)")
    return y, a, b


def delong(labels, scores_a, scores_b, *, ci: float = 0.95) -> DeLong:
    """DeLong's test for two correlated AUROCs on the same texts (Sun & Xu's midrank algorithm, O(n log n)).

    Parameters
    ----------
    labels : array-like of shape (n_texts,)
        1 = member, 0 = non-member; both classes must be present.
    scores_a, scores_b : array-like of shape (n_texts,)
        Finite scores of the same texts in the same order, higher = member.
    ci : float, default=0.95
        Level of the normal interval ΔAUROC ± z·SE.

    Examples
    --------
    >>> r = delong([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], [0.1, 0.2, 0.3, 0.4])
    >>> round(r.auroc_a, 3), round(r.auroc_b, 3), round(r.delta, 3)
    (0.75, 1.0, 0.25)
    """
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1) (got {ci})")
    y, a, b = _paired(labels, scores_a, scores_b)
    members, nonmembers = y == 1, y == 0
    m, n = int(members.sum()), int(nonmembers.sum())
    both = np.vstack([a, b])  # (2, n_texts)
    rank_all = sps.rankdata(both, axis=1)  # midranks among all texts
    rank_in_members = sps.rankdata(both[:, members], axis=1)
    rank_in_nonmembers = sps.rankdata(both[:, nonmembers], axis=1)
    # Placement values: V10 = share of non-members a member beats (ties ½), V01 = share of members above a non-member.
    v10 = (rank_all[:, members] - rank_in_members) / n  # (2, m)
    v01 = 1.0 - (rank_all[:, nonmembers] - rank_in_nonmembers) / m  # (2, n)
    aurocs = v10.mean(axis=1)
    cov = np.cov(v10) / m + np.cov(v01) / n  # (2, 2); np.cov is the unbiased (n − 1) estimate, as in DeLong
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    se = math.sqrt(max(var, 0.0))
    delta = float(aurocs[1] - aurocs[0])
    half = float(sps.norm.ppf(0.5 + ci / 2)) * se
    if se > 0:
        z = delta / se
        p = float(2 * sps.norm.sf(abs(z)))
    else:
        z, p = (0.0, 1.0) if delta == 0 else (math.nan, math.nan)
    return DeLong(float(aurocs[0]), float(aurocs[1]), delta, se, (delta - half, delta + half), z, p, m, n)


def paired_bootstrap(labels, scores_a, scores_b, *, n_boot: int = 1000, seed: int = 0,
                     ci: float = 0.95) -> BootstrapDelta:
    """Percentile interval of AUROC(b) − AUROC(a) over seeded resamples of the texts, the same texts for both.

    Parameters
    ----------
    labels, scores_a, scores_b : array-like of shape (n_texts,)
        As for :func:`delong`.
    n_boot : int, default=1000
        Resamples; those with a single class are skipped and counted.
    seed : int, default=0
        Seed of the resampling generator (the same seed gives the same interval).
    ci : float, default=0.95
        Level of the percentile interval.
    """
    if not 0.0 < ci < 1.0 or int(n_boot) < 1:
        raise ValueError(f"need 0 < ci < 1 and n_boot >= 1 (got ci={ci}, n_boot={n_boot})")
    y, a, b = _paired(labels, scores_a, scores_b)
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOT_CELLS // y.size)
    deltas = []
    for start in range(0, int(n_boot), rows):
        idx = rng.integers(0, y.size, (min(rows, int(n_boot) - start), y.size))  # (resamples, n_texts)
        deltas.append(_resampled_auroc(y[idx], b[idx]) - _resampled_auroc(y[idx], a[idx]))
    delta = np.concatenate(deltas)
    kept = delta[np.isfinite(delta)]
    if kept.size == 0:
        return BootstrapDelta((math.nan, math.nan), int(n_boot), seed, 0, int(n_boot))
    lo, hi = np.percentile(kept, [50 * (1 - ci), 50 * (1 + ci)])
    return BootstrapDelta((float(lo), float(hi)), int(n_boot), seed, int(kept.size), int(n_boot) - int(kept.size))


def _resampled_auroc(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The AUROC of each row (Mann–Whitney, midranks); NaN for a row with a single class. y, s: (rows, n_texts)."""
    ranks = sps.rankdata(s, axis=1)
    m = y.sum(axis=1)
    n = y.shape[1] - m
    with np.errstate(divide="ignore", invalid="ignore"):
        auroc = ((ranks * y).sum(axis=1) - m * (m + 1) / 2) / (m * n)
    return np.where((m > 0) & (n > 0), auroc, np.nan)
