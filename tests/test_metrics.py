"""Tests for mia_core.metrics: checked against independent computations and hand-worked cases."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from mia_core.metrics import (
    auroc,
    evaluate,
    fpr_at_tpr,
    length_buckets,
    roc_curve,
    tpr_at_fpr,
)


def _random_case(n: int, seed: int, shift: float = 1.0, ties: bool = False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + shift * y
    return y, (np.round(s, 1) if ties else s)


def _mann_whitney_auc(y, s) -> float:
    """P(member score > non-member score) + 1/2 P(tie), by brute force over all pairs."""
    pos, neg = s[y == 1], s[y == 0]
    wins = sum(float(p > q) + 0.5 * float(p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def _full_roc(y, s):
    """Every threshold's (fpr, tpr), no points dropped: predict member iff score >= t."""
    pts = [(0.0, 0.0)]
    for t in np.unique(s)[::-1]:
        pred = s >= t
        pts.append((pred[y == 0].sum() / (y == 0).sum(), pred[y == 1].sum() / (y == 1).sum()))
    return np.array(pts)


# --- AUROC ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ties", [False, True])
def test_auroc_matches_pairwise_mann_whitney_and_sklearn(seed, ties):
    y, s = _random_case(120, seed, ties=ties)
    got = auroc(y, s)
    assert got == pytest.approx(_mann_whitney_auc(y, s), abs=1e-12)
    assert got == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert 0.6 < got < 0.95  # the shift of 1 SD makes it clearly informative


def test_auroc_orientation_and_perfect_separation():
    assert auroc([0, 0, 1, 1], [1, 2, 3, 4]) == 1.0
    assert auroc([0, 0, 1, 1], [4, 3, 2, 1]) == 0.0
    assert auroc([0, 1, 0, 1], [5, 5, 5, 5]) == 0.5  # all ties count 1/2
    assert auroc([False, True, True], [0.1, 0.2, 0.3]) == 1.0  # bool labels are accepted


# --- hand-computed ROC points --------------------------------------------------------------

# Sorted by score:  0.9 P | 0.8 P | 0.7 N | 0.6 P | 0.5 N | 0.4 N   (3 members, 3 non-members)
# Cumulative (FP, TP) when lowering the threshold: (0,1) (0,2) (1,2) (1,3) (2,3) (3,3),
# i.e. ROC points (FPR, TPR): (0,0) (0,1/3) (0,2/3) (1/3,2/3) (1/3,1) (2/3,1) (1,1).
# sklearn's drop_intermediate removes the collinear (2/3, 1) (middle of the TPR=1 run).
# AUROC by pairs: P0.9 beats 3 N, P0.8 beats 3 N, P0.6 beats 2 N (0.5, 0.4) -> 8/9.
HAND_Y = [1, 1, 0, 1, 0, 0]
HAND_S = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]


def test_hand_case_roc_points():
    fpr, tpr, thr = roc_curve(HAND_Y, HAND_S)
    np.testing.assert_allclose(fpr, [0, 0, 0, 1 / 3, 1 / 3, 1])
    np.testing.assert_allclose(tpr, [0, 1 / 3, 2 / 3, 2 / 3, 1, 1])
    assert thr[0] == np.inf and thr[-1] == 0.4
    assert auroc(HAND_Y, HAND_S) == pytest.approx(8 / 9)


@pytest.mark.parametrize(("x", "expected"), [
    (0.0, 2 / 3),    # only (0, 2/3) and below qualify
    (0.05, 2 / 3),
    (0.3, 2 / 3),    # (1/3, 1) is just beyond 0.3
    (1 / 3, 1.0),    # FPR <= x is inclusive
    (1.0, 1.0),
])
def test_hand_case_tpr_at_fpr(x, expected):
    assert tpr_at_fpr(HAND_Y, HAND_S, x) == pytest.approx(expected)


@pytest.mark.parametrize(("t", "expected"), [
    (0.0, 0.0),      # (0, 0) already has TPR >= 0
    (0.5, 0.0),      # first reached at (0, 2/3)
    (2 / 3, 0.0),
    (0.95, 1 / 3),   # default level: first point with TPR >= 0.95 is (1/3, 1)
    (1.0, 1 / 3),
])
def test_hand_case_fpr_at_tpr(t, expected):
    assert fpr_at_tpr(HAND_Y, HAND_S, t) == pytest.approx(expected)
    if t == 0.95:
        assert fpr_at_tpr(HAND_Y, HAND_S) == pytest.approx(expected)


def test_tied_blocks_follow_sklearn_drop_intermediate():
    # Blocks of tied scores, each 1 P + 1 N: full ROC is (0,0) (1/3,1/3) (2/3,2/3) (1,1);
    # drop_intermediate (the reference setting) removes the collinear (2/3, 2/3), so the
    # largest TPR with FPR <= 2/3 is 1/3, not 2/3. AUROC is unaffected (0.5 by pairs).
    y = [1, 0, 1, 0, 1, 0]
    s = [3, 3, 2, 2, 1, 1]
    assert tpr_at_fpr(y, s, 2 / 3) == pytest.approx(1 / 3)
    assert auroc(y, s) == pytest.approx(_mann_whitney_auc(np.array(y), np.array(s)))


@pytest.mark.parametrize("seed", [3, 4])
def test_tpr_fpr_match_threshold_sweep_on_continuous_scores(seed):
    # Without ties, dropped ROC points never change these operating points.
    y, s = _random_case(400, seed)
    full = _full_roc(y, s)
    for x in (0.0, 0.01, 0.05, 0.2):
        assert tpr_at_fpr(y, s, x) == full[full[:, 0] <= x, 1].max()
    for t in (0.5, 0.9, 0.95):
        assert fpr_at_tpr(y, s, t) == full[full[:, 1] >= t, 0].min()


# --- evaluate / bootstrap ------------------------------------------------------------------

def test_evaluate_keys_types_and_point_estimates():
    y, s = _random_case(500, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ~250 non-members cannot resolve 0.1% FPR
        r = evaluate(y, s)
    assert set(r) == {"auroc", "auroc_ci", "tpr@5%fpr", "tpr@5%fpr_ci", "tpr@1%fpr",
                      "tpr@1%fpr_ci", "tpr@0.1%fpr", "tpr@0.1%fpr_ci", "fpr@95%tpr",
                      "n_members", "n_nonmembers", "warnings"}
    assert r["auroc"] == pytest.approx(roc_auc_score(y, s))
    assert r["tpr@5%fpr"] == tpr_at_fpr(y, s, 0.05)
    assert r["tpr@1%fpr"] == tpr_at_fpr(y, s, 0.01)
    assert r["fpr@95%tpr"] == fpr_at_tpr(y, s, 0.95)
    assert (r["n_members"], r["n_nonmembers"]) == (int(y.sum()), int((y == 0).sum()))
    for key in ("auroc", "tpr@5%fpr", "tpr@1%fpr"):
        lo, hi = r[f"{key}_ci"]
        assert type(lo) is float and type(hi) is float
        assert lo <= r[key] <= hi and lo < hi
    # ~250 non-members: one false positive is already 0.4% > 0.1%, so no number is given for it (NaN, null in JSON)
    assert r["n_nonmembers"] < 1000 and math.isnan(r["tpr@0.1%fpr"]) and all(map(math.isnan, r["tpr@0.1%fpr_ci"]))
    assert any(w.startswith("TPR@0.1%FPR is not resolvable") for w in r["warnings"])
    assert type(r["auroc"]) is float and type(r["n_members"]) is int
    resolved = {k: v for k, v in r.items() if not k.startswith("tpr@0.1%")}
    assert json.loads(json.dumps(resolved)) == resolved


def test_bootstrap_deterministic_for_fixed_seed():
    y, s = _random_case(300, 6)
    kw = dict(n_boot=200, fprs=(0.05,))
    first = evaluate(y, s, seed=1, **kw)
    assert evaluate(y, s, seed=1, **kw) == first
    assert evaluate(y, s, seed=2, **kw)["auroc_ci"] != first["auroc_ci"]


def test_bootstrap_ci_narrows_with_more_data():
    def width(n):
        y, s = _random_case(n, 7)
        lo, hi = evaluate(y, s, n_boot=250, fprs=(0.05,))["auroc_ci"]
        return hi - lo

    small, large = width(100), width(2500)
    # CI width scales ~ 1/sqrt(n): a 25x larger sample should give ~5x narrower intervals.
    assert large < small / 3


def test_ci_level_orders_intervals():
    y, s = _random_case(300, 8)
    lo90, hi90 = evaluate(y, s, n_boot=200, fprs=(0.05,), ci=0.90)["auroc_ci"]
    lo99, hi99 = evaluate(y, s, n_boot=200, fprs=(0.05,), ci=0.99)["auroc_ci"]
    assert lo99 < lo90 and hi90 < hi99


def test_cluster_bootstrap_wider_when_groups_are_perfectly_correlated():
    # 30 "books" with 20 identical copies each: there are only 30 independent observations,
    # so resampling whole groups must give a clearly wider CI than resampling the 600 rows.
    rng = np.random.default_rng(9)
    n_groups, size = 30, 20
    g_label = np.arange(n_groups) % 2
    g_score = rng.normal(size=n_groups) + 0.8 * g_label
    y, s = np.repeat(g_label, size), np.repeat(g_score, size)
    groups = np.repeat([f"book-{i}" for i in range(n_groups)], size)
    kw = dict(n_boot=300, fprs=(0.05,))
    plain = evaluate(y, s, **kw)
    cluster = evaluate(y, s, groups=groups, **kw)
    assert plain["auroc"] == cluster["auroc"]  # the point estimate does not depend on groups
    w_plain = plain["auroc_ci"][1] - plain["auroc_ci"][0]
    w_cluster = cluster["auroc_ci"][1] - cluster["auroc_ci"][0]
    assert w_cluster > 2.5 * w_plain  # ~sqrt(20) ~ 4.5x expected


def test_singleton_groups_equal_plain_bootstrap():
    y, s = _random_case(200, 10)
    kw = dict(n_boot=200, fprs=(0.05,), seed=3)
    assert evaluate(y, s, groups=np.arange(200), **kw) == evaluate(y, s, **kw)


def test_degenerate_resamples_are_skipped_and_reported():
    # 1 member in 20: P(a resample has no member) = (19/20)^20 ~ 36%.
    y = np.r_[1, np.zeros(19, dtype=int)]
    s = np.arange(20.0)[::-1]
    with pytest.warns(UserWarning, match="single class"):
        r = evaluate(y, s, n_boot=200, fprs=(0.1,))  # 19 non-members resolve 10% FPR
    assert any("single class" in w for w in r["warnings"])
    assert r["auroc"] == 1.0 and all(np.isfinite(r["auroc_ci"]))


# --- FPR resolution warnings ---------------------------------------------------------------

def test_fpr_resolution_warning_with_50_nonmembers():
    rng = np.random.default_rng(11)
    y = np.r_[np.ones(50, dtype=int), np.zeros(50, dtype=int)]
    s = rng.normal(size=100) + y
    with pytest.warns(UserWarning, match="not resolvable"):
        r = evaluate(y, s, n_boot=200)
    text = " ".join(r["warnings"])
    assert "TPR@0.1%FPR" in text and "TPR@1%FPR" in text
    assert "TPR@5%FPR" not in text  # 50 >= 1/0.05 = 20
    assert len(r["warnings"]) == 2


@pytest.mark.parametrize(("n_neg", "warned"), [(99, True), (100, False)])
def test_fpr_resolution_threshold_is_one_over_fpr(n_neg, warned):
    y = np.r_[np.ones(30, dtype=int), np.zeros(n_neg, dtype=int)]
    s = np.arange(y.size, dtype=float)[::-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate(y, s, n_boot=50, fprs=(0.01,))
    assert any("TPR@1%FPR" in w for w in r["warnings"]) is warned


# --- single class and bad input ------------------------------------------------------------

@pytest.mark.parametrize("label", [0, 1])
def test_single_class_gives_nan_and_warning(label):
    y, s = [label] * 5, [0.1, 0.2, 0.3, 0.4, 0.5]
    for fn in (auroc, lambda y, s: tpr_at_fpr(y, s, 0.05), fpr_at_tpr):
        with pytest.warns(UserWarning, match="only"):
            assert math.isnan(fn(y, s))
    with pytest.warns(UserWarning, match="only"):
        fpr, tpr, _ = roc_curve(y, s)
    assert np.isnan(fpr).any() or np.isnan(tpr).any()
    with pytest.warns(UserWarning) as record:  # also FPR-resolution warnings (<= 5 non-members)
        r = evaluate(y, s, n_boot=20)
    assert any(str(w.message).startswith("only") for w in record)
    assert math.isnan(r["auroc"]) and math.isnan(r["fpr@95%tpr"])
    assert all(math.isnan(v) for v in r["auroc_ci"] + r["tpr@5%fpr_ci"])
    assert r["n_members"] == 5 * label and r["n_nonmembers"] == 5 * (1 - label)
    assert any("only" in w for w in r["warnings"])


@pytest.mark.parametrize("labels", [
    [0, 1, 2], ["a", "b", "a"], ["0", "1", "1"], [0.5, 1, 0], [0, 1, np.nan], [None, 1, 0],
])
def test_bad_labels_raise(labels):
    with pytest.raises(ValueError, match="labels"):
        auroc(labels, [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="labels"):
        evaluate(labels, [0.1, 0.2, 0.3])


@pytest.mark.parametrize(("labels", "scores", "match"), [
    ([0, 1, 1], [0.1, 0.2], "shape"),
    ([0, 1, 1], [0.1, np.nan, 0.3], "finite"),
    ([0, 1, 1], [0.1, np.inf, 0.3], "finite"),
    ([], [], "labels"),
])
def test_bad_scores_raise(labels, scores, match):
    with pytest.raises(ValueError, match=match):
        auroc(labels, scores)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr(HAND_Y, HAND_S, 1.5)
    with pytest.raises(ValueError, match="tpr"):
        fpr_at_tpr(HAND_Y, HAND_S, -0.1)
    with pytest.raises(ValueError, match="groups"):
        evaluate(HAND_Y, HAND_S, groups=[1, 2])
    with pytest.raises(ValueError, match="ci"):
        evaluate(HAND_Y, HAND_S, ci=1.5)


# --- length buckets ------------------------------------------------------------------------

def test_length_buckets_edges_inclusive():
    got = length_buckets([1, 32, 33, 64, 65, 128, 129, 256, 257, 1000])
    assert got.tolist() == ["≤32", "≤32", "33–64", "33–64", "65–128", "65–128",
                            "129–256", "129–256", ">256", ">256"]


def test_length_buckets_counts_words_and_custom_edges():
    assert length_buckets(["one two three", "a " * 11], edges=(3, 10)).tolist() == [
        "≤3", ">10"]
    assert length_buckets([5, 6, 7, 8], edges=(5, 7)).tolist() == ["≤5", "6–7", "6–7", ">7"]
    with pytest.raises(ValueError, match="edges"):
        length_buckets([1], edges=(64, 32))
