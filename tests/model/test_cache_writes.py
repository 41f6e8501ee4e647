"""The statistics cache is written on a writer thread beside the pass: the same bytes as writing inline, all of them
on disk when `token_stats` returns, a failed write raised as the inline write raises it, and the queue bounded."""
from __future__ import annotations

import threading

import pytest

from mia_core.model.cache_writes import WriteBehind
from mia_core.model.stats_cache import StatsCache

from tests.support.tiny import random_texts

WRITER = "mia-cache-write"


class RecordingCache(StatsCache):
    """A real cache that notes which thread wrote each entry."""

    def __init__(self, root, **kwargs):
        super().__init__(root, **kwargs)
        self.threads: list[str] = []

    def put(self, key, stats):
        self.threads.append(threading.current_thread().name)
        super().put(key, stats)


class GatedCache(StatsCache):
    """A real cache whose writes wait until `gate` is set."""

    def __init__(self, root):
        super().__init__(root)
        self.gate = threading.Event()

    def put(self, key, stats):
        assert self.gate.wait(30)
        super().put(key, stats)


def entry_bytes(root):
    return {p.name: p.read_bytes() for p in root.rglob("*.stats")}


def writer_threads():
    return [t for t in threading.enumerate() if t.name.startswith(WRITER)]


def test_entries_on_disk_when_token_stats_returns_byte_for_byte_the_inline_writes(tmp_path, llama_lm):
    texts = random_texts(12, seed=5)
    behind = RecordingCache(tmp_path / "behind")
    llama_lm.stats_cache = behind
    first = llama_lm.token_stats(texts)
    assert len(entry_bytes(behind.root)) == 12 and not writer_threads()
    assert len(behind.threads) == 12 and all(name.startswith(WRITER) for name in behind.threads)

    inline = RecordingCache(tmp_path / "inline")
    llama_lm.stats_cache, llama_lm.writes_behind = inline, False
    llama_lm.token_stats(texts)
    assert inline.threads == ["MainThread"] * 12
    assert entry_bytes(behind.root) == entry_bytes(inline.root)

    llama_lm.stats_cache, llama_lm.writes_behind = behind, True
    again = llama_lm.token_stats(texts)  # every text from the entries the writer thread wrote
    assert len(behind.threads) == 12
    for a, b in zip(first, again):
        assert a.tokens == b.tokens and (a.logprob == b.logprob).all() and (a.sigma == b.sigma).all()


@pytest.mark.parametrize("behind", [True, False])
def test_a_failed_write_raises_the_error_an_inline_write_raises(tmp_path, llama_lm, behind):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache's folder should be")
    llama_lm.stats_cache, llama_lm.writes_behind = StatsCache(blocked), behind
    with pytest.raises(NotADirectoryError):
        llama_lm.token_stats(random_texts(5, seed=6))
    assert not writer_threads()


def test_the_blocks_own_error_is_not_hidden_by_a_failed_write(tmp_path, llama_lm):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    stats = llama_lm.token_stats(random_texts(1, seed=7), cache=False)[0]
    with pytest.raises(KeyError, match="the block's"):
        with WriteBehind(StatsCache(blocked)) as writes:
            writes.put("ab" * 32, stats)
            raise KeyError("the block's")
    assert not writer_threads()


def test_put_waits_while_max_pending_entries_wait(tmp_path, llama_lm):
    stats = llama_lm.token_stats(random_texts(3, seed=8), cache=False)
    cache = GatedCache(tmp_path)
    writes = WriteBehind(cache, max_pending=2)
    writes.put("a" * 64, stats[0])
    writes.put("b" * 64, stats[1])
    third = threading.Thread(target=writes.put, args=("c" * 64, stats[2]))
    third.start()
    third.join(0.3)
    assert third.is_alive()  # two entries wait: the third waits for room
    cache.gate.set()
    third.join(30)
    assert not third.is_alive()
    writes.close()
    assert sorted(p.stem for p in tmp_path.rglob("*.stats")) == ["a" * 64, "b" * 64, "c" * 64]


def test_a_cache_that_keeps_nothing_starts_no_thread(tmp_path, llama_lm):
    stats = llama_lm.token_stats(random_texts(1, seed=9), cache=False)[0]
    with WriteBehind(StatsCache(tmp_path, max_bytes=0)) as writes:
        writes.put("d" * 64, stats)
        assert not writer_threads()
    assert not list(tmp_path.rglob("*.stats"))
