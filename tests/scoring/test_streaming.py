"""`score_texts` scores the methods that need only the statistics while the statistics stream in: the same numbers
and the same first error as scoring them afterwards."""
from __future__ import annotations

import dataclasses

import pytest

from mia_core import METHODS, score_texts
from mia_core.model import language_model, pipeline

from tests.support.tiny import random_texts

METHOD_NAMES = ["loss", "zlib", "min_k", "min_k_pp", "surp"]


def test_score_texts_scores_as_statistics_arrive_with_the_same_numbers(llama_lm, monkeypatch):
    texts = random_texts(40, seed=12, min_words=20, max_words=40)
    monkeypatch.setattr(language_model, "CPU_BATCH_TOKENS", 400)  # several batches
    launched, calls, texts_per_call = [], [], []
    real_launch, real_loss = pipeline._launch, METHODS["loss"].batch
    monkeypatch.setattr(pipeline, "_launch", lambda *a: launched.append(1) or real_launch(*a))

    def counted_batch(batch, params, **inputs):
        calls.append(len(launched))
        texts_per_call.append(len(batch.stats))
        return real_loss(batch, params, **inputs)

    monkeypatch.setitem(METHODS, "loss", dataclasses.replace(METHODS["loss"], batch=counted_batch))
    streamed = score_texts(llama_lm, texts, METHOD_NAMES)
    assert len(launched) > 3 and sum(texts_per_call) == len(texts)
    assert len(calls) < len(texts) / 2  # a call per finished batch, not per text
    assert min(calls) < len(launched)  # the first texts were scored before the last batch was launched
    given = score_texts(llama_lm, texts, METHOD_NAMES, stats=llama_lm.token_stats(texts))
    assert streamed.equals(given)


def test_the_first_error_is_the_same_as_when_scored_afterwards(llama_lm, monkeypatch):
    monkeypatch.setattr(language_model, "CPU_BATCH_TOKENS", 300)
    texts = random_texts(12, seed=13, min_words=20, max_words=40)
    broken = texts[:3] + [""] + texts[3:9] + [" "] + texts[9:]
    with pytest.raises(ValueError, match=r"^text 3: no token to score") as streamed:
        score_texts(llama_lm, broken, METHOD_NAMES)
    with pytest.raises(ValueError) as afterwards:
        score_texts(llama_lm, broken, METHOD_NAMES, stats=llama_lm.token_stats(broken))
    assert str(streamed.value) == str(afterwards.value)


def test_missing_inputs_are_named_in_the_order_they_were(llama_lm):
    with pytest.raises(TypeError, match="'ref'.*ref_model="):  # the reference pass's need comes before freq=
        score_texts(llama_lm, ["A text."], ["dc_pdd", "ref"])
    with pytest.raises(ValueError, match="stats= must hold"):  # given statistics are checked first, as before
        score_texts(llama_lm, ["A text."], ["dc_pdd"], stats=[])


def test_an_error_of_another_kind_waits_its_turn(llama_lm, monkeypatch):
    texts = random_texts(8, seed=14, min_words=5, max_words=20)
    texts[3] = ""
    real = METHODS["loss"].fn

    def loss_failing_on_text_5(stats, params, **kwargs):
        if stats.text == texts[5]:
            raise RuntimeError("a plug-in method's own failure")
        return real(stats, params, **kwargs)

    # a method without a batch form (a plug-in's), scored text by text
    monkeypatch.setitem(METHODS, "loss", dataclasses.replace(METHODS["loss"], fn=loss_failing_on_text_5, batch=None))
    with pytest.raises(ValueError, match="^text 3: "):  # min_k comes first, and fails on text 3
        score_texts(llama_lm, texts, ["min_k", "loss"])
    with pytest.raises(RuntimeError, match="plug-in"):  # loss first: text 3 is empty, but text 5 raises first…
        score_texts(llama_lm, [t or "x y z" for t in texts], ["loss", "min_k"])
