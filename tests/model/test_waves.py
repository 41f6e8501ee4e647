"""Texts tokenised in waves: every text in order, the next wave asked for once the device has work, the same
statistics as one wave, and progress that ends exact."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mia_core.model import encoding, language_model, pipeline, waves
from mia_core.model.forward import FLOAT_STATS, INT_STATS, Segment
from mia_core.model.pipeline import Wave

from tests.support.tiny import random_texts, tiny_llama


def test_plan_waves_covers_every_text_in_order_and_doubles():
    chars = [100] * 1000
    plan = waves.plan_waves(chars, budget_tokens=500)  # first wave ≈ 0.5 × 500 tokens × 4 chars = 1,000 chars
    assert plan[0] == (0, 10) and plan[1] == (10, 30) and plan[2] == (30, 70)
    assert [a for a, _ in plan[1:]] == [b for _, b in plan[:-1]] and plan[-1][1] == 1000
    assert waves.plan_waves([10**9, 5], budget_tokens=10) == [(0, 1), (1, 2)]  # at least one text a wave
    many = waves.plan_waves([1] * (encoding.BATCH_TEXTS * 3), budget_tokens=10**9)
    assert max(b - a for a, b in many) == encoding.BATCH_TEXTS  # the tokenizer's memory bound


def segments_in_waves(lm, texts, sizes):
    """Waves of the texts' segments, recording when each is asked for."""
    asked, start, out = [], 0, []
    for n, size in enumerate(sizes):
        chunk = [Segment(start + j, lm.fed_ids(t), 1) for j, t in enumerate(texts[start:start + size])]
        out.append(Wave(chunk, 0, n == len(sizes) - 1))
        start += size

    def gen():
        for n, wave in enumerate(out):
            asked.append(n)
            yield wave

    return gen(), asked


@pytest.mark.parametrize("lookahead", [0, 1])
def test_the_next_wave_is_asked_for_once_the_first_batch_of_this_one_is_launched(llama_lm, monkeypatch, lookahead):
    texts = random_texts(30, seed=5, min_words=5, max_words=30)
    events, real = [], pipeline._launch
    gen, asked = segments_in_waves(llama_lm, texts, [10, 10, 10])
    monkeypatch.setattr(pipeline, "_launch", lambda *a: events.append(("launch", len(asked))) or real(*a))
    got = {}
    for batch in pipeline.iter_wave_batches(llama_lm.model, gen, batch_tokens=120, lookahead=lookahead):
        events.append(("finish", len(asked)))
        got.update(zip(batch.indices, batch.stats))
    assert sorted(got) == list(range(30))  # every segment once, indices across waves
    launches = [n for kind, n in events if kind == "launch"]
    assert launches[0] == 1 and launches.count(1) == 1  # wave 2 was asked right after wave 1's first launch
    first_finish = next(n for kind, n in events if kind == "finish")
    assert first_finish == 2  # … before the host finished anything
    plain = list(pipeline.iter_batches(llama_lm.model, [Segment(i, llama_lm.fed_ids(t), 1) for i, t in enumerate(texts)],
                                       batch_tokens=120, lookahead=lookahead))
    want = {i: s for b in plain for i, s in zip(b.indices, b.stats)}
    for i in range(30):
        for name in FLOAT_STATS + INT_STATS:
            np.testing.assert_allclose(got[i][name], want[i][name], rtol=0, atol=2e-5)


def test_token_stats_in_waves_equal_one_wave_and_progress_ends_exact(llama_lm, monkeypatch):
    texts = random_texts(60, seed=6, min_words=1, max_words=50) + ["", "x"]
    one = llama_lm.token_stats(texts, cache=False, batch_tokens=256)
    plans = []

    def planned(self, texts, budget):
        plans.append(waves.plan_waves([len(t) for t in texts], budget))
        return plans[-1]

    monkeypatch.setattr(language_model.LanguageModel, "_wave_plan", planned)
    seen, groups = [], []
    many = llama_lm.token_stats(texts, cache=False, batch_tokens=256, progress=lambda d, t: seen.append((d, t)),
                                on_batch=lambda indices, stats: groups.append(indices))
    assert len(plans[0]) >= 3
    assert sorted(i for g in groups for i in g) == list(range(len(texts)))
    assert all(d <= t for d, t in seen) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1][0] == seen[-1][1] == sum(len(llama_lm.fed_ids(t)) for t in texts if len(llama_lm.fed_ids(t)) > 1)
    for a, b in zip(many, one):
        assert a.text == b.text and a.long_text == b.long_text
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_array_equal(a.offsets, b.offsets)
        np.testing.assert_allclose(a.logprob, b.logprob, rtol=0, atol=2e-5)  # other batches: float32 rounding only
        np.testing.assert_allclose(a.sigma, b.sigma, rtol=0, atol=2e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="waves are planned on CUDA only (run on the GPU machine)")
def test_on_cuda_texts_come_in_waves_with_the_statistics_of_the_cpu(tok, make_lm, monkeypatch):
    cpu = make_lm(tiny_llama(len(tok), seed=0, logits_width=320), tok)
    gpu = make_lm(tiny_llama(len(tok), seed=0, logits_width=320).cuda(), tok)
    texts = random_texts(300, seed=9, min_words=1, max_words=60)
    asked = []
    real = waves.plan_waves
    monkeypatch.setattr(language_model, "plan_waves", lambda chars, budget: asked.append(real(chars, 64)) or asked[-1])
    got = gpu.token_stats(texts, cache=False, batch_tokens=512)
    assert len(asked) == 1 and len(asked[0]) >= 3
    for a, b in zip(got, cpu.token_stats(texts, cache=False, batch_tokens=512)):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logprob, b.logprob, rtol=0, atol=1e-4)
