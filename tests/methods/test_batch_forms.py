"""Batch forms (`MethodSpec.batch`): one vectorised pass over a batch gives every text the per-text form's value."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mia_core import METHODS, score_texts
from mia_core.api import StatsBatch, TokenStats, batch_lowest_k, first_occurrences_batch, lowest_k
from mia_core.api.token_stats import TokenStrings
from mia_core.methods.dc_pdd import first_occurrences
from mia_core.methods.dc_pdd.frequency import FrequencyTable
from mia_core.model.identity import tokenizer_fingerprint
from mia_core.scoring import stream

from tests.support.tiny import random_texts

BATCHED = sorted(name for name, spec in METHODS.items() if spec.batch is not None)
VOCAB = 50


def fake_stats(rng: np.random.Generator, n: int, *, ties: bool = False, nan: bool = False) -> TokenStats:
    """Statistics of a text of n tokens: ids from a small vocabulary (repeats), log-probs with ties or a NaN."""
    logprob = -rng.exponential(2.0, n).astype(np.float32)
    if ties:
        logprob = np.round(logprob).astype(np.float32)  # many equal values: the tie order matters
    if nan and n > 2:
        logprob[rng.integers(n)] = np.nan
    sigma = rng.uniform(0.0, 3.0, n).astype(np.float32)
    sigma[rng.random(n) < 0.1] = 0.0  # σ = 0: the floor
    text = " ".join(f"w{j}" for j in range(n))
    return TokenStats(text=text, token_ids=rng.integers(0, VOCAB, n).astype(np.int64), tokens=TokenStrings(text, np.zeros((n, 2), np.int64), {}),
                      offsets=np.zeros((n, 2), np.int64), logprob=logprob, mu=(-rng.uniform(1, 5, n)).astype(np.float32),
                      sigma=sigma, top1_id=np.zeros(n, np.int64), top1_logprob=np.zeros(n, np.float32),
                      entropy=np.ones(n, np.float32), rank=np.ones(n, np.int64), vocab_width=VOCAB)


def inputs_for(name: str) -> dict:
    if name == "dc_pdd":
        counts = np.random.default_rng(1).integers(0, 40, VOCAB)
        return {"freq": FrequencyTable(counts=counts, tokenizer_fingerprint="test", corpus="random", n_texts=1)}
    return {}


def test_every_statistics_only_seed_method_has_a_batch_form():
    assert {"loss", "zlib", "min_k", "min_k_pp", "dc_pdd"} <= set(BATCHED)


@pytest.mark.parametrize("name", BATCHED)
@pytest.mark.parametrize("k", [0.05, 0.2, 0.29, 1.0])
def test_the_batch_form_gives_every_text_its_per_text_value(name, k):
    spec = METHODS[name]
    rng = np.random.default_rng(7)
    lengths = [1, 2, 3, 7, 10, 100, 257, 1000] + list(rng.integers(1, 60, 24))
    stats = [fake_stats(rng, int(n), ties=j % 3 == 0, nan=j % 7 == 6) for j, n in enumerate(lengths)]
    params = spec.make_params(**({"k": k} if "k" in spec.param_names else {}))
    inputs = inputs_for(name)
    got = spec.batch(StatsBatch(tuple(stats)), params, **inputs)
    want = np.array([spec.fn(st, params, **inputs).value for st in stats])
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)  # float64 summation order only


@pytest.mark.parametrize("name", [n for n in BATCHED if "k" in METHODS[n].param_names])
@pytest.mark.parametrize("k", [np.float32(0.7), np.float32(0.3), np.float16(0.3), np.float64(0.29)])
def test_a_numpy_k_selects_what_its_decimal_selects_in_both_forms(name, k):
    """In float32, 10 · 0.7 rounds up to 7 while the float64 of float32 0.7 gives 6: every form takes k as the decimal
    it prints as, so each text averages the tokens the Python float k would choose."""
    spec = METHODS[name]
    rng = np.random.default_rng(11)
    stats = [fake_stats(rng, n) for n in (10, 20, 30, 40, 100, 7)]
    as_numpy, as_python = spec.make_params(k=k), spec.make_params(k=float(str(k)))
    assert type(as_numpy.k) is float and as_numpy == as_python
    want = np.array([spec.fn(st, as_python).value for st in stats])
    np.testing.assert_allclose(spec.batch(StatsBatch(tuple(stats)), as_numpy), want, rtol=1e-12, atol=0)
    for st in stats:  # the bare helpers too, called with the NumPy k itself
        assert lowest_k(st.logprob.astype(np.float64), k).selected.sum() == max(1, int(st.n_scored * float(str(k))))
    lengths = np.array([st.n_scored for st in stats])
    padded = np.full((len(stats), 100), np.nan)
    for row, st in zip(padded, stats):
        row[: st.n_scored] = st.logprob
    np.testing.assert_allclose(batch_lowest_k(padded, lengths, k),
                               [lowest_k(st.logprob.astype(np.float64), float(str(k))).value for st in stats], rtol=1e-12)


def test_batch_lowest_k_by_hand():
    values = np.array([[3.0, 1.0, 2.0, np.nan], [5.0, -1.0, 5.0, 0.0]])  # row 0 has 3 tokens: its NaN is padding
    lengths = np.array([3, 4])
    np.testing.assert_array_equal(batch_lowest_k(values, lengths, 0.5), [1.0, -0.5])  # 1 of 3 lowest, 2 of 4
    np.testing.assert_allclose(batch_lowest_k(values, lengths, 0.75), [1.5, 4 / 3])  # 2 of 3, 3 of 4
    for row, n in zip(values, lengths):
        assert lowest_k(row[:n], 0.75).value == pytest.approx(batch_lowest_k(row[None, :n], np.array([n]), 0.75)[0])


@pytest.mark.parametrize("top", [VOCAB, 2**40, 2**62])  # the sorted keys id·width + position, then the argsort
def test_first_occurrences_batch_marks_each_rows_first_of_every_id(top):
    rng = np.random.default_rng(5)
    lengths = np.array([1, 2, 9, 40, 40, 17])
    ids = np.full((len(lengths), 40), -1, np.int64)  # -1: the padding, as `StatsBatch.token_ids`
    for row, n in zip(ids, lengths):
        row[:n] = rng.choice(np.array([0, 3, top - 1, top // 2], np.int64), n)  # few distinct ids: many repeats
    valid = np.arange(40)[None, :] < lengths[:, None]
    got = first_occurrences_batch(ids, valid)
    for row, n, mask in zip(ids, lengths, got):
        seen: set[int] = set()
        want = [int(t) not in seen and not seen.add(int(t)) for t in row[:n]]  # the first time each id is seen
        assert mask[:n].tolist() == want and not mask[n:].any()
        np.testing.assert_array_equal(mask[:n], first_occurrences(row[:n]))


def test_a_method_without_a_batch_form_scores_the_same_text_by_text(llama_lm, monkeypatch):
    texts = random_texts(30, seed=21, min_words=3, max_words=40)
    batched = score_texts(llama_lm, texts, ["loss", "zlib", "min_k", "min_k_pp", "surp"])
    for name in ["loss", "zlib", "min_k", "min_k_pp"]:
        monkeypatch.setitem(METHODS, name, dataclasses.replace(METHODS[name], batch=None))
    plain = score_texts(llama_lm, texts, ["loss", "zlib", "min_k", "min_k_pp", "surp"])
    np.testing.assert_allclose(batched.to_numpy(), plain.to_numpy(), rtol=1e-12, atol=0)


def test_long_texts_go_to_the_per_text_form_and_groups_stay_bounded(monkeypatch):
    monkeypatch.setattr(stream, "BATCH_MAX_TOKENS", 50)
    monkeypatch.setattr(stream, "BATCH_ELEMENTS", 200)
    rng = np.random.default_rng(3)
    stats = [fake_stats(rng, n) for n in (10, 60, 40, 30, 5, 45, 20)]
    groups = stream.batch_groups(stats)
    assert sorted(j for g in groups for j in g) == [0, 2, 3, 4, 5, 6]  # text 1 (60 tokens) alone, per text
    assert all(len(g) * max(stats[j].n_scored for j in g) <= 200 for g in groups)


def test_a_batch_the_method_refuses_is_scored_text_by_text_with_its_error(llama_lm):
    counts = np.ones(7, np.int64)  # a table of another vocabulary's width
    freq = FrequencyTable(counts=counts, tokenizer_fingerprint=tokenizer_fingerprint(llama_lm.tokenizer), corpus="x",
                          n_texts=1)
    with pytest.raises(ValueError, match="^text 0: frequency table has 7 entries but the model's logits are 320 wide"):
        score_texts(llama_lm, random_texts(5, seed=2), ["dc_pdd"], freq=freq)


def test_a_batch_form_that_fails_otherwise_falls_back_to_the_per_text_errors(llama_lm):
    """DC-PDD on given statistics without a vocabulary width and a table narrower than the ids: the batch form's
    IndexError is not the error; the per-text form's errors are, raised after the pass in text order (text 0 empty)."""
    texts = random_texts(6, seed=3)
    texts[0] = ""
    stats = [dataclasses.replace(st, vocab_width=0) for st in llama_lm.token_stats(texts)]
    freq = FrequencyTable(counts=np.ones(20, np.int64), tokenizer_fingerprint=tokenizer_fingerprint(llama_lm.tokenizer),
                          corpus="x", n_texts=1)
    errors = []
    for batch in (METHODS["dc_pdd"].batch, None):
        spec = dataclasses.replace(METHODS["dc_pdd"], batch=batch)
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(METHODS, "dc_pdd", spec)
            with pytest.raises(Exception) as raised:
                score_texts(llama_lm, texts, ["loss", "dc_pdd"], stats=stats, freq=freq)
        errors.append((type(raised.value), str(raised.value)))
    assert errors[0] == errors[1] and errors[0][0] is ValueError and errors[0][1].startswith("text 0: ")
