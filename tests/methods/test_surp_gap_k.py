"""SURP and Gap-K%: naive float64 recomputations from raw logits, hand-computed cases, the spec's edge
cases (empty selection, ties, n < w, n = w, k rounding, n = 0), parameter checks and orientation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mia_core import TokenStats, get_method, score, score_texts
from mia_core.methods.gap_k import GapKParams
from mia_core.methods.surp import SurpParams

from tests.support.oracle import naive_min_k, naive_stats
from tests.support.tiny import random_texts

TEXTS = random_texts(5, seed=21, min_words=3, max_words=30)


def rel_close(a, b, tol=1e-5):
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def oracle_for(lm, text):
    """Float64 statistics of `text` under `lm` from its raw logits, boundary token first (bos="auto")."""
    ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]
    return naive_stats(lm.model, ids)


def hand_stats(logprob, *, entropy=None, top1=None, sigma=None):
    """Made-up statistics: only the fields these methods read matter."""
    n = len(logprob)
    zeros = np.zeros(n)
    return TokenStats(
        text="x", token_ids=np.arange(n), tokens=["t"] * n, offsets=np.zeros((n, 2), int),
        logprob=np.asarray(logprob, float), mu=zeros,
        sigma=np.asarray(sigma if sigma is not None else zeros + 1, float),
        top1_id=np.zeros(n, int), top1_logprob=np.asarray(top1 if top1 is not None else zeros, float),
        entropy=np.asarray(entropy if entropy is not None else zeros, float), rank=np.ones(n, int))


def naive_surp(logprob, entropy, k, e_max):
    """(value, chosen indices): Python-sorted candidates, then the entropy filter; −100 for none."""
    order = sorted(range(len(logprob)), key=lambda t: float(logprob[t]))  # sorted() is stable
    chosen = [t for t in order[:max(1, int(len(logprob) * k))] if entropy[t] < e_max]
    if not chosen:
        return -100.0, set()
    return sum(float(logprob[t]) for t in chosen) / len(chosen), set(chosen)


def naive_gap_k(logprob, top1, sigma, k, w):
    """(value, covered token indices, g) with explicit loops over the windows."""
    g = [(float(a) - float(b)) / max(float(s), 1e-12) for a, b, s in zip(logprob, top1, sigma)]
    width = w if len(g) >= w else 1
    means = [sum(g[i:i + width]) / width for i in range(len(g) - width + 1)]
    order = sorted(range(len(means)), key=lambda i: means[i])[:max(1, int(len(means) * k))]
    covered = {t for i in order for t in range(i, i + width)}
    return sum(means[i] for i in order) / len(order), covered, g


def entropy_thresholds(entropy):
    """Thresholds that split a text's entropies well clear of float32 noise: midpoints of the 3 widest gaps."""
    e = np.sort(np.asarray(entropy, np.float64))
    gaps = np.diff(e)
    best = np.argsort(gaps)[-3:]
    assert gaps[best].min() > 1e-5  # far wider than float32 vs float64 differences (~1e-6 here)
    return [float((e[i] + e[i + 1]) / 2) for i in best]


# ----------------------------------------------------------------------------- SURP


def test_surp_matches_naive_computation(llama_lm):
    for stats in llama_lm.token_stats(TEXTS):
        o = oracle_for(llama_lm, stats.text)
        thresholds = entropy_thresholds(o["entropy"]) + [1.0, 2.0, 10.0]  # partial S, S = ∅, S = L
        for k in (0.1, 0.4, 1.0):
            for e_max in thresholds:
                want, chosen = naive_surp(o["logprob"], o["entropy"], k, e_max)
                got = score("surp", stats, k=k, e_max=e_max)
                rel_close(got.value, want)
                assert set(np.flatnonzero(got.selected)) == chosen
                assert got.details["empty_selection"] == (not chosen)
                np.testing.assert_allclose(got.token_scores, o["logprob"], rtol=1e-5)
            # the untrained model is near-uniform (entropy ≈ log 320 ≈ 5.76 nats): e_max = 2 selects nothing
            assert score("surp", stats, k=k).value == -100.0
            rel_close(score("surp", stats, k=k, e_max=10.0).value, naive_min_k(o["logprob"], k))


def test_surp_matches_naive_on_a_trained_model_with_defaults(membership):
    """The trained model's entropies straddle 2 nats, so the default e_max gives both empty and non-empty S."""
    lm = membership["lm"]
    texts = membership["members"][:10] + membership["nonmembers"][:10]
    empties = 0
    for stats in lm.token_stats(texts):
        o = oracle_for(lm, stats.text)
        want, chosen = naive_surp(o["logprob"], o["entropy"], 0.4, 2.0)
        got = score("surp", stats)  # defaults k = 0.4, e_max = 2.0
        rel_close(got.value, want)
        assert set(np.flatnonzero(got.selected)) == chosen
        empties += not chosen
    assert 0 < empties < len(texts)


def test_surp_by_hand():
    stats = hand_stats([-1.0, -5.0, -2.0, -4.0, -3.0], entropy=[0.5, 3.0, 0.5, 1.0, 1.5])
    got = score("surp", stats)  # k = 0.4: int(5·0.4) = 2 candidates (−5, −4); entropy 3.0 ≥ 2 drops −5
    assert got.value == -4.0
    assert got.selected.tolist() == [False, False, False, True, False]
    assert got.token_scores.tolist() == [-1.0, -5.0, -2.0, -4.0, -3.0]
    assert got.details["empty_selection"] is False and got.k is None and got.at_k(0.2) is None
    assert score("surp", stats, e_max=3.5).value == -4.5  # both candidates are low-entropy now
    assert score("surp", stats, e_max=3.0).value == -4.0  # the threshold is strict
    assert score("surp", stats, k=1.0).value == pytest.approx((-1.0 - 2.0 - 4.0 - 3.0) / 4)
    assert score("surp", stats, k=0.1).value == -100.0  # int(0.5) = 0 → 1 candidate (−5), high entropy


def test_surp_empty_selection_is_the_sentinel():
    got = score("surp", hand_stats([-1.0, -2.0, -3.0], entropy=[3.0, 3.0, 3.0]))
    assert got.value == -100.0 and got.details["empty_selection"] is True
    assert not got.selected.any()
    assert got.token_scores.tolist() == [-1.0, -2.0, -3.0]


def test_surp_ties_keep_text_order():
    stats = hand_stats([-2.0, -2.0, -1.0], entropy=[3.0, 0.5, 0.5])
    assert score("surp", stats, k=0.34).value == -100.0  # the single candidate is the *first* −2 (entropy 3)
    flipped = hand_stats([-2.0, -2.0, -1.0], entropy=[0.5, 3.0, 0.5])
    assert score("surp", flipped, k=0.34).selected.tolist() == [True, False, False]


def test_surp_k_rounding_follows_int_n_k():
    logprob = -np.arange(1.0, 101.0)  # token t has ℓ = −(t+1); the lowest are the last ones
    entropy = np.full(100, 5.0)
    entropy[[70, 71]] = 0.5  # the 30th and 29th lowest; int(100·0.29) = 28 reaches neither…
    assert score("surp", hand_stats(logprob, entropy=entropy), k=0.29).value == -100.0
    entropy[72] = 0.5  # …but the 28th lowest (ℓ = −73)
    got = score("surp", hand_stats(logprob, entropy=entropy), k=0.29)
    assert got.value == -73.0 and got.details["n_lowest"] == 28
    assert score("surp", hand_stats(logprob, entropy=entropy), k=0.3).value == -72.0  # 30: ℓ = −71, −72, −73


def test_surp_one_token_and_no_token():
    assert score("surp", hand_stats([-3.0], entropy=[1.0]), k=0.01).value == -3.0
    with pytest.raises(ValueError, match="no token to score"):
        score("surp", hand_stats([]))


@pytest.mark.parametrize("bad", [{"k": 0.0}, {"k": 1.5}, {"e_max": 0.0}, {"e_max": -1.0}, {"e_max": math.nan},
                                 {"e_max": math.inf}, {"e_max": True}, {"e_max": "2"}])
def test_surp_parameter_validation(bad):
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must be"):
        SurpParams(**bad)


# ----------------------------------------------------------------------------- Gap-K%


def test_gap_k_matches_naive_computation(llama_lm):
    short = 0
    for stats in llama_lm.token_stats(TEXTS):
        o = oracle_for(llama_lm, stats.text)
        for k, w in [(0.2, 3), (0.05, 1), (0.5, 6), (1.0, 3), (0.3, 40)]:
            want, covered, g = naive_gap_k(o["logprob"], o["top1_logprob"], o["sigma"], k, w)
            got = score("gap_k", stats, k=k, w=w)
            rel_close(got.value, want)
            np.testing.assert_allclose(got.token_scores, g, rtol=1e-5, atol=1e-6)
            assert set(np.flatnonzero(got.selected)) == covered
            short += len(g) < w
    assert short > 0  # w = 40 exercises the n < w path on the short texts


def test_gap_k_by_hand():
    # g = [0, −3, −1, 0, −6, 0] from (ℓ − top1)/σ with varied top1 and σ
    sigma = np.array([1.0, 2.0, 1.0, 0.5, 2.0, 1.0])
    top1 = np.array([-0.5, -0.2, -1.0, -0.1, -0.3, -2.0])
    logprob = top1 + np.array([0.0, -3.0, -1.0, 0.0, -6.0, 0.0]) * sigma
    stats = hand_stats(logprob, top1=top1, sigma=sigma)
    got = score("gap_k", stats, k=0.5)  # windows of 3: s = [−4/3, −4/3, −7/3, −2]; int(4·0.5) = 2 lowest
    np.testing.assert_allclose(got.token_scores, [0.0, -3.0, -1.0, 0.0, -6.0, 0.0])
    assert got.value == pytest.approx((-7 / 3 - 2) / 2)
    assert got.details["window_starts"] == [2, 3] and got.details["window"] == 3
    assert got.selected.tolist() == [False, False, True, True, True, True]
    assert got.k is None and get_method("gap_k").centre == 0.0
    one = score("gap_k", stats)  # default k = 0.2: int(0.8) = 0 → 1 window
    assert one.value == pytest.approx(-7 / 3) and one.selected.tolist() == [False, False, True, True, True, False]
    assert score("gap_k", stats, k=1.0, w=1).value == pytest.approx(-10 / 6)  # w = 1: the mean of g


def test_gap_k_ties_keep_text_order():
    stats = hand_stats([0.0, -3.0, -1.0, 0.0, -6.0, 0.0])  # top1 = 0, σ = 1: g = ℓ; s[0] = s[1] = −4/3
    got = score("gap_k", stats, k=0.75)  # 3 windows: s[2], s[3], then the first of the tie
    assert got.details["window_starts"] == [0, 2, 3]
    assert got.value == pytest.approx((-4 / 3 - 7 / 3 - 2) / 3)


def test_gap_k_short_texts():
    below = score("gap_k", hand_stats([0.0, -2.0]), k=0.5, w=3)  # n < w: s = g
    assert below.value == -2.0 and below.selected.tolist() == [False, True]
    assert below.details == {"window": 1, "window_starts": [1], "n_windows": 2}
    equal = score("gap_k", hand_stats([0.0, -3.0, -1.0]), w=3)  # n = w: one window over everything
    assert equal.value == pytest.approx(-4 / 3) and equal.selected.all()
    assert equal.details["window_starts"] == [0]
    with pytest.raises(ValueError, match="no token to score"):
        score("gap_k", hand_stats([]))


def test_gap_k_k_rounding_follows_int_m_k():
    stats = hand_stats(-np.arange(102.0))  # g_t = −t, so window i averages to −(i+1): m = 100 windows
    got = score("gap_k", stats, k=0.29)  # int(100·0.29) = 28: windows 72…99, means −73…−100
    assert got.value == pytest.approx(-86.5) and len(got.details["window_starts"]) == 28
    assert np.flatnonzero(got.selected).tolist() == list(range(72, 102))


def test_gap_k_sigma_floor():
    got = score("gap_k", hand_stats([-1.0, -2.0], top1=[-1.0, -1.0], sigma=[0.0, 0.0]), k=1.0, w=1)
    assert got.token_scores.tolist() == [0.0, -1e12]  # a one-hot prediction: finite, never NaN
    assert np.isfinite(got.value)


@pytest.mark.parametrize("bad", [{"k": 0.0}, {"k": -0.2}, {"w": 0}, {"w": -1}, {"w": 2.5}, {"w": True}, {"w": "3"}])
def test_gap_k_parameter_validation(bad):
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must be"):
        GapKParams(**bad)


# ----------------------------------------------------------------------------- both


def test_registration_and_defaults():
    assert (SurpParams().k, SurpParams().e_max) == (0.4, 2.0)
    assert (GapKParams().k, GapKParams().w, GapKParams(w=np.int64(4)).w) == (0.2, 3, 4)
    for name in ("surp", "gap_k"):
        spec = get_method(name)
        assert spec.stats_only and spec.access.full_distribution and spec.token_level
        assert spec.reading(-2.0) and spec.reading(-100.0)


def test_both_score_members_higher(membership):
    """Orientation on the tiny memorising model. SURP's threshold is in absolute nats and this model's
    entropies (≈ 0.9–3.2 nats over 320 logits) sit far above a real LLM's, so e_max = 2 leaves most texts
    with no surprising token (the −100 sentinel); a threshold on this model's scale is used here."""
    lm, members, nonmembers = membership["lm"], membership["members"], membership["nonmembers"]
    df = score_texts(lm, members + nonmembers, ["surp", "gap_k"], k=0.4, e_max=4.0)
    for name in ("surp", "gap_k"):
        values = df[name].to_numpy()
        assert np.all(np.isfinite(values)) and values[:40].mean() > values[40:].mean(), name
