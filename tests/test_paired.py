"""DeLong's test and the paired bootstrap against independent computations: the O(n²) placement-value definition in
float64 with DeLong's covariance written out, a case computed by hand, a naive bootstrap with scikit-learn's AUROC,
and the agreement of the two intervals on a larger correlated case."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from mia_core.paired import delong, paired_bootstrap


def psi(x: float, y: float) -> float:
    """The Mann–Whitney kernel: 1 when the member scores above the non-member, ½ on a tie, else 0."""
    return 1.0 if x > y else 0.5 if x == y else 0.0


def naive_delong(labels, a, b) -> tuple[float, float]:
    """(ΔAUROC = b − a, its DeLong variance) from the definitions, loop by loop (DeLong et al. 1988, eqs. 2–5)."""
    labels = np.asarray(labels)
    scores = [np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)]
    members, nonmembers = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    m, n = len(members), len(nonmembers)
    v10 = [[sum(psi(s[i], s[j]) for j in nonmembers) / n for i in members] for s in scores]
    v01 = [[sum(psi(s[i], s[j]) for i in members) / m for j in nonmembers] for s in scores]
    auc = [sum(v) / m for v in v10]

    def cov(v, r, t, k, centre):
        return sum((v[r][i] - centre[r]) * (v[t][i] - centre[t]) for i in range(k)) / (k - 1)

    s10 = [[cov(v10, r, t, m, auc) for t in range(2)] for r in range(2)]
    s01 = [[cov(v01, r, t, n, auc) for t in range(2)] for r in range(2)]
    var = sum(sign * (s10[r][t] / m + s01[r][t] / n)
              for r, t, sign in [(0, 0, 1), (1, 1, 1), (0, 1, -1), (1, 0, -1)])
    return auc[1] - auc[0], var


def test_the_hand_computed_case():
    """Members 0.35, 0.8 and non-members 0.1, 0.4 under a (AUROC 3/4); b separates them (AUROC 1). Placements of a:
    members 1/2 and 1, non-members 1 and 1/2, each with variance 1/8 (n − 1 = 1); b's are constant. So
    Var(Δ) = (1/8)/2 + (1/8)/2 = 1/8, z = (1/4)/√(1/8) = 1/√2."""
    r = delong([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], [0.1, 0.2, 0.3, 0.4])
    assert (r.auroc_a, r.auroc_b, r.delta) == (0.75, 1.0, 0.25)
    assert r.se == pytest.approx(math.sqrt(1 / 8), abs=1e-15) and r.z == pytest.approx(1 / math.sqrt(2), abs=1e-15)
    assert r.p == pytest.approx(2 * norm.sf(1 / math.sqrt(2)), abs=1e-15)
    assert r.ci == pytest.approx((0.25 - 1.959963984540054 * math.sqrt(1 / 8), 0.25 + 1.959963984540054 *
                                  math.sqrt(1 / 8)), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_delong_matches_the_quadratic_definition_with_ties(seed):
    """7 members and 6 non-members, scores rounded to one decimal so that ties occur within and across classes."""
    rng = np.random.default_rng(seed)
    labels = np.array([1] * 7 + [0] * 6)
    a = np.round(rng.normal(size=13) + 0.8 * labels, 1)
    b = np.round(0.5 * a + rng.normal(size=13) * 0.6, 1)
    assert len(np.unique(a)) < 13 or len(np.unique(b)) < 13  # ties present
    delta, var = naive_delong(labels, a, b)
    r = delong(labels, a, b)
    assert r.delta == pytest.approx(delta, abs=1e-12) and r.se == pytest.approx(math.sqrt(var), abs=1e-12)
    assert r.auroc_a == pytest.approx(roc_auc_score(labels, a), abs=1e-12)
    assert r.auroc_b == pytest.approx(roc_auc_score(labels, b), abs=1e-12)
    assert r.p == pytest.approx(2 * norm.sf(abs(delta) / math.sqrt(var)), abs=1e-12)


def test_identical_scores_differ_by_nothing():
    rng = np.random.default_rng(3)
    labels = np.array([1] * 40 + [0] * 40)
    s = rng.normal(size=80) + labels
    r = delong(labels, s, s)
    assert (r.delta, r.se, r.z, r.p, r.ci) == (0.0, 0.0, 0.0, 1.0, (0.0, 0.0))
    assert paired_bootstrap(labels, s, s, n_boot=200).ci == (0.0, 0.0)


def correlated_case(n: int = 600, seed: int = 5):
    """Two scores sharing a per-text component (so their AUROCs are correlated), b carrying more membership signal."""
    rng = np.random.default_rng(seed)
    labels = np.repeat([1, 0], n // 2)
    shared = rng.normal(size=n)
    return labels, shared + 0.5 * labels + 0.7 * rng.normal(size=n), shared + 0.9 * labels + 0.7 * rng.normal(size=n)


def test_delong_and_the_paired_bootstrap_agree_on_a_large_case():
    """600 texts: the bootstrap's interval is centred within 0.005 of DeLong's and as wide within 10%; both exclude 0
    here, and swapping the runs flips the sign and keeps p."""
    labels, a, b = correlated_case()
    test, boot = delong(labels, a, b), paired_bootstrap(labels, a, b, n_boot=4000, seed=1)
    assert boot.n_used == 4000 and boot.skipped == 0
    assert (boot.ci[0] + boot.ci[1]) / 2 == pytest.approx(test.delta, abs=0.005)
    assert (boot.ci[1] - boot.ci[0]) == pytest.approx(test.ci[1] - test.ci[0], rel=0.10)
    assert test.ci[0] > 0 and boot.ci[0] > 0 and test.p < 0.01
    swapped = delong(labels, b, a)
    assert swapped.delta == pytest.approx(-test.delta, abs=1e-15) and swapped.p == pytest.approx(test.p, abs=1e-15)


def test_the_paired_bootstrap_is_the_naive_one():
    """The same seeded resamples of the texts, each scored by scikit-learn for both vectors: the same interval. The
    generator's draws are those of one (n_boot, n_texts) call, as the module takes them."""
    labels, a, b = correlated_case(60, seed=7)
    got = paired_bootstrap(labels, a, b, n_boot=300, seed=11)
    idx = np.random.default_rng(11).integers(0, 60, (300, 60))
    deltas = [roc_auc_score(labels[i], b[i]) - roc_auc_score(labels[i], a[i]) for i in idx if 0 < labels[i].sum() < 60]
    assert got.n_used == len(deltas) and got.seed == 11
    assert got.ci == pytest.approx(tuple(np.percentile(deltas, [2.5, 97.5])), abs=1e-12)
    assert paired_bootstrap(labels, a, b, n_boot=300, seed=11) == got  # seeded: repeatable


def test_resamples_with_one_class_are_skipped_and_counted():
    """2 members among 6 texts: P(no member in a resample) = (4/6)^6 ≈ 8.8%, so some of 400 resamples are skipped."""
    labels = np.array([1, 1, 0, 0, 0, 0])
    r = paired_bootstrap(labels, [5, 4, 3, 2, 1, 0], [0, 4, 3, 2, 1, 5], n_boot=400, seed=0)
    assert r.skipped > 0 and r.n_used + r.skipped == 400
    assert 0.4 * 400 * (4 / 6) ** 6 < r.skipped < 2 * 400 * (4 / 6) ** 6


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="needs members and non-members"):
        delong([1, 1, 1], [1, 2, 3], [3, 2, 1])
    with pytest.raises(ValueError, match="shape"):
        delong([1, 0, 1], [1, 2, 3], [3, 2])
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap([1, 0], [1, float("nan")], [1, 2])
