"""PDR, the positional-decay plug-in of `loss`, `min_k` and `min_k_pp` (mia_core/methods/pdr.py; METHODS-API.md §22):
hand-computed cases, the order (select on raw scores, then weight) and divisor (T or |S|, not Σw), the batch forms,
and a tiny real model against a float64 oracle."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS, TokenStats, score, score_texts
from mia_core.api import StatsBatch, lowest_k
from mia_core.cli.options import parse_params
from mia_core.methods.min_k_pp import MinKPlusPlusParams, min_k_pp, min_k_pp_token_scores
from mia_core.methods.pdr import pdr_weights

from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts

PDR_METHODS = ["loss", "min_k", "min_k_pp"]


def make_stats(logprob, mu=None, sigma=None) -> TokenStats:
    """Statistics of a made-up text of n tokens (float64), μ = 0 and σ = 1 unless given."""
    n = len(logprob)
    zeros = np.zeros(n)
    return TokenStats(text="x" * n, token_ids=np.arange(n), tokens=["t"] * n, offsets=np.zeros((n, 2), int),
                      logprob=np.asarray(logprob, float), mu=np.asarray(zeros if mu is None else mu, float),
                      sigma=np.asarray(zeros + 1 if sigma is None else sigma, float), top1_id=np.zeros(n, int),
                      top1_logprob=zeros, entropy=zeros, rank=np.ones(n, int))


def test_weights_by_hand():
    assert pdr_weights(4, 1.0).tolist() == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0], rel=1e-15)
    assert pdr_weights(5, 0.5).tolist() == pytest.approx([1.0, 0.875, 0.75, 0.625, 0.5], rel=1e-15)
    assert pdr_weights(1, 1.0).tolist() == [1.0]  # T = 1: w = 1


# Four tokens, log p = [-4, -1, -0.5, -3]; k = 0.5 selects 2 tokens.
# α = 1: w = [1, 2/3, 1/3, 0], w·ℓ = [-4, -2/3, -1/6, 0].
# min_k: raw S = {1, 4} (-4, -3) → (-4 + 0) / 2 = -2; weight-then-select would take {1, 2} → (-4 - 2/3) / 2 = -7/3;
# dividing by Σw over S (1 + 0) would give -4; plain Min-K% is -3.5.
# loss: (-4 - 2/3 - 1/6 + 0) / 4 = -29/24; dividing by Σw (2) would give -29/12.
HAND = [-4.0, -1.0, -0.5, -3.0]


def test_pdr_loss_by_hand():
    stats = make_stats(HAND)
    got = score("loss", stats, pdr_alpha=1.0)
    assert got.value == pytest.approx(-29 / 24, rel=1e-14)
    assert got.value != pytest.approx(-29 / 12)  # not Σw
    assert got.token_scores.tolist() == pytest.approx([-4.0, -2 / 3, -1 / 6, 0.0], rel=1e-15)
    assert got.selected.tolist() == [True] * 4
    # α = 0.5: w = [1, 5/6, 2/3, 1/2], w·ℓ = [-4, -5/6, -1/3, -3/2] → -20/3 / 4 = -5/3
    assert score("loss", stats, pdr_alpha=0.5).value == pytest.approx(-5 / 3, rel=1e-14)
    assert score("loss", stats).value == pytest.approx(-8.5 / 4, rel=1e-15)  # off: the plain mean


def test_pdr_min_k_selects_on_raw_scores_and_divides_by_the_selection():
    stats = make_stats(HAND)
    got = score("min_k", stats, k=0.5, pdr_alpha=1.0)
    assert got.selected.tolist() == [True, False, False, True]  # the raw lowest two, not the weighted lowest
    assert got.value == pytest.approx(-2.0, rel=1e-15)
    assert got.value != pytest.approx(-7 / 3) and got.value != pytest.approx(-4.0)  # weight-then-select; Σw
    assert got.token_scores.tolist() == pytest.approx([-4.0, -2 / 3, -1 / 6, 0.0], rel=1e-15)
    assert score("min_k", stats, k=0.5).value == -3.5  # off: plain Min-K%
    # α = 0.5: w·ℓ = [-4, -5/6, -1/3, -3/2], S = {1, 4} → -2.75
    assert score("min_k", stats, k=0.5, pdr_alpha=0.5).value == pytest.approx(-2.75, rel=1e-15)


def test_pdr_min_k_pp_by_hand():
    # z = (ℓ − μ) / σ = [-0.5, -1, -0.2, -3]; k = 0.5: raw S = {2, 4}.
    # α = 1: w·z = [-0.5, -2/3, -1/15, 0] → (-2/3 + 0) / 2 = -1/3 (weight-then-select: {1, 2} → -7/12).
    stats = make_stats([-1.5, -3.0, -1.1, -4.0], mu=[-1.0] * 4, sigma=[1.0, 2.0, 0.5, 1.0])
    got = score("min_k_pp", stats, k=0.5, pdr_alpha=1.0)
    assert got.selected.tolist() == [False, True, False, True]
    assert got.value == pytest.approx(-1 / 3, rel=1e-12)
    assert got.token_scores.tolist() == pytest.approx([-0.5, -2 / 3, -1 / 15, 0.0], rel=1e-12, abs=1e-15)
    assert score("min_k_pp", stats, k=0.5).value == pytest.approx(-2.0, rel=1e-12)  # off: (-1 - 3) / 2


def test_one_token_is_unweighted():
    stats = make_stats([-2.5], mu=[-1.0], sigma=[0.5])
    for alpha in (0.0, 0.5, 1.0):
        assert score("loss", stats, pdr_alpha=alpha).value == -2.5
        assert score("min_k", stats, k=0.2, pdr_alpha=alpha).value == -2.5
        assert score("min_k_pp", stats, k=0.2, pdr_alpha=alpha).value == -3.0


def test_pdr_alpha_is_checked_with_one_sentence():
    for method in PDR_METHODS:
        for bad in (-0.1, 1.5, float("nan"), True, "1"):
            with pytest.raises(ValueError, match=r"pdr_alpha must be a number in \[0, 1\], or None"):
                METHODS[method].make_params(pdr_alpha=bad)
        for good in (0, 0.0, 1, np.float32(0.5), None):
            assert METHODS[method].make_params(pdr_alpha=good).pdr_alpha == good
    with pytest.raises(ValueError, match="k must be in"):  # k is still checked beside it
        METHODS["min_k"].make_params(k=0, pdr_alpha=0.5)
    assert [i.name for i in METHODS["min_k_pp"].param_infos] == ["k", "pdr_alpha"]  # k stays first


def test_pdr_off_leaves_min_k_pp_as_it_was():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 100, 257):
        stats = make_stats(-rng.exponential(2.0, n), mu=-rng.uniform(1, 5, n), sigma=rng.uniform(0.1, 3.0, n))
        for k in (0.05, 0.2, 0.29, 1.0):
            want = lowest_k(min_k_pp_token_scores(stats), k)  # the method's own rule
            for got in (min_k_pp(stats, MinKPlusPlusParams(k=k)), score("min_k_pp", stats, k=k),
                        score("min_k_pp", stats, k=k, pdr_alpha=None)):
                assert got.value == want.value and got.k == k
                np.testing.assert_array_equal(got.token_scores, want.token_scores)
                np.testing.assert_array_equal(got.selected, want.selected)
            # α = 0 weighs every token 1: the same number (to summation order), but no longer redrawn at another k
            flat = score("min_k_pp", stats, k=k, pdr_alpha=0.0)
            assert flat.value == pytest.approx(want.value, rel=1e-12) and flat.k is None and flat.at_k(0.5) is None


def random_stats(rng: np.random.Generator, n: int, *, ties: bool = False, nan: bool = False) -> TokenStats:
    """Float32 statistics of n tokens, with ties, a NaN or σ = 0 (the floor) where asked."""
    logprob = -rng.exponential(2.0, n).astype(np.float32)
    if ties:
        logprob = np.round(logprob).astype(np.float32)
    if nan and n > 2:
        logprob[rng.integers(n)] = np.nan
    sigma = rng.uniform(0.0, 3.0, n).astype(np.float32)
    sigma[rng.random(n) < 0.1] = 0.0
    stats = make_stats(logprob, mu=-rng.uniform(1, 5, n), sigma=sigma)
    return dataclasses.replace(stats, logprob=logprob, mu=stats.mu.astype(np.float32), sigma=sigma)


@pytest.mark.parametrize("name", PDR_METHODS)
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("k", [0.05, 0.29, 1.0])
def test_the_batch_form_gives_the_per_text_value_with_pdr(name, alpha, k):
    spec = METHODS[name]
    rng = np.random.default_rng(11)
    lengths = [1, 2, 3, 7, 10, 100, 257] + list(rng.integers(1, 60, 20))
    stats = [random_stats(rng, int(n), ties=j % 3 == 0, nan=j % 7 == 6) for j, n in enumerate(lengths)]
    params = spec.make_params(pdr_alpha=alpha, **({"k": k} if "k" in spec.param_names else {}))
    got = spec.batch(StatsBatch(tuple(stats)), params)
    want = np.array([spec.fn(st, params).value for st in stats])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)  # float64 summation order only


def oracle_scores(lm, text: str, k: float, alpha: float) -> dict[str, float]:
    """The three PDR scores written out in float64 from the full logits (tests/support/oracle.py), token by token."""
    ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]
    o = naive_stats(lm.model, ids)
    lp = [float(v) for v in o["logprob"]]
    z = [(lp[i] - o["mu"][i]) / o["sigma"][i] for i in range(len(lp))]
    big_t = len(lp)
    w = [1.0 if big_t == 1 else 1.0 - alpha * t / (big_t - 1) for t in range(big_t)]
    n_sel = max(1, int(big_t * k))

    def pdr_min(s: list[float]) -> float:
        chosen = sorted(range(big_t), key=lambda t: s[t])[:n_sel]  # the raw lowest (a stable sort)
        return sum(w[t] * s[t] for t in chosen) / n_sel

    return {"loss": sum(w[t] * lp[t] for t in range(big_t)) / big_t, "min_k": pdr_min(lp), "min_k_pp": pdr_min(z)}


@pytest.mark.parametrize(("k", "alpha"), [(0.2, 1.0), (0.5, 0.3)])
def test_a_tiny_real_model_against_a_float64_oracle(llama_lm, k, alpha):
    texts = random_texts(4, seed=33, min_words=3, max_words=30)
    frame = score_texts(llama_lm, texts, PDR_METHODS, k=k, pdr_alpha=alpha)
    plain = score_texts(llama_lm, texts, PDR_METHODS, k=k)
    for row, (text, stats) in enumerate(zip(texts, llama_lm.token_stats(texts))):
        want = oracle_scores(llama_lm, text, k, alpha)
        for method in PDR_METHODS:
            one = score(method, stats, pdr_alpha=alpha, **({"k": k} if method != "loss" else {}))
            assert one.value == pytest.approx(want[method], rel=1e-5, abs=1e-6), method
            assert frame[method][row] == pytest.approx(one.value, rel=1e-12), method
            if stats.n_scored > 1 and alpha > 0:
                assert frame[method][row] != plain[method][row], method  # the plug-in changes the number


def test_score_texts_with_and_without_batch_forms_agree_with_pdr(llama_lm, monkeypatch):
    texts = random_texts(20, seed=8, min_words=1, max_words=40)
    batched = score_texts(llama_lm, texts, PDR_METHODS, pdr_alpha=0.7)
    for name in PDR_METHODS:
        monkeypatch.setitem(METHODS, name, dataclasses.replace(METHODS[name], batch=None))
    plain = score_texts(llama_lm, texts, PDR_METHODS, pdr_alpha=0.7)
    np.testing.assert_allclose(batched.to_numpy(), plain.to_numpy(), rtol=1e-12, atol=0)


def test_the_cli_reads_pdr_alpha_as_a_parameter():
    assert parse_params(["pdr_alpha=1", "k=0.3"], ["loss", "min_k"]) == {"pdr_alpha": 1, "k": 0.3}
    assert score("min_k", make_stats(HAND), k=0.5, pdr_alpha=1).value == pytest.approx(-2.0)  # an int α works


def pdr_widget_page():
    """One widget for PDR over the three methods, starting unset (off)."""
    import streamlit as st

    from ui.params import param_widgets
    st.write(param_widgets(["loss", "min_k", "min_k_pp"], "pdr"))


def test_the_pages_draw_one_unset_pdr_box():
    at = AppTest.from_function(pdr_widget_page).run()
    assert not at.exception
    box = next(b for b in at.number_input if b.key == "pdr_pdr_alpha")
    assert box.value is None and "used by Loss" in box.label
    box.set_value(0.5).run()
    assert not at.exception and at.number_input(key="pdr_pdr_alpha").value == 0.5
