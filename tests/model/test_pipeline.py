"""The statistics pipeline: each segment once, the same numbers with or without launching ahead, batches launched
ahead of the host's work, and texts handed on (`on_stats`) as their last window returns."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mia_core.model import forward, pipeline
from mia_core.model.cache_writes import WriteBehind
from mia_core.model.forward import FLOAT_STATS, INT_STATS, Segment

from tests.support.tiny import random_texts

FIELDS = FLOAT_STATS + INT_STATS


def segments_of(lm, texts):
    return [Segment(i, lm.fed_ids(t), 1) for i, t in enumerate(texts)]


def collect(batches, n):
    out = [None] * n
    for batch in batches:
        for i, stats in zip(batch.indices, batch.stats):
            assert out[i] is None  # each segment in exactly one batch
            out[i] = stats
    return out


@pytest.mark.parametrize("lookahead", [1, 2])
def test_launching_ahead_gives_the_same_numbers_and_launches_before_the_host_waits(llama_lm, monkeypatch, lookahead):
    segments = segments_of(llama_lm, random_texts(30, seed=3, min_words=2, max_words=40))
    plain = collect(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=300, lookahead=0), len(segments))
    events, real = [], pipeline._launch
    monkeypatch.setattr(pipeline, "_launch", lambda *a: events.append(("launch", a[3][0])) or real(*a))
    ahead = []
    for batch in pipeline.iter_batches(llama_lm.model, segments, batch_tokens=300, lookahead=lookahead):
        events.append(("finished", batch.indices[0]))
        ahead.append(batch)
    n = len(ahead)
    assert n > 3
    launches = [e for e in events if e[0] == "launch"]
    # the host takes batch k only once batch k + lookahead is launched (all of them, near the end)
    for k in range(n):
        assert events.index(("finished", ahead[k].indices[0])) > events.index(launches[min(k + lookahead, n - 1)])
    for a, b in zip(collect(ahead, len(segments)), plain):
        for name in FIELDS:
            np.testing.assert_array_equal(a[name], b[name])


def test_batch_statistics_equal_the_model_run_on_the_padded_batch(llama_lm):
    segments = segments_of(llama_lm, random_texts(9, seed=4, min_words=1, max_words=25))
    segments[3] = Segment(3, segments[3].ids, 4)  # score from the fourth token on, as a sliding window does
    got = collect(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=10_000), len(segments))
    ids, mask = forward.pad_right([s.ids for s in segments])
    logp = llama_lm.model(input_ids=ids, attention_mask=mask).logits.double().log_softmax(-1)  # (b, T, V) float64
    for b, seg in enumerate(segments):
        positions = np.arange(seg.score_from - 1, len(seg.ids) - 1)
        true = logp[b, positions, seg.ids[seg.score_from:]].detach().numpy()
        np.testing.assert_allclose(got[b]["logprob"], true, rtol=0, atol=2e-5)
        np.testing.assert_array_equal(got[b]["top1_id"], logp[b, positions].argmax(-1).numpy())


def test_batch_arrays_pad_and_select_the_scored_positions():
    arrays = forward.batch_arrays([Segment(0, [5, 6, 7], 1), Segment(1, [8, 9, 10, 11, 12], 3)], pad_id=0)
    np.testing.assert_array_equal(arrays.ids, [[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]])
    np.testing.assert_array_equal(arrays.mask, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    # row 0 scores tokens 1..2 from positions 0..1; row 1 scores tokens 3..4 from positions 2..3 (flat 5 + 2, 5 + 3)
    np.testing.assert_array_equal(arrays.rows, [0, 1, 7, 8])
    np.testing.assert_array_equal(arrays.targets, [6, 7, 11, 12])
    np.testing.assert_array_equal(arrays.counts, [2, 2])


def test_on_stats_hands_on_every_text_once_cached_first(llama_lm):
    texts = random_texts(12, seed=8, min_words=1, max_words=30) + [""]
    cached = llama_lm.token_stats(texts[::3])
    seen = []
    got = llama_lm.token_stats(texts, on_stats=lambda i, s: seen.append((i, s)))
    assert sorted(i for i, _ in seen) == list(range(len(texts)))
    assert [i for i, _ in seen[: len(cached)]] == list(range(0, len(texts), 3))
    for i, stats in seen:
        assert stats is got[i] and stats.text == texts[i]


def test_a_text_is_handed_on_when_its_last_window_returns(llama_lm, monkeypatch):
    long_text = " ".join(random_texts(40, seed=2, min_words=20, max_words=20))  # several windows of 256 tokens
    texts = random_texts(8, seed=9) + [long_text]
    finished, real = [], pipeline._finish
    monkeypatch.setattr(pipeline, "_finish", lambda job: finished.append(list(job.indices)) or real(job))
    order = []
    llama_lm.token_stats(texts, cache=False, batch_tokens=300,
                         on_stats=lambda i, s: order.append((i, len(finished))))
    windows = len(llama_lm.window_plan(len(llama_lm.fed_ids(long_text)), llama_lm.max_length,
                                       llama_lm.max_length // 2))
    assert windows > 2 and len(finished) > 2
    batches_then = dict(order)
    # the long text's windows span several batches: it is handed on after the last of them, not before
    assert batches_then[len(texts) - 1] == max(n for n, b in enumerate(finished, 1)
                                               if any(k >= len(texts) - 1 for k in b))
    assert min(batches_then.values()) < len(finished)  # short texts went on before the pass ended


def test_the_last_batch_is_cut_into_shrinking_pieces_when_launching_ahead():
    batches = [[0, 1], list(range(2, 66))]
    cut = pipeline.split_tail(batches, cuts=3)
    assert cut[0] == [0, 1] and [len(b) for b in cut[1:]] == [32, 16, 8, 8]
    assert [i for b in cut for i in b] == list(range(66))  # the same order: longest first
    assert pipeline.split_tail([[0, 1, 2]], cuts=3) == [[0, 1, 2]]  # too few segments to cut
    assert pipeline.split_tail([]) == []


@pytest.mark.parametrize("fails_at", [1, 2, 3, 5])
def test_out_of_memory_while_launching_ahead_finishes_what_was_launched(llama_lm, monkeypatch, fails_at):
    segments = segments_of(llama_lm, random_texts(80, seed=7, min_words=2, max_words=40))
    assert len(pipeline.split_tail(forward.pack_batches(segments, 1024))) > 5
    plain = collect(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=256, lookahead=0), len(segments))
    real, calls = pipeline.batch_stats, []

    def fails_once(*args):
        calls.append(1)
        if len(calls) == fails_at:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(*args)

    monkeypatch.setattr(pipeline, "batch_stats", fails_once)
    monkeypatch.setattr(pipeline.torch.cuda, "empty_cache", lambda: None)
    batches = list(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=1024, lookahead=1,
                                         min_batch_tokens=256))
    assert [b.budget for b in batches][-1] == 512 and len(calls) > fails_at
    got = collect(batches, len(segments))  # every segment exactly once, the launched ones kept
    for a, b in zip(got, plain):
        for name in FIELDS:  # batch shapes differ: float32 rounding, as batched vs alone
            np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-4)


def test_texts_keep_their_batchs_read_only_rows_and_a_long_text_owns_its_joined_arrays(llama_lm):
    long_text = " ".join(random_texts(40, seed=2, min_words=20, max_words=20))  # several windows
    texts = random_texts(6, seed=13) + [long_text]
    got = llama_lm.token_stats(texts, cache=False)
    short, joined = got[:-1], got[-1]
    for st in short:
        for name in FIELDS:
            array = getattr(st, name)
            assert not array.flags.writeable  # texts share their batch's rows: none writes into another's
            with pytest.raises(ValueError):
                array[:1] = 0
    bases = {id(st.logprob.base) for st in short}
    assert len(bases) < len(short)  # views of their batches' rows, not a copy per text
    assert joined.long_text == "sliding" and joined.logprob.flags.writeable and joined.logprob.base is None
    alone = [llama_lm.token_stats([t], cache=False)[0] for t in texts]  # each text in a batch of its own
    for a, b in zip(got, alone):  # the same numbers (to float32 rounding: batched matmuls round otherwise)
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        for name in FLOAT_STATS:
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-5, atol=1e-5)


class Stop(Exception):
    pass


@pytest.mark.parametrize("writes_behind", [True, False])
def test_a_batch_is_cached_after_its_callbacks_and_even_when_one_raises(llama_lm, monkeypatch, writes_behind):
    """The writer gets a batch's entries once its `on_stats` and `on_batch` are done (its Python would slow them), and
    a run stopped from a callback keeps every text of that batch in the cache."""
    texts = random_texts(10, seed=21, min_words=3, max_words=12)
    llama_lm.writes_behind = writes_behind
    events = []

    def recording(put_many):
        def put(*args):  # (self, entries) on the writer's class, (entries) on the cache
            events.append(("cached", len(args[-1])))
            return put_many(*args)
        return put

    owner = WriteBehind if writes_behind else llama_lm.stats_cache  # where a batch's entries are handed over
    monkeypatch.setattr(owner, "put_many", recording(owner.put_many))

    def stop_in_second_batch(indices, stats):
        events.append(("batch", len(indices)))
        if sum(kind == "batch" for kind, _ in events) == 2:
            raise Stop

    with pytest.raises(Stop):
        llama_lm.token_stats(texts, batch_tokens=40, on_batch=stop_in_second_batch)
    assert [kind for kind, _ in events] == ["batch", "cached", "batch", "cached"]
    assert events[0][1] == events[1][1] and events[2][1] == events[3][1]  # each batch's own texts
    assert llama_lm.cached_count(texts) == events[0][1] + events[2][1] < len(texts)
