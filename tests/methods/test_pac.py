"""PAC: the swap rule by hand (a scripted RNG) and against an independent implementation, the polarized
distance by hand, the score against a naive float64 recomputation, the batched `prepare` hook, order
independence, and the edge cases (one word, empty text, truncated text, bad parameters)."""
from __future__ import annotations

import hashlib
import math
import random

import numpy as np
import pytest
import torch

from mia_core import METHODS, LanguageModel, TokenStats, score, score_texts
from mia_core.methods.pac import PacParams, augment, polarized_distance, random_swap
from mia_core.model.stats_cache import StatsCache

from tests.support.tiny import random_texts

#: 9 to 27 words each, so copies get 2 to 8 swaps.
TEXTS = random_texts(4, seed=31, min_words=9, max_words=27)


def rel_close(a, b, tol=1e-5):
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def make_stats(logprob, text="x", bos_policy="auto"):
    n = len(logprob)
    zeros = np.zeros(n)
    return TokenStats(text=text, token_ids=np.arange(n), tokens=["t"] * n, offsets=np.zeros((n, 2), int),
                      logprob=np.asarray(logprob, float), mu=zeros, sigma=zeros + 1, top1_id=np.zeros(n, int),
                      top1_logprob=zeros, entropy=zeros, rank=np.ones(n, int), bos_policy=bos_policy)


def naive_pd(values) -> float:
    """Polarized distance by sorting a Python list: top max(1, n//20) mean minus bottom max(1, 3n//10) mean."""
    v = sorted(float(x) for x in values)
    n_far, n_loc = max(1, len(v) // 20), max(1, 3 * len(v) // 10)
    return sum(v[len(v) - n_far:]) / n_far - sum(v[:n_loc]) / n_loc


def naive_copies(text: str, alpha: float, n: int, seed: int, key: str | None = None) -> list[str]:
    """The spec's EDA random swap, written out independently: per text generator, redraw loop with a counter."""
    rng = random.Random(f"{seed}:{hashlib.sha256((key or text).encode('utf-8')).hexdigest()}")
    words = text.split(" ")
    swaps = max(1, math.floor(alpha * len(words)))
    out = []
    for _ in range(n):
        w = list(words)
        for _ in range(swaps):
            a = rng.randint(0, len(w) - 1)
            b, tries = a, 0
            while b == a:
                b = rng.randint(0, len(w) - 1)
                tries += 1
                if tries > 3:
                    break
            if tries <= 3:
                w[a], w[b] = w[b], w[a]
        out.append(" ".join(w))
    return out


class Scripted:
    """A random-number stand-in that returns the given values in order and records the bounds asked."""

    def __init__(self, values):
        self.values, self.calls = list(values), []

    def randint(self, a, b):
        self.calls.append((a, b))
        return self.values.pop(0)


class TableLM:
    """A target stand-in whose per-text log-probs are a hand-made table (records the policies it is asked)."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def token_stats(self, texts, bos="auto", long_text="sliding"):
        self.calls.append((list(texts), bos, long_text))
        return [make_stats(self.table[t], text=t) for t in texts]


@torch.inference_mode()
def oracle_logprob(lm, text, bos="auto"):
    """Float64 log-probs of tokens 1.. from the model's full logits, one text at a time (boundary token first
    unless bos="none")."""
    ids = lm.tokenizer(text)["input_ids"]
    if bos == "auto":
        ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + ids
    logp = torch.log_softmax(lm.model(torch.tensor([ids])).logits[0].double(), -1)  # (T, vocab)
    return np.array([float(logp[t - 1, ids[t]]) for t in range(1, len(ids))])


def test_swap_rule_by_hand():
    words = ["a", "b", "c", "d"]
    rng = Scripted([0, 2])
    assert random_swap(words, 1, rng) == ["c", "b", "a", "d"] and rng.calls == [(0, 3)] * 2
    rng = Scripted([1, 1, 1, 3])  # second index equals the first twice, the third draw differs: swap
    assert random_swap(words, 1, rng) == ["a", "d", "c", "b"] and not rng.values
    rng = Scripted([2, 2, 2, 2, 0])  # three equal draws: skipped (the loop's fourth draw is still made)
    assert random_swap(words, 1, rng) == words and not rng.values and len(rng.calls) == 5
    rng = Scripted([0, 3, 1, 2])
    assert random_swap(words, 2, rng) == ["d", "c", "b", "a"] and not rng.values
    assert words == ["a", "b", "c", "d"]  # the input is not changed


@pytest.mark.parametrize("text", ["Silver castle", "a b c", "The river\nwas founded  by the   north harbour ."]
                         + TEXTS)
@pytest.mark.parametrize("alpha", [0.3, 0.5, 1.0])
def test_copies_match_independent_swap_rule(text, alpha):
    for seed in range(12):  # two-word texts hit the skip (three equal draws) often
        got = augment(text, alpha=alpha, n_augment=5, seed=seed)
        assert got == naive_copies(text, alpha, 5, seed)
        assert all(sorted(c.split(" ")) == sorted(text.split(" ")) for c in got)  # single-space split, newline kept
    assert augment(text, alpha=alpha, n_augment=3, seed=0, key="other") == naive_copies(text, alpha, 3, 0, key="other")
    assert augment(text, alpha=alpha, n_augment=5, seed=0) != augment(text, alpha=alpha, n_augment=5, seed=1) \
        or len(text.split(" ")) < 3


def test_polarized_distance_by_hand():
    pd, far, local = polarized_distance(np.array([-1.0, -5.0, -2.0, -4.0, -3.0]))  # n = 5: n_far = n_loc = 1
    assert (pd, far.tolist(), local.tolist()) == (4.0, [0], [1])
    lp19 = -np.arange(1.0, 20.0)  # n = 19: n_far = max(1, 0) = 1 (SoK: the whole text), n_loc = 5
    pd, far, local = polarized_distance(lp19)
    assert pd == -1.0 - (-17.0) and far.tolist() == [0] and sorted(local.tolist()) == [14, 15, 16, 17, 18]
    pd, far, local = polarized_distance(-np.arange(1.0, 21.0))  # n = 20: 1 and 6
    assert pd == -1.0 - (-17.5) and len(far) == 1 and len(local) == 6
    pd, far, local = polarized_distance(-np.arange(1.0, 41.0))  # n = 40: 2 and 12
    assert pd == -1.5 - (-34.5) and sorted(far.tolist()) == [0, 1] and len(local) == 12
    pd, far, local = polarized_distance(np.array([-1.0, -1.0, -3.0, -3.0]))  # ties: stable order
    assert (pd, far.tolist(), local.tolist()) == (2.0, [1], [2])
    pd, far, local = polarized_distance(np.array([-2.5]))  # one token: far = local
    assert (pd, far.tolist(), local.tolist()) == (0.0, [0], [0])


def test_score_by_hand_with_a_table_of_log_probs():
    stats = make_stats([-1.0, -3.0], text="x y")  # PD = 2
    lm = TableLM({"y x": [-1.0, -6.0], "x y": [-1.0, -3.0]})  # PD("y x") = 5
    got = score("pac", stats, lm=lm, n_augment=4, seed=3)
    copies = [row["copy"] for row in got.details["copies"]]
    assert copies == naive_copies("x y", 0.3, 4, 3) and "y x" in copies
    expected = np.mean([5.0 if c == "y x" else 2.0 for c in copies]) - 2.0
    assert got.value == pytest.approx(expected) and got.details["pac"] == pytest.approx(-expected)
    assert got.details["pd"] == 2.0 and [row["pd"] for row in got.details["copies"]] == [
        5.0 if c == "y x" else 2.0 for c in copies]
    assert lm.calls == [(list(dict.fromkeys(copies)), "auto", "sliding")]  # one call, repeats once, text's policies
    assert got.token_scores.tolist() == [-1.0, -3.0] and got.selected.tolist() == [True, True]
    assert got.details["far_tokens"] == [0] and got.details["local_tokens"] == [1]


def test_one_word_text_is_unswappable():
    stats = make_stats([-1.0, -4.0, -2.0], text="Harbour.")
    lm = TableLM({})  # any pass would fail: none is made
    got = score("pac", stats, lm=lm)
    assert got.value == 0.0 and got.details["unswappable"] is True and got.details["pac"] == 0.0
    assert [row["copy"] for row in got.details["copies"]] == ["Harbour."] * 5 and not lm.calls
    assert got.selected.tolist() == [True, True, False]  # far = −1, local = −4
    assert score("pac", make_stats([-1.0, -3.0], text="x y"), lm=TableLM({"x y": [-1.0, -3.0], "y x": [-1.0, -3.0]})
                 ).details["unswappable"] is False


@pytest.mark.parametrize("bos", ["auto", "none"])
def test_score_matches_naive_recomputation(llama_lm, bos):
    for text in TEXTS[:2]:
        stats = llama_lm.token_stats([text], bos=bos)[0]
        got = score("pac", stats, lm=llama_lm, seed=7)
        lp = oracle_logprob(llama_lm, text, bos)
        copies = naive_copies(text, 0.3, 5, 7)
        assert [row["copy"] for row in got.details["copies"]] == copies and any(c != text for c in copies)
        copy_pds = [naive_pd(oracle_logprob(llama_lm, c, bos)) for c in copies]
        rel_close(got.details["pd"], naive_pd(lp))
        for row, want in zip(got.details["copies"], copy_pds):
            rel_close(row["pd"], want)
        rel_close(got.value, float(np.mean(copy_pds)) - naive_pd(lp))
        np.testing.assert_allclose(got.token_scores, lp, rtol=1e-5, atol=1e-6)
        order = np.argsort(lp, kind="stable")
        n_far, n_loc = max(1, len(lp) // 20), max(1, 3 * len(lp) // 10)
        assert got.details["far_tokens"] == sorted(order[len(lp) - n_far:].tolist())
        assert got.details["local_tokens"] == sorted(order[:n_loc].tolist())
        assert np.flatnonzero(got.selected).tolist() == sorted(set(order[len(lp) - n_far:]) | set(order[:n_loc]))


def separate_lm(lm, folder):
    """The same weights behind a statistics cache of its own (nothing computed is shared)."""
    return LanguageModel(lm.model, lm.tokenizer, name="tiny", stats_cache=StatsCache(folder))


def test_prepare_batches_all_copies_and_agrees_with_per_text_scores(llama_lm, tmp_path, monkeypatch):
    texts = TEXTS + ["Meadow."]
    with_prepare = score_texts(llama_lm, texts, ["pac"], n_augment=3)["pac"].to_numpy()
    alone = separate_lm(llama_lm, tmp_path / "alone")
    without = [score("pac", st, lm=alone, n_augment=3).value for st in alone.token_stats(texts)]
    np.testing.assert_allclose(with_prepare, without, rtol=1e-5, atol=1e-7)
    assert with_prepare[-1] == 0.0  # the one-word text

    fresh = separate_lm(llama_lm, tmp_path / "fresh")
    stats = fresh.token_stats(texts)
    computed = []
    real = fresh._compute
    monkeypatch.setattr(fresh, "_compute", lambda texts, *a: computed.append(list(texts)) or real(texts, *a))
    params = PacParams(n_augment=3)
    contexts = METHODS["pac"].prepare(stats, params, lm=fresh)
    want = list(dict.fromkeys(c for t in TEXTS for c in naive_copies(t, 0.3, 3, 0)))
    assert computed == [want]  # one model run over every copy of every swappable text
    assert contexts[-1] == {}  # the one-word text has no copy to score
    for st, context in zip(stats, contexts):
        assert set(context) == set(naive_copies(st.text, 0.3, 3, 0)) if context else st.text == "Meadow."
        METHODS["pac"].fn(st, params, lm=fresh, context=context)
    assert computed == [want]  # the scorer reads its text's copies from its context: no further pass


def test_scores_do_not_depend_on_text_order(llama_lm, tmp_path):
    texts = TEXTS + random_texts(3, seed=32, min_words=5, max_words=12)
    first = score_texts(llama_lm, texts, ["pac"])["pac"].to_numpy()
    perm = np.random.default_rng(0).permutation(len(texts))
    shuffled = score_texts(separate_lm(llama_lm, tmp_path / "shuffled"), [texts[i] for i in perm], ["pac"])
    np.testing.assert_allclose(shuffled["pac"].to_numpy(), first[perm], rtol=1e-5, atol=1e-7)
    assert len(set(np.round(first, 6))) == len(texts)  # the texts really score differently


def test_truncated_text_is_augmented_from_its_scored_part(make_lm, llama_lm):
    short = make_lm(llama_lm.model, llama_lm.tokenizer, max_length=16)
    text = random_texts(1, seed=5, min_words=30, max_words=30)[0]
    stats = short.token_stats([text], long_text="truncate")[0]
    assert stats.long_text == "truncated" and stats.scored_text != text
    got = score("pac", stats, lm=short)
    copies = [row["copy"] for row in got.details["copies"]]
    assert copies == naive_copies(stats.scored_text, 0.3, 5, 0, key=text)
    copy_stats = short.token_stats(copies, long_text="truncate")
    rel_close(got.value, np.mean([naive_pd(s.logprob) for s in copy_stats]) - naive_pd(stats.logprob))


def test_empty_text_and_bad_parameters_are_errors(llama_lm):
    empty = llama_lm.token_stats([""])[0]
    with pytest.raises(ValueError, match="no token to score"):
        score("pac", empty, lm=llama_lm)
    with pytest.raises(ValueError, match="text 1: no token to score"):
        score_texts(llama_lm, [TEXTS[0], ""], ["pac"])
    for bad, match in [({"alpha": 0.0}, "alpha"), ({"alpha": 1.5}, "alpha"), ({"alpha": True}, "alpha"),
                       ({"n_augment": 0}, "n_augment"), ({"n_augment": 2.0}, "n_augment"), ({"seed": -1}, "seed")]:
        with pytest.raises(ValueError, match=match):
            PacParams(**bad)


def test_registration():
    spec = METHODS["pac"]
    assert spec.needs == ("stats", "lm") and spec.access.further_passes and not spec.access.full_distribution and spec.token_level
    assert spec.param_names == ("alpha", "n_augment", "seed") and spec.prepare is not None
    assert spec.cost == "1 + N forward passes (augmented copies)"
    assert "widens" in spec.reading(0.5) and "narrows" in spec.reading(-0.5)
