"""CAMIA's signals by hand, its p-values against a naive count, the combinations, and its reference checks."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from mia_core import get_method, score, score_texts
from mia_core.methods.camia import signal_names, signals
from mia_core.methods.helper_texts import HelperTexts, ReferenceStats

from tests.methods.test_methods import make_stats
from tests.support.tiny import random_texts

TEXTS = random_texts(4, seed=51)
REFERENCE = random_texts(24, seed=52, min_words=2, max_words=40)


def naive_signals(lp, ids):
    """The twelve signals written out loop by loop from the spec."""
    lp, n = [float(v) for v in lp], len(lp)
    out = []
    for c in (n, 200, 300):
        part = lp[:c]
        out.append(sum(part) / len(part))
    for c in (n, 200, 300):
        part, tok = lp[:c], list(ids[:c])
        out.append((sum(part) / len(part)) / (len(set(tok)) / len(tok)))
    head = lp[:200]
    out += [sum(v >= tau for v in head) / len(head) for tau in (-1, -2, -3)]
    for c in (n, 200, 300):
        part = lp[:c]
        wins = [part[t] > sum(part[:t]) / t for t in range(1, len(part))]
        out.append(sum(wins) / len(wins) if wins else float("nan"))
    return np.array(out)


def naive_p(value, population):
    """(#{r > x} + #{r ≥ x} + [some r = x]) / (2|R|), counted one by one."""
    above = sum(r > value for r in population)
    at_least = sum(r >= value for r in population)
    tie = any(r == value for r in population)
    return (above + at_least + tie) / (2 * len(population))


def test_signals_by_hand():
    got = signals(np.array([-0.5, -1.5, -2.5, -3.5]), np.array([1, 1, 2, 3]))
    expected = [-2.0] * 3 + [-2.0 / 0.75] * 3 + [0.25, 0.5, 0.75] + [0.0] * 3
    np.testing.assert_allclose(got, expected)
    rising = signals(np.array([-3.0, -2.0, -2.5, -1.0]), np.array([1, 2, 3, 4]))
    # t=2: −2 > −3 yes; t=3: −2.5 > −2.5 no (strict); t=4: −1 > −2.5 yes
    np.testing.assert_allclose(rising[9:], [2 / 3] * 3)
    assert np.isnan(signals(np.array([-1.0]), np.array([5]))[9:]).all()
    assert len(signal_names()) == 12


def test_signals_match_a_naive_loop_on_long_texts():
    rng = np.random.default_rng(0)
    for n in (3, 150, 250, 420):
        lp, ids = -rng.exponential(2.0, n), rng.integers(0, 40, n)
        np.testing.assert_allclose(signals(lp, ids), naive_signals(lp, ids), rtol=1e-12)


def test_score_is_one_minus_the_mean_p_value_against_the_reference(llama_lm):
    ref = [s for s in llama_lm.token_stats(REFERENCE)]
    population = np.stack([naive_signals(s.logprob, s.token_ids) for s in ref])
    df = score_texts(llama_lm, TEXTS, ["camia"], reference=REFERENCE)
    for st, value in zip(llama_lm.token_stats(TEXTS), df["camia"]):
        x = naive_signals(st.logprob, st.token_ids)
        p = [naive_p(x[j], population[:, j]) for j in range(12) if not np.isnan(x[j])]
        assert value == pytest.approx(1 - np.mean(p), rel=1e-9)
        fisher = score("camia", st, reference=REFERENCE, lm=llama_lm, aggregate="fisher")
        clipped = np.clip(p, 1e-10, 1 - 1e-10)
        assert fisher.value == pytest.approx(-chi2.sf(-2 * np.log(clipped).sum(), 2 * len(p)), rel=1e-9)
        assert [d["p_value"] for d in fisher.details["signals"]] == pytest.approx(p)


def test_reference_checks(llama_lm):
    st = llama_lm.token_stats(TEXTS[:1])[0]
    small = score("camia", st, reference=REFERENCE[:5], lm=llama_lm)
    assert "fewer than 20" in small.details["warning"]
    other_policy = ReferenceStats(HelperTexts(tuple(REFERENCE), "reference"),
                                  tuple(llama_lm.token_stats(REFERENCE, bos="none")))
    with pytest.raises(ValueError, match="another BOS policy"):
        score("camia", st, reference=other_policy)
    with pytest.raises(ValueError, match="never be scored"):
        score("camia", st, reference=REFERENCE + [st.text], lm=llama_lm)
    with pytest.raises(ValueError, match="aggregate"):
        get_method("camia").make_params(aggregate="median")
    assert score("camia", st, reference=REFERENCE, lm=llama_lm).selected.sum() == min(200, st.n_scored)


def test_a_score_never_depends_on_the_other_scored_texts(llama_lm):
    ref = ReferenceStats(HelperTexts(tuple(REFERENCE), "reference"), tuple(llama_lm.token_stats(REFERENCE)))
    alone = [score_texts(llama_lm, [t], ["camia"], reference=ref)["camia"][0] for t in TEXTS]
    together = score_texts(llama_lm, TEXTS[::-1], ["camia"], reference=ref)["camia"].to_numpy()[::-1]
    np.testing.assert_allclose(alone, together)


def test_hand_built_population_gives_the_exact_p_value():
    ref = ReferenceStats(HelperTexts(("a", "b"), "reference"),
                         (make_stats([-1.0, -1.0], text="a"), make_stats([-3.0, -3.0], text="b")))
    x = make_stats([-2.0, -2.0], text="x")
    got = score("camia", x, reference=ref)
    by_name = {d["signal"]: d["p_value"] for d in got.details["signals"]}
    # S1: references −1 (above) and −3 (below): (1 + 1 + 0) / 4 = 0.5
    assert by_name["S1_mean_logprob_all"] == 0.5
    # S3 at τ = −1: x has 0, references 1 and 0 → above 1, at least 2, tie → (1 + 2 + 1) / 4 = 1
    assert by_name["S3_share_above_-1"] == 1.0
