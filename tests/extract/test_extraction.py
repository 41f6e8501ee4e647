"""(n,p)-discoverable extraction against independent computations: a float64 re-computation from full logits,
greedy decoding with `generate`, and a seeded Monte-Carlo estimate from top-k samples (METHODS-FIELD.md §11)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import binomtest

from mia_core import LanguageModel, extraction
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.extract.reduce import reduce_suffix_logits
from mia_core.extract.result import n_needed
from mia_core.extract.windows import window_starts
from mia_core.model.stats_cache import StatsCache

from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer, train_causal_lm

MEMORISED = random_texts(3, seed=11, min_words=28, max_words=32)
UNSEEN = random_texts(2, seed=12, min_words=28, max_words=32)
SMALL = dict(prefix=8, suffix=6, stride=3)


def passages_at_every_word(text: str, words: int = 14) -> list[str]:
    """The text, and each run of `words` words from its second word on (with the space before it, as it is tokenised
    inside the text): a passage seen in many contexts, as a book's passage is in pretraining chunks."""
    split = text.split(" ")
    return [text] + [" " + " ".join(split[i : i + words]) for i in range(1, len(split) - words + 1)]


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    """A tiny Llama trained until it reproduces most windows of two texts (MEMORISED[:2]); the others it never saw."""
    tok = tiny_tokenizer(300)
    docs = passages_at_every_word(MEMORISED[0]) + passages_at_every_word(MEMORISED[1])
    model = train_causal_lm(tiny_llama(len(tok), seed=2), tok, docs, steps=80, lr=5e-3)
    return LanguageModel(model, tok, name="tiny-memorised", stats_cache=StatsCache(tmp_path_factory.mktemp("stats")))


def naive_logq(z: np.ndarray, true: int, k: int, temperature: float) -> float:
    """log q(true) under top-k sampling at a temperature, from one row of logits, in float64 (ties at the k-th kept)."""
    z = np.asarray(z, np.float64) / temperature
    kth = np.sort(z)[::-1][min(k, len(z)) - 1]
    kept = z[z >= kth]
    if z[true] < kth:
        return -math.inf
    top = kept.max()
    return float(z[true] - (top + math.log(np.exp(kept - top).sum())))


def naive_windows(lm: LanguageModel, text: str, s: ExtractionSettings) -> tuple[list[float], list[bool]]:
    """log10 p_z and the greedy flag of every window, one window at a time, from the model's full float64 logits."""
    model = lm.model.double()
    try:
        ids = lm.tokenizer(text)["input_ids"]
        boundary = lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        pz, greedy = [], []
        for start in window_starts(len(ids), s.window, s.stride):
            fed = [boundary] + ids[start : start + s.window]
            with torch.no_grad():
                logits = model(torch.tensor([fed])).logits[0].numpy()
            total, all_top = 0.0, True
            for t in range(1 + s.prefix, len(fed)):
                total += naive_logq(logits[t - 1], fed[t], s.top_k, s.temperature)
                all_top &= bool((logits[t - 1] > logits[t - 1][fed[t]]).sum() == 0)
            pz.append(total / math.log(10))
            greedy.append(all_top)
        return pz, greedy
    finally:
        model.float()


def test_reduction_matches_float64_definition_with_ties():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(40, 97, generator=gen, dtype=torch.float64).round(decimals=1)  # many ties, some at the k-th
    targets = torch.randint(0, 97, (40,), generator=gen)
    for k, temperature in [(1, 1.0), (5, 1.0), (40, 0.7), (97, 1.3), (500, 1.0)]:
        logq, rank = reduce_suffix_logits(logits, targets, k, temperature)
        expected = [naive_logq(logits[i].numpy(), int(targets[i]), k, temperature) for i in range(40)]
        for got, want in zip(logq.tolist(), expected):
            assert got == pytest.approx(want, abs=1e-12) if math.isfinite(want) else got == -math.inf
        assert rank.tolist() == [int((logits[i] > logits[i, targets[i]]).sum()) + 1 for i in range(40)]


def test_ties_at_the_kth_logit_are_all_kept():
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 0.0]], dtype=torch.float64)
    logq, _ = reduce_suffix_logits(logits, torch.tensor([3]), 2, 1.0)  # k = 2: 3.0 and all three 2.0s kept
    assert logq.item() == pytest.approx(2.0 - math.log(math.exp(3.0) + 3 * math.exp(2.0)), abs=1e-12)
    logq, _ = reduce_suffix_logits(logits, torch.tensor([4]), 2, 1.0)
    assert logq.item() == -math.inf


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-6), (torch.float32, 2e-4)])
def test_windows_match_a_float64_recomputation(memorised, dtype, tol):
    settings = ExtractionSettings(**SMALL, top_k=5, temperature=1.3)
    text = MEMORISED[0] + " " + UNSEEN[0]
    memorised.model.to(dtype)
    try:
        got = extract_texts(memorised, [text], settings, cache=False)[0]
    finally:
        memorised.model.float()
    want_pz, want_greedy = naive_windows(memorised, text, settings)
    assert got.n_windows == len(want_pz) > 10
    for a, b in zip(got.windows["log10_pz"], want_pz):
        assert (a == b == -math.inf) or a == pytest.approx(b, abs=tol)
    assert got.windows["greedy"].tolist() == want_greedy
    assert any(math.isfinite(v) for v in want_pz) and any(not math.isfinite(v) for v in want_pz)


def test_greedy_flag_agrees_with_generate(memorised):
    settings = ExtractionSettings(**SMALL)
    results = extract_texts(memorised, MEMORISED[:1] + UNSEEN[:1], settings, cache=False)
    flags = [r.windows["greedy"].to_numpy() for r in results]
    assert flags[0].mean() > 0.5 and flags[1].mean() == 0  # memorised vs unseen, so both kinds are checked
    tok, boundary = memorised.tokenizer, memorised.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for text, result in zip(MEMORISED[:1] + UNSEEN[:1], results):
        ids = tok(text)["input_ids"]
        for start, greedy in zip(result.windows["token_start"], result.windows["greedy"]):
            prefix = [boundary] + ids[start : start + settings.prefix]
            suffix = ids[start + settings.prefix : start + settings.window]
            out = memorised.model.generate(torch.tensor([prefix]), attention_mask=torch.ones(1, len(prefix), dtype=torch.long),
                                           do_sample=False, max_new_tokens=settings.suffix,
                                           min_new_tokens=settings.suffix, pad_token_id=boundary)
            assert (out[0, len(prefix):].tolist() == suffix) == bool(greedy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_on_cuda_windows_match_float64_and_greedy_flags_match_generate(memorised, dtype):
    """The pass on a CUDA device: float32 within 2e-4 of the host's float64 re-computation; in bf16 the greedy flag is
    exactly what greedy `generate` on the same device and dtype reproduces."""
    settings = ExtractionSettings(**SMALL, top_k=5, temperature=1.3)
    text = MEMORISED[0] + " " + UNSEEN[0]
    want_pz, want_greedy = naive_windows(memorised, text, settings)
    memorised.model.to("cuda", dtype)
    try:
        got = extract_texts(memorised, [text], settings, cache=False)[0]
        tok, boundary = memorised.tokenizer, memorised.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        ids = tok(text)["input_ids"]
        decoded = []
        for start in got.windows["token_start"]:
            prefix = torch.tensor([[boundary] + ids[start : start + settings.prefix]], device="cuda")
            out = memorised.model.generate(prefix, attention_mask=torch.ones_like(prefix), do_sample=False,
                                           max_new_tokens=settings.suffix, min_new_tokens=settings.suffix,
                                           pad_token_id=boundary)
            decoded.append(out[0, prefix.shape[1]:].tolist() == ids[start + settings.prefix : start + settings.window])
    finally:
        memorised.model.to("cpu", torch.float32)
    assert got.windows["greedy"].tolist() == decoded and any(decoded) and not all(decoded)
    if dtype == torch.float32:
        assert got.windows["greedy"].tolist() == want_greedy
        for a, b in zip(got.windows["log10_pz"], want_pz):
            assert (a == b == -math.inf) or a == pytest.approx(b, abs=2e-4)


def test_pz_matches_a_monte_carlo_estimate_from_top_k_samples(memorised):
    settings = ExtractionSettings(**SMALL, top_k=8, temperature=1.6)
    result = extract_texts(memorised, MEMORISED[:2], settings, cache=False)
    tok, boundary = memorised.tokenizer, memorised.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    checked = 0
    for text, res in zip(MEMORISED[:2], result):
        ids = tok(text)["input_ids"]
        w = res.windows
        for start, pz in zip(w["token_start"], w["pz"]):
            if not 1e-2 <= pz <= 0.95 or checked >= 4:
                continue
            prefix = [boundary] + ids[start : start + settings.prefix]
            suffix = ids[start + settings.prefix : start + settings.window]
            torch.manual_seed(1000 + checked)
            n = 3000
            out = memorised.model.generate(torch.tensor([prefix]), attention_mask=torch.ones(1, len(prefix), dtype=torch.long),
                                           do_sample=True, top_k=settings.top_k, top_p=1.0,
                                           temperature=settings.temperature, max_new_tokens=settings.suffix,
                                           min_new_tokens=settings.suffix, num_return_sequences=n,
                                           pad_token_id=boundary)
            hits = int((out[:, len(prefix):] == torch.tensor(suffix)).all(-1).sum())
            low, high = binomtest(hits, n).proportion_ci(0.999)
            assert low <= pz <= high, (start, pz, hits / n)
            checked += 1
    assert checked >= 2


def test_n_needed_by_hand():
    log10 = np.log10([0.5, 0.1, 1.0, 1e-12]).tolist() + [-math.inf]
    # p = 0.5: 1 draw at p_z = 0.5; ceil(log 0.5 / log 0.9) = ceil(6.58) = 7 at 0.1; ceil(0.693e12) at 1e-12
    assert n_needed(np.array(log10), 0.5).tolist() == [1, 7, 1, math.ceil(math.log(2) * 1e12), math.inf]
    assert n_needed(np.array(log10), 0.95).tolist()[:3] == [5, 29, 1]  # log 0.05 / log 0.5 = 4.32; / log 0.9 = 28.4


def test_window_starts_cover_the_tail_and_short_texts_have_none():
    assert window_starts(25, 14, 3).tolist() == [0, 3, 6, 9, 11]
    assert window_starts(26, 14, 3).tolist() == [0, 3, 6, 9, 12]
    assert window_starts(13, 14, 3).tolist() == []
    result = extraction(LanguageModel(tiny_llama(300), tiny_tokenizer(300), name="t"), "a few words", **SMALL,
                        cache=False)
    assert result.n_windows == 0 and math.isnan(result.share_at(0.5)) and result.passages() == []


def test_per_character_maximum_and_passages(memorised):
    text = UNSEEN[0] + " " + MEMORISED[1]
    result = extraction(memorised, text, **SMALL, cache=False)
    w = result.windows
    chars = result.char_max_log10_pz()
    for c in range(0, len(text), 7):  # each character: the max over the windows whose suffix covers it, by a loop
        covering = [v for a, b, v in zip(w["suffix_char_start"], w["char_end"], w["log10_pz"]) if a <= c < b]
        assert chars[c] == (max(covering) if covering else -math.inf)
    passages = result.passages(0.5)
    assert passages and all(text[p.start : p.end] in MEMORISED[1] for p in passages)
    for p in passages:  # a passage is exactly the union of its windows' suffixes, and its p_z is theirs at least
        inside = w[(w["suffix_char_start"] >= p.start) & (w["char_end"] <= p.end) & (w["pz"] >= 0.5)]
        assert len(inside) == p.windows and inside["log10_pz"].min() == p.min_log10_pz
        assert (chars[p.start : p.end] >= math.log10(0.5)).all()
    assert result.longest_passage().chars == max(p.chars for p in passages)


def test_repeated_windows_are_computed_once_and_results_are_cached(memorised):
    text = " ".join([MEMORISED[2]] * 3)
    settings = ExtractionSettings(prefix=8, suffix=6, stride=1)  # every start: windows inside a repeat recur
    seen = []
    first = extract_texts(memorised, [text], settings, progress=lambda d, t: seen.append(t))[0]
    assert seen and seen[-1] < first.n_windows  # distinct windows only
    again = extract_texts(memorised, [text], settings, progress=lambda d, t: pytest.fail("recomputed"))[0]
    assert again.windows.equals(first.windows)
    uncached = extract_texts(memorised, [text], settings, cache=False)[0]
    assert uncached.windows["log10_pz"].tolist() == first.windows["log10_pz"].tolist()


def test_order_and_batching_do_not_change_results(memorised):
    settings = ExtractionSettings(**SMALL, top_k=40)
    texts = MEMORISED + UNSEEN
    one = [extract_texts(memorised, [t], settings, cache=False, batch_tokens=15)[0] for t in texts]
    together = extract_texts(memorised, texts[::-1], settings, cache=False, batch_tokens=4096)[::-1]
    for a, b in zip(one, together):
        np.testing.assert_allclose(a.windows["log10_pz"], b.windows["log10_pz"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("bad, message", [
    (dict(prefix=0), "prefix"), (dict(stride=1.5), "stride"), (dict(top_k=0), "top-k"),
    (dict(temperature=0), "temperature"), (dict(temperature=float("nan")), "temperature"), (dict(bos="yes"), "BOS"),
])
def test_settings_are_validated(bad, message):
    with pytest.raises(ValueError, match=message):
        ExtractionSettings(**bad)


def test_too_many_windows_are_refused_before_the_model_runs(memorised, monkeypatch):
    monkeypatch.setattr("mia_core.extract.run.MAX_WINDOWS", 10)
    with pytest.raises(ValueError, match=r"more than 10 at once: raise the stride \(now 3 tokens\)"):
        extract_texts(memorised, [" ".join(UNSEEN)], ExtractionSettings(**SMALL),
                      progress=lambda d, t: pytest.fail("ran"), cache=False)


def test_a_window_longer_than_the_context_is_refused(memorised):
    with pytest.raises(ValueError, match=r"an extraction window is 301 tokens fed, more than .* context of 256"):
        extract_texts(memorised, [" ".join(UNSEEN * 4)], ExtractionSettings(prefix=150, suffix=150), cache=False)
