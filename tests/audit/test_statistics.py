"""Book-audit statistics against hand-computed cases and a coverage simulation with known prevalence."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from mia_core.audit.books import VERDICTS, analyse_books, can_reach, verdict_key
from mia_core.audit.calibration import FPR_SLACK, calibrate, choose_threshold, weak_calibration_reason
from mia_core.audit.statistics import book_test, clopper_pearson, predictive_rates, prevalence
from mia_core.metrics import benjamini_hochberg


def test_prevalence_by_hand():
    assert prevalence(0.5, 0.9, 0.1) == pytest.approx(0.5)  # (0.5 − 0.1)/(0.9 − 0.1)
    assert prevalence(0.3, 0.6, 0.05) == pytest.approx(0.25 / 0.55)
    assert prevalence(0.02, 0.9, 0.1) == 0.0 and prevalence(0.97, 0.9, 0.1) == 1.0  # clipped
    assert math.isnan(prevalence(0.5, 0.1, 0.1)) and math.isnan(prevalence(0.5, 0.05, 0.1))  # uninformative test
    np.testing.assert_allclose(prevalence([0.1, 0.5], [0.9, 0.5], [0.1, 0.1]), [0.0, 1.0])


def test_benjamini_hochberg_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.2 → p·m/rank 0.04, 0.06, 0.0533, 0.2 → running min from the top
    adjusted = benjamini_hochberg([0.01, 0.04, 0.03, 0.2, np.nan])
    np.testing.assert_allclose(adjusted[:4], [0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert np.isnan(adjusted[4])


def test_book_test_is_the_exact_one_sided_u_test():
    # book {3, 4} vs reference {1, 2, 5}: U = 4 of 6 pairs; P(U ≥ 4) = 4/10 over the C(5,2) rank arrangements
    assert book_test([3, 4], [1, 2, 5]) == pytest.approx(0.4)
    assert book_test([9, 10], [1, 2, 3]) == pytest.approx(0.1)  # the most extreme arrangement, 1/10
    assert math.isnan(book_test([], [1.0]))


def test_threshold_rules_by_hand():
    labels = [0, 0, 0, 0, 1, 1, 1, 1]
    scores = [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.8]
    # FPR ≤ 25%: at 0.4 one non-member (0.6) is flagged and all four members → lowest such threshold is 0.4
    assert choose_threshold(labels, scores, rule="fpr", target_fpr=0.25) == 0.4
    # FPR ≤ 10%: no non-member may be flagged → threshold 0.7 (members 0.7, 0.8)
    assert choose_threshold(labels, scores, rule="fpr", target_fpr=0.1) == 0.7
    # accuracy: at 0.4, 7 of 8 right; nothing better
    assert choose_threshold(labels, scores, rule="accuracy") == 0.4
    with pytest.raises(ValueError, match="rule"):
        choose_threshold(labels, scores, rule="youden")


def exact(k: int, n: int, ci: float = 0.95) -> tuple[float, float]:
    """scipy's exact binomial interval, independent of our beta quantiles."""
    interval = sps.binomtest(k, n).proportion_ci(confidence_level=ci, method="exact")
    return interval.low, interval.high


def test_calibration_rates_and_exact_intervals():
    books = ["m1"] * 3 + ["m2"] * 3 + ["n1"] * 3 + ["n2"] * 3
    labels = [1] * 6 + [0] * 6
    scores = [5, 6, 7, 0.4, 8, 9, 0, 0.5, 0.2, 3, 0.1, 0.3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate(scores, labels, books, target_fpr=0.2, n_boot=500, seed=3)
    assert cal.threshold == 3 and cal.tpr == pytest.approx(5 / 6) and cal.fpr == pytest.approx(1 / 6)
    # hits m1 {1,1,1}, m2 {0,1,1}: MSB = 3·2·(1/6)²/1 = 1/6 = MSW = (2/3)/4 → ICC 0, design effect 1; the
    # non-members mirror it (n1 {0,0,0}, n2 {1,0,0}) → exact intervals of 5 of 6 and 1 of 6
    assert cal.tpr_deff == 1.0 and cal.fpr_deff == 1.0
    assert cal.tpr_ci == pytest.approx(exact(5, 6)) and cal.fpr_ci == pytest.approx(exact(1, 6))
    assert cal.pred_tpr.shape == cal.pred_fpr.shape == (500,)
    assert any("very few books" in w for w in cal.warnings)
    assert not any("cannot resolve" in w for w in cal.warnings)  # 6 non-member snippets resolve 20% (need 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        strict = calibrate(scores, labels, books, target_fpr=0.1, n_boot=100)
    assert any("cannot resolve" in w for w in strict.warnings)  # 10% needs 10 non-member snippets
    with pytest.raises(ValueError, match="both"):
        calibrate([1, 2], [1, 1], ["a", "b"])


def test_predictive_rates_share_one_offset_per_draw():
    # one book of scores 0..9 and threshold 5: with offset o a draw counts the scores ≥ 5 − o
    offsets = np.array([0.0, 1.0, -1.0, 5.0, -5.5])
    rates = predictive_rates(np.arange(10.0), ["a"] * 10, 5.0, offsets, np.random.default_rng(0))
    np.testing.assert_allclose(rates, [0.5, 0.6, 0.4, 1.0, 0.0])


def test_analyse_books_by_hand():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate([5, 6, 7, 8, 0, 1, 2, 9], [1, 1, 1, 1, 0, 0, 0, 0], list("aabbccdd"), target_fpr=0.25,
                        n_boot=200, seed=0)
    assert cal.threshold == 5 and cal.tpr == 1.0 and cal.fpr == 0.25
    snippets = pd.DataFrame({"book": ["x"] * 4 + ["y"] * 4, "position": list(range(4)) * 2,
                             "score": [6, 7, 8, 1, 0, 1, 0.5, 2]})
    table = analyse_books(cal, snippets).set_index("book")
    assert table.loc["x", "rate"] == 0.75 and table.loc["y", "rate"] == 0.0
    # along x the hits are 1,1,1,0 and along y none (scores 0,1,0.5,2): with blocks of ⌈4^(1/3)⌉ = 2 both
    # design effects are < 1 by hand (2/3 and 2/7), truncated at 1 → 4 effective snippets, exact intervals
    assert list(table["n_effective"]) == [4.0, 4.0]
    assert (table.loc["x", "rate_lo"], table.loc["x", "rate_hi"]) == pytest.approx(exact(3, 4))
    assert (table.loc["y", "rate_lo"], table.loc["y", "rate_hi"]) == pytest.approx((0.0, 1 - 0.025 ** (1 / 4)))
    assert table.loc["x", "prevalence"] == pytest.approx((0.75 - 0.25) / 0.75)
    assert table.loc["y", "prevalence"] == 0.0
    assert table.loc["x", "p_value"] == pytest.approx(book_test([6, 7, 8, 1], [0, 1, 2, 9]))
    np.testing.assert_allclose(table["p_adj"], benjamini_hochberg(table["p_value"]))
    assert list(table.index) == ["x", "y"]  # highest prevalence first
    assert all("proof" not in v and "FPR" in v for v in table["verdict"])


def test_verdicts_need_an_informative_calibration():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        useless = calibrate([1, 2, 3, 4], [1, 0, 1, 0], list("abcd"), target_fpr=0.5, n_boot=200)
    assert not useless.informative
    assert verdict_key(1e-9, 0.5, useless) == "uninformative"


def simulated_calibration(rng, *, n_books: int, n_snippets: int, shift: float, tau: float, seed: int,
                          n_boot: int = 1000):
    """Member and non-member books whose snippet scores differ by `shift`, each book with its own offset."""
    scores, labels, books = [], [], []
    for b in range(n_books):
        for label in (0, 1):
            scores += list(rng.normal(0, 1, n_snippets) + shift * label + rng.normal(0, tau))
            labels += [label] * n_snippets
            books += [f"{label}-{b}"] * n_snippets
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate(scores, labels, books, n_boot=n_boot, seed=seed, ci=0.9, auroc_boot=1)


def test_prevalence_interval_covers_the_truth_in_simulations():
    """90% intervals on simulated books with known prevalence 0.4 cover it in ≥ 85% of 200 simulations."""
    truth, covered = 0.4, []
    for sim in range(200):
        rng = np.random.default_rng(sim)
        cal = simulated_calibration(rng, n_books=10, n_snippets=40, shift=1.5, tau=0.2, seed=sim)
        member = rng.random(60) < truth
        scores = rng.normal(0, 1, 60) + 1.5 * member + rng.normal(0, 0.2)
        row = analyse_books(cal, pd.DataFrame({"book": "b", "position": range(60), "score": scores})).iloc[0]
        covered.append(row.prevalence_lo <= truth <= row.prevalence_hi)
    assert np.mean(covered) >= 0.85


def two_by_two(per_book: int):
    """2 member + 2 non-member calibration books of `per_book` snippets, perfectly separated, their scores dealt
    alternately to the two books of a class (no book effect: design effect 1), and their calibration."""
    n = 2 * per_book
    ranks = np.arange(n) / n
    scores = np.r_[5 + ranks, ranks]
    books = [f"m{i % 2}" for i in range(n)] + [f"n{i % 2}" for i in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate(scores, [1] * n + [0] * n, books, target_fpr=0.05, n_boot=200, seed=0)


def test_a_calibration_too_weak_for_a_verdict_gives_none_and_says_what_would_fix_it():
    """2 + 2 calibration books of 2 snippets: FPR 0% with an interval up to 60%, over 10× the 5% target: no verdict,
    and the reason says how many more non-member snippets would do. Books of 5 (the demo's plays) keep theirs."""
    weak, demo_like = two_by_two(2), two_by_two(5)
    assert weak.fpr == demo_like.fpr == 0.0 and weak.informative and demo_like.informative
    assert weak.fpr_deff == demo_like.fpr_deff == 1.0  # so the intervals are the exact ones of 0 of 4 and 0 of 10
    assert weak.fpr_ci[1] == pytest.approx(1 - 0.025 ** (1 / 4)) and demo_like.fpr_ci[1] == pytest.approx(0.3085, abs=1e-4)
    assert weak.fpr_ci[1] > FPR_SLACK * 0.05 >= demo_like.fpr_ci[1]
    assert not weak.supports_verdicts and demo_like.supports_verdicts
    snippets = pd.DataFrame({"book": ["read"] * 6 + ["unread"] * 6, "position": list(range(6)) * 2,
                             "score": [6.0, 7, 8, 6.5, 7.5, 9] + [0.1, 0.2, 0.3, 0.4, 0.15, 0.25]})
    assert all(v.startswith(VERDICTS["weak_calibration"]) for v in analyse_books(weak, snippets)["verdict"])
    kept = analyse_books(demo_like, snippets).set_index("book")
    assert kept.loc["read", "verdict"].startswith(VERDICTS["evidence"])
    assert kept.loc["unread", "verdict"].startswith(VERDICTS["none"])
    reason = weak_calibration_reason(weak)
    assert reason.startswith("the false-positive rate at the threshold is 0.0% with an interval up to 60%")
    more = int(reason.split("about ")[1].split(" more")[0])
    n_after = (weak.n_nonmember_snippets + more) / weak.fpr_deff  # the fix, checked with the exact interval
    assert clopper_pearson(0, n_after, 0.95)[1] <= weak.fpr_allowed < clopper_pearson(0, n_after - 1, 0.95)[1]
    assert any(w.startswith("calibration too weak for a verdict") for w in weak.warnings)
    assert weak_calibration_reason(demo_like) is None


def test_books_whose_test_cannot_reach_significance_get_no_verdict():
    """The issue's run: 2 + 2 calibration books and 8 books, 3 snippets each. Two plays were headlined "consistent
    with training" at p = 0.012, the smallest the test can give (1 / C(9, 3)); over 8 books it cannot reach 0.05."""
    cal = two_by_two(3)
    assert cal.supports_verdicts and cal.n_nonmember_snippets == 6
    assert book_test([7.0, 8, 9], cal.nonmember_scores) == pytest.approx(1 / math.comb(9, 3))
    snippets = pd.DataFrame({"book": np.repeat([f"b{i}" for i in range(8)], 3), "position": list(range(3)) * 8,
                             "score": np.r_[[7.0, 8, 9] * 2, np.linspace(0, 0.9, 18)]})
    table = analyse_books(cal, snippets).set_index("book")
    assert table.loc["b0", "p_adj"] < 0.05  # BH over two books at the extreme passes: the gate is what stops it
    assert all(v.startswith(VERDICTS["too_few"]) for v in table["verdict"])
    assert not can_reach(3, 6, 8) and can_reach(3, 6, 1) and can_reach(5, 10, 8)  # 0.095, 0.012, 0.0027
