"""Batch planning for GPUs, checked on the CPU: padding-aware packing, the memory budget, halving on OOM,
batched tokenisation, and the head's logits."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import mia_core
from mia_core.model import encoding, forward, language_model, pipeline
from mia_core.model.language_model import LanguageModel

from tests.support.tiny import random_texts

FIELDS = ("logprob", "mu", "sigma", "top1_logprob", "entropy", "top1_id", "rank")


def padded_tokens(batches, lengths):
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def test_packing_keeps_padding_low_once_a_batch_is_big_enough():
    rng = random.Random(0)
    lengths = [rng.randint(40, 340) for _ in range(2000)]  # WikiMIA-like spread
    budget = 131072
    plain = forward.pack_lengths(lengths, budget)
    packed = forward.pack_lengths(lengths, budget, min_fill=forward.PACK_MIN_FILL)
    assert sorted(i for b in packed for i in b) == list(range(len(lengths)))
    for batch in packed:
        width = lengths[batch[0]]
        assert len(batch) * width <= budget
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)
        # an item below min_fill × width only joins while the batch is under a quarter of the budget
        for n, i in enumerate(batch):
            if lengths[i] < forward.PACK_MIN_FILL * width:
                assert n * width < max(budget // 4, forward.PACK_MIN_SPLIT_TOKENS)
    waste_plain = padded_tokens(plain, lengths) / sum(lengths)
    waste_packed = padded_tokens(packed, lengths) / sum(lengths)
    assert waste_packed < 1.2 < waste_plain


def test_packing_without_min_fill_is_the_plain_greedy_rule():
    lengths = [5, 30, 12, 12, 7, 30]
    assert forward.pack_lengths(lengths, 40) == [[1], [5], [2, 3, 4], [0]]
    # small batches are never split for padding (min_fill only acts past PACK_MIN_SPLIT_TOKENS)
    assert forward.pack_lengths(lengths, 40, min_fill=0.8) == [[1], [5], [2, 3, 4], [0]]


def test_cuda_budget_counts_memory_the_allocator_holds_but_does_not_use(llama_lm, monkeypatch):
    mib = 1 << 20
    monkeypatch.setattr(LanguageModel, "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(language_model.torch.cuda, "mem_get_info", lambda device=None: (64 * mib, 80 << 30))
    monkeypatch.setattr(language_model.torch.cuda, "memory_allocated", lambda device=None: 2048 * mib)
    monkeypatch.setattr(language_model.torch.cuda, "memory_reserved", lambda device=None: 2048 * mib)
    cfg = llama_lm.model.config
    per_token = 4 * (8 * cfg.hidden_size + 4 * cfg.intermediate_size)  # float32 model
    assert llama_lm.auto_batch_tokens() == int(64 * mib * 0.5 // per_token)
    monkeypatch.setattr(language_model.torch.cuda, "memory_reserved", lambda device=None: 2176 * mib)  # 128 MiB cached
    assert llama_lm.auto_batch_tokens() == int(192 * mib * 0.5 // per_token) < 1 << 17


def test_cuda_budget_of_a_sharded_model_is_its_tightest_gpus(llama_lm, monkeypatch):
    mib = 1 << 20
    monkeypatch.setattr(llama_lm.model, "hf_device_map", {"model.embed_tokens": 0, "model.layers": 1, "lm_head": 1},
                        raising=False)  # as accelerate's dispatch records it
    free = {0: 640 * mib, 1: 64 * mib}
    monkeypatch.setattr(language_model.torch.cuda, "mem_get_info", lambda device: (free[device.index], 80 << 30))
    monkeypatch.setattr(language_model.torch.cuda, "memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(language_model.torch.cuda, "memory_reserved", lambda device=None: 0)
    cfg = llama_lm.model.config
    per_token = 4 * (8 * cfg.hidden_size + 4 * cfg.intermediate_size)  # float32 model
    assert llama_lm.auto_batch_tokens() == int(64 * mib * 0.5 // per_token)  # cuda:1's 64 MiB, not cuda:0's 640


def failing_above(monkeypatch, padded_tokens: int):
    """Make every batch of more than `padded_tokens` fail, when it is launched, as a CUDA out-of-memory error
    would; returns the padded sizes of the batches that ran."""
    real = pipeline.batch_stats
    ran = []

    def batch_stats(model, split, input_ids, *args):
        if input_ids.numel() > padded_tokens:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        ran.append(input_ids.numel())
        return real(model, split, input_ids, *args)

    monkeypatch.setattr(pipeline, "batch_stats", batch_stats)
    return ran


def test_out_of_memory_halves_the_budget_and_gives_the_same_numbers(llama_lm, monkeypatch):
    texts = random_texts(40, seed=5, min_words=4, max_words=40)
    fits = 600
    segments = [forward.Segment(i, llama_lm.fed_ids(t), 1) for i, t in enumerate(texts)]
    # the largest halving of 4096 whose batches all fit (and not below the context, where halving stops)
    expected = next(b for b in (4096 >> n for n in range(12))
                    if all(len(batch) * len(segments[batch[0]].ids) <= fits
                           for batch in forward.pack_batches(segments, b)))
    assert llama_lm.max_length <= expected < 4096
    ran = failing_above(monkeypatch, fits)
    halved = llama_lm.token_stats(texts, cache=False, batch_tokens=4096)
    assert llama_lm.last_batch_tokens == expected and max(ran) <= fits
    monkeypatch.undo()
    direct = llama_lm.token_stats(texts, cache=False, batch_tokens=expected)
    for a, b in zip(halved, direct):
        assert a.text == b.text
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_out_of_memory_after_some_batches_keeps_them_and_scores_the_rest(llama_lm, monkeypatch):
    texts = random_texts(40, seed=6, min_words=4, max_words=40)
    whole = llama_lm.token_stats(texts, cache=False, batch_tokens=4096)
    one_at_a_time = [llama_lm.token_stats([t], cache=False)[0] for t in texts]
    real, calls = pipeline.batch_stats, []

    def second_batch_fails_once(*args):
        calls.append(args[2].shape)
        if len(calls) == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(*args)

    monkeypatch.setattr(pipeline, "batch_stats", second_batch_fails_once)
    got = llama_lm.token_stats(texts, cache=False, batch_tokens=1024)
    segments = [forward.Segment(i, llama_lm.fed_ids(t), 1) for i, t in enumerate(texts)]
    at_1024, first = forward.pack_batches(segments, 1024), calls[0]
    assert len(at_1024) > 2 and llama_lm.last_batch_tokens == 512
    # the first batch was kept: the rest was packed again at 512, and nothing ran twice
    rest = forward.pack_batches([s for n, s in enumerate(segments) if n not in at_1024[0]], 512)
    assert first == (len(at_1024[0]), len(segments[at_1024[0][0]].ids)) and len(calls) == 2 + len(rest)
    assert [s.text for s in got] == texts
    for a, b, c in zip(got, whole, one_at_a_time):  # batch shapes differ: float32 rounding, as batched vs alone
        for name in FIELDS:
            np.testing.assert_allclose(getattr(a, name), getattr(c, name), rtol=0, atol=1e-4)
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-4)


def test_batched_tokenisation_equals_one_call_per_text(llama_lm):
    texts = random_texts(20, seed=9, min_words=1, max_words=30) + ["", " ", "line\nbreak  and  spaces "]
    batched = llama_lm._encode_many(texts)
    for text, (ids, offsets) in zip(texts, batched):
        enc = llama_lm.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        assert ids == list(enc["input_ids"])
        assert [tuple(o) for o in offsets] == [tuple(o) for o in enc["offset_mapping"]]


def test_head_logits_on_cpu_are_the_float32_linear_head(llama_lm):
    head = llama_lm.model.get_output_embeddings()
    hidden = torch.randn(7, head.weight.shape[1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = hidden.double() @ head.weight.double().T
        got = forward.head_logits(hidden, head)
    assert got.dtype == torch.float32 and got.shape == (7, head.weight.shape[0])
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vocab", [300, 1000, 49152])
def test_cpu_reduction_chunks_by_the_vocabulary_width_and_gives_the_same_bits_as_64_rows_at_a_time(monkeypatch, vocab):
    step = max(forward.REDUCE_CHUNK_ROWS, forward.REDUCE_CHUNK_ELEMENTS // vocab)
    assert step * vocab <= forward.REDUCE_CHUNK_ELEMENTS or step == forward.REDUCE_CHUNK_ROWS  # 2 MiB, or 8 rows
    rows = 2 * step + 5  # two whole chunks and a short one
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(vocab)) * 4
    targets = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(1))
    calls = []
    real = forward.reduce_logits
    monkeypatch.setattr(forward, "reduce_logits", lambda x, t: calls.append(len(x)) or real(x, t))
    got = forward.reduce_rows(logits, targets)
    assert calls == [step, step, 5]
    calls.clear()
    monkeypatch.setattr(forward, "REDUCE_CHUNK_ELEMENTS", 0)  # the rule before at a wide vocabulary: 64 rows at a time
    monkeypatch.setattr(forward, "REDUCE_CHUNK_ROWS", 64)
    before = forward.reduce_rows(logits, targets)
    assert all(n == 64 for n in calls[:-1]) and 0 < calls[-1] <= 64 and sum(calls) == rows
    for name in FIELDS:
        assert torch.equal(got[name], before[name]), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the half-precision head path runs on CUDA (bench/gpu.py, docs/performance.md)")
def test_bf16_head_on_cuda_is_a_float32_head():
    torch.manual_seed(0)
    head = torch.nn.Linear(256, 5003, bias=True).to("cuda", torch.bfloat16)
    hidden = torch.randn(64, 256, device="cuda").to(torch.bfloat16)
    with torch.no_grad():
        got = forward.head_logits(hidden, head)
        exact = hidden.double() @ head.weight.double().T + head.bias.double()
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.cpu().numpy(), exact.cpu().numpy(), rtol=1e-5, atol=1e-5)


TRICKY = ["", " ", "line\nbreak  and  spaces ", "Zürich – naïve café ☕ 日本語", "<|endoftext|> inside text",
          "A" * 300, "tab\tand\r\nreturns"]


def assert_encodes_as_the_tokenizer_call(lm, texts):
    for text, (ids, offsets) in zip(texts, lm._encode_many(texts)):
        enc = lm.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        assert ids == list(enc["input_ids"])[: len(ids)]
        assert [tuple(o) for o in offsets] == [tuple(o) for o in enc["offset_mapping"]][: len(ids)]


def test_the_backend_is_called_directly_only_when_that_is_what_the_tokenizer_call_runs(llama_lm):
    texts = random_texts(10, seed=3, min_words=1, max_words=30) + TRICKY
    backend = encoding.plain_backend(llama_lm.tokenizer)
    assert backend is llama_lm.tokenizer.backend_tokenizer
    assert_encodes_as_the_tokenizer_call(llama_lm, texts)
    backend.enable_truncation(max_length=5)  # a setting the tokenizer call would undo: take the call's path
    assert encoding.plain_backend(llama_lm.tokenizer) is None
    assert_encodes_as_the_tokenizer_call(llama_lm, texts)
    assert encoding.plain_backend(llama_lm.tokenizer) is backend  # the call reset it


@pytest.mark.integration
def test_the_demo_tokenizer_encodes_as_its_own_call():
    lm = mia_core.load_model("demo", device="cpu")
    assert encoding.plain_backend(lm.tokenizer) is not None
    assert_encodes_as_the_tokenizer_call(lm, random_texts(20, seed=4, min_words=1, max_words=60) + TRICKY)
