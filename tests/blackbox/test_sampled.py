"""§18's statistics against independent computations (METHODS-API.md §18, METHODS-FIELD.md §11): Clopper–Pearson
from the Beta distribution's definition and scipy's binomtest, n_needed by exact rational search, the GL bound by hand
on four tokens and against the true probability of a small explicit model, and the per-text aggregation by hand."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest

from mia_core.blackbox.sampled import (GreedySummary, WindowResult, clopper_pearson, contained_match, estimate_window,
                                       gl_upper_bound, greedy_summary, is_discoverable, n_needed, one_sided_upper,
                                       per_text, strict_match)

ALPHA = 0.05


def test_clopper_pearson_at_zero_and_at_n_from_the_beta_cdf():
    """Beta(1, n) has CDF 1 − (1 − x)^n and Beta(n, 1) has CDF x^n, so the ends are closed forms."""
    assert clopper_pearson(0, 10, ALPHA) == (0.0, pytest.approx(1 - (ALPHA / 2) ** (1 / 10), rel=1e-12))
    assert clopper_pearson(10, 10, ALPHA) == (pytest.approx((ALPHA / 2) ** (1 / 10), rel=1e-12), 1.0)
    lo, _ = clopper_pearson(1, 50, ALPHA)  # B(α/2; 1, n): 1 − (1 − α/2)^{1/n}
    assert lo == pytest.approx(1 - (1 - ALPHA / 2) ** (1 / 50), rel=1e-12)


@pytest.mark.parametrize(("k", "n"), [(7, 20), (1, 3), (50, 100), (99, 100)])
def test_clopper_pearson_matches_binomtest(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - ALPHA, method="exact")
    assert clopper_pearson(k, n, ALPHA) == (pytest.approx(ci.low, rel=1e-9), pytest.approx(ci.high, rel=1e-9))


def test_clopper_pearson_refuses_bad_counts():
    for k, n in [(-1, 5), (6, 5), (0, 0)]:
        with pytest.raises(ValueError, match="0 ≤ k ≤ n"):
            clopper_pearson(k, n)
    with pytest.raises(TypeError):
        clopper_pearson(1.5, 5)
    with pytest.raises(ValueError, match="alpha"):
        clopper_pearson(1, 5, 1.0)


def test_one_sided_upper_is_about_three_over_n():
    assert one_sided_upper(100, ALPHA) == pytest.approx(1 - ALPHA ** (1 / 100), rel=1e-12)
    assert one_sided_upper(100, ALPHA) == pytest.approx(3 / 100, rel=0.02)


def least_n(p_z: Fraction, p: Fraction) -> int:
    """The least n with 1 − (1 − p_z)^n ≥ p, by exact rational search."""
    n = 1
    while 1 - (1 - p_z) ** n < p:
        n += 1
    return n


@pytest.mark.parametrize(("p_z", "p", "expected"), [
    (0.5, 0.5, 1), (0.5, 0.75, 2), (0.5, 0.95, 5), (0.1, 0.5, 7), (0.1, 0.95, 29), (0.9, 0.95, 2), (0.99, 0.5, 1)])
def test_n_needed_by_hand(p_z, p, expected):
    assert n_needed(p_z, p) == expected == least_n(Fraction(p_z), Fraction(p))


@pytest.mark.parametrize("p_z", [0.3, 0.05, 0.2, 1 / 3, 0.01, 0.125])
@pytest.mark.parametrize("p", [0.5, 0.95, 0.75, 0.875])
def test_n_needed_against_exact_search(p_z, p):
    assert n_needed(p_z, p) == least_n(Fraction(p_z), Fraction(p))


def test_n_needed_edges():
    assert n_needed(0.0, 0.5) == math.inf
    assert n_needed(1.0, 0.95) == 1.0
    assert n_needed(5e-324, 0.5) == math.inf  # log1p(−p_z) rounds to −0
    tiny = n_needed(1e-12, 0.5)
    assert tiny == pytest.approx(math.log(2) * 1e12, rel=1e-6)
    assert is_discoverable(1e-12, int(tiny), 0.5) and not is_discoverable(1e-12, int(tiny) - 1, 0.5)
    for bad in [(-0.1, 0.5), (1.1, 0.5), (math.nan, 0.5), (0.5, 1.0), (0.5, 0.0)]:
        with pytest.raises(ValueError):
            n_needed(*bad)


def test_is_discoverable():
    assert is_discoverable(0.5, 1, 0.5) and not is_discoverable(0.5, 1, 0.6)
    assert is_discoverable(0.5, 2, 0.75)  # 1 − 0.25 = 0.75 exactly
    assert not is_discoverable(0.0, 10**9, 0.5) and is_discoverable(1.0, 1, 0.95)
    with pytest.raises(ValueError, match="tries"):
        is_discoverable(0.5, 0, 0.5)


def test_strict_and_contained_matches():
    suffix = " Mr. Dursley was the director"
    assert strict_match("\n  Mr. Dursley was the director of a firm", suffix)
    assert not strict_match("Sure! Mr. Dursley was the director", suffix)
    assert contained_match("Sure! Mr. Dursley was the director", suffix)
    assert not strict_match("mr. dursley was the director", suffix)  # exact, case included
    assert not contained_match("Mr. Dursley was director", suffix)
    for response in ["Mr. Dursley was the director", "  Mr. Dursley was the directors"]:
        assert strict_match(response, suffix) and contained_match(response, suffix)  # strict implies contained
    with pytest.raises(ValueError, match="empty"):
        strict_match("anything", "  ")


def test_estimate_window_with_matches():
    est = estimate_window([True] * 60 + [False] * 40, n=100)
    ci = binomtest(60, 100).proportion_ci(confidence_level=0.95, method="exact")
    assert (est.k, est.n_s, est.p_hat) == (60, 100, 0.6)
    assert (est.p_lo, est.p_hi) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert est.p_hi_one_sided is None
    assert est.ps == (0.5, 0.95)
    assert est.n_needed_hat == (1.0, 4.0)  # log 0.05 / log 0.4 = 3.27
    assert est.n_needed_lo == tuple(float(least_n(Fraction(est.p_lo), Fraction(p))) for p in (0.5, 0.95))
    assert est.n_needed_hi == tuple(float(least_n(Fraction(est.p_hi), Fraction(p))) for p in (0.5, 0.95))
    assert est.discoverable == (True, True)
    assert est.observation == "extracted in 100 tries (k = 60)"


def test_one_match_in_a_hundred_depends_on_the_adversarys_tries():
    """p_lo = 1 − 0.975^{1/100} ≈ 2.53e-4: 1000 tries give 1 − (1 − p_lo)^1000 ≈ 0.22, 3000 give ≈ 0.53."""
    hits = [True] + [False] * 99
    p_lo = 1 - (1 - ALPHA / 2) ** (1 / 100)
    few, many = estimate_window(hits, n=1000), estimate_window(hits, n=3000)
    assert few.p_lo == pytest.approx(p_lo, rel=1e-12)
    assert few.discoverable == (False, False) and many.discoverable == (True, False)
    assert few.extracted and few.observation.startswith("extracted in 100 tries")
    assert (few.n_s, few.n) == (100, 1000)


def test_estimate_window_without_matches():
    est = estimate_window([False] * 100)
    assert (est.k, est.p_hat, est.p_lo) == (0, 0.0, 0.0)
    assert est.p_hi == pytest.approx(1 - (ALPHA / 2) ** (1 / 100))
    assert est.p_hi_one_sided == pytest.approx(1 - ALPHA ** (1 / 100))
    assert est.n_needed_hat == est.n_needed_lo == (math.inf, math.inf)
    assert est.n_needed_hi == tuple(n_needed(est.p_hi, p) for p in (0.5, 0.95))
    assert est.discoverable == (False, False)
    assert not est.extracted and est.observation is None


def test_estimate_window_refuses_bad_input():
    for bad in [[], [True, "yes"], [None]]:
        with pytest.raises(ValueError, match="booleans"):
            estimate_window(bad)
    with pytest.raises(ValueError, match="tries"):
        estimate_window([True], n=0)
    with pytest.raises(ValueError, match="p must be"):
        estimate_window([True], ps=(1.5,))
    assert estimate_window(np.array([True, False])).k == 1


def test_greedy_summary_counts_repeats():
    assert greedy_summary([True, False, True]) == GreedySummary(2, 3)
    assert greedy_summary([True, False, True]).rate == pytest.approx(2 / 3)


# Tier GL on four suffix tokens z; the first two are reproduced, the response diverges at the third.
Z = ["The", " cat", " sat", " down"]
G = ["The", " cat", " ran", "."]
LP = [-0.1, -0.2, -0.5, -0.3]
TOP_FIRST = [{"The": -0.1, "A": -2.5}, {" cat": -0.2, " dog": -1.9}]


def top_at_third(probs: dict[str, float]) -> list[dict[str, float]]:
    """The four positions' top lists, with `probs` (as probabilities) listed at the third."""
    return TOP_FIRST + [{t: math.log(q) for t, q in probs.items()}, {".": -0.3}]


def test_gl_bound_when_the_next_suffix_token_is_listed():
    bound = gl_upper_bound(G, LP, top_at_third({" ran": 0.6, " sat": 0.2, " is": 0.1}), Z)
    assert (bound.j, bound.side, bound.exact_path) == (2, "in_top", False)
    assert bound.log_p == pytest.approx(-0.1 - 0.2 + math.log(0.2))


def test_gl_bound_when_the_kth_probability_is_smaller_than_the_rest():
    bound = gl_upper_bound(G, LP, top_at_third({" ran": 0.5, " was": 0.2, " is": 0.05}), Z)  # rest 0.25 > 0.05
    assert (bound.side, bound.log_p) == ("kth", pytest.approx(-0.3 + math.log(0.05)))


def test_gl_bound_when_the_rest_is_smaller_than_the_kth_probability():
    bound = gl_upper_bound(G, LP, top_at_third({" ran": 0.6, " was": 0.25, " is": 0.1}), Z)  # rest 0.05 < 0.1
    assert (bound.side, bound.log_p) == ("rest", pytest.approx(-0.3 + math.log(0.05)))


def test_gl_full_match_is_the_exact_path_log_prob():
    bound = gl_upper_bound(Z + ["."], [-0.1, -0.2, -0.3, -0.4, -0.5], [{}] * 5, Z)
    assert (bound.exact_path, bound.j, bound.side) == (True, 4, "path")
    assert bound.log_p == pytest.approx(-1.0)


def test_gl_edge_cases():
    ended = gl_upper_bound(G[:2], LP[:2], TOP_FIRST, Z)  # the response stops on z's prefix: u_{j+1} ≤ 1
    assert (ended.j, ended.side, ended.log_p) == (2, "ended", pytest.approx(-0.3))
    first = gl_upper_bound(["A"], [-2.5], [{"A": -2.5, "The": -0.1}], Z)  # diverges at once
    assert (first.j, first.side, first.log_p) == (0, "in_top", -0.1)
    unlisted = gl_upper_bound(G, LP, TOP_FIRST + [{}, {}], Z)
    assert (unlisted.side, unlisted.log_p) == ("none", pytest.approx(-0.3))
    rounded = gl_upper_bound(G, LP, TOP_FIRST + [{" ran": 0.0, " is": -30.0}, {}], Z)  # listed mass > 1
    assert (rounded.side, rounded.log_p) == ("kth", pytest.approx(-30.3))


def test_gl_refuses_nan_and_positive_log_probs_naming_the_position():
    with pytest.raises(ValueError, match=r"generated_logprobs\[2\]"):
        gl_upper_bound(G, [-0.1, -0.2, math.nan, -0.3], top_at_third({" ran": 0.6}), Z)
    with pytest.raises(ValueError, match=r"top_logprobs\[1\]\[' dog'\]"):
        gl_upper_bound(G, LP, [TOP_FIRST[0], {" cat": -0.2, " dog": 0.5}, {}, {}], Z)
    with pytest.raises(ValueError, match="differ in length"):
        gl_upper_bound(G, LP[:3], top_at_third({}), Z)
    with pytest.raises(ValueError, match="no tokens"):
        gl_upper_bound(G, LP, top_at_third({}), [])


def test_gl_bound_holds_against_a_small_explicit_model():
    """A model whose every next-token distribution is known: the bound is ≥ the true log p(z) for sampled responses,
    and equal to it when the response spells z."""
    rng = np.random.default_rng(0)
    vocab, s, k_top = ["a", "b", "c", "d", "e"], 3, 2
    tables: dict[tuple[str, ...], np.ndarray] = {}

    def dist(prefix: tuple[str, ...]) -> np.ndarray:
        if prefix not in tables:
            tables[prefix] = rng.dirichlet(np.full(len(vocab), 0.5))
        return tables[prefix]

    sides = set()
    for _ in range(300):
        z = [vocab[i] for i in rng.integers(0, len(vocab), s)]
        true = sum(math.log(dist(tuple(z[:t]))[vocab.index(z[t])]) for t in range(s))
        generated, logprobs, tops = [], [], []
        for t in range(s + 1):
            q = dist(tuple(generated))
            token = vocab[rng.choice(len(vocab), p=q)]
            order = np.argsort(-q)[:k_top]
            tops.append({vocab[i]: float(np.log(q[i])) for i in order})
            generated.append(token)
            logprobs.append(float(np.log(q[vocab.index(token)])))
        bound = gl_upper_bound(generated, logprobs, tops, z)
        sides.add(bound.side)
        if bound.exact_path:
            assert bound.log_p == pytest.approx(true)
        else:
            assert bound.log_p >= true - 1e-9
    assert sides == {"path", "in_top", "kth", "rest"}


def window(start, end, hits, greedy=None, refusals=0, responses=None):
    """A WindowResult from strict hits."""
    est = estimate_window(hits)
    return WindowResult(start, end, est, greedy, refusals, len(hits) if responses is None else responses)


def test_per_text_by_hand():
    windows = [
        window(0, 10, [True, False, False, False, False], GreedySummary(1, 3), refusals=1),  # p̂ 0.2
        window(5, 15, [True, True, True, False, False], GreedySummary(0, 3), refusals=0),  # p̂ 0.6
        window(12, 16, [False] * 5, None, refusals=4),  # p̂ 0
    ]
    summary = per_text(windows, 20)
    expected = [0.2] * 5 + [0.6] * 10 + [0.0] + [math.nan] * 4
    np.testing.assert_array_equal(summary.max_p_hat, expected)
    his = [w.estimate.p_hi for w in windows]
    np.testing.assert_allclose(summary.max_p_hi[[0, 7, 15, 19]], [his[0], max(his[:2]), his[2], math.nan])
    assert summary.windows == 3
    assert summary.share_extracted == pytest.approx(2 / 3)
    assert summary.share_greedy == 0.5  # the third window has no greedy repeats
    assert summary.refusal_rate == pytest.approx(5 / 15)


def test_per_text_edges():
    empty = per_text([], 4)
    assert empty.windows == 0 and np.isnan(empty.max_p_hat).all()
    assert math.isnan(empty.share_extracted) and math.isnan(empty.share_greedy) and math.isnan(empty.refusal_rate)
    with pytest.raises(ValueError, match="past the text"):
        per_text([window(0, 10, [True])], 5)
    with pytest.raises(ValueError, match="char_start < char_end"):
        window(4, 4, [True])
    with pytest.raises(ValueError, match="refusals ≤ responses"):
        window(0, 4, [True], refusals=2, responses=1)
