"""The statistics cache is written on a writer thread beside the pass: the same bytes as writing inline, all of them
on disk when `token_stats` returns, a failed write raised as the inline write raises it, and the queue bounded."""
from __future__ import annotations

import os
import shutil
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


def test_put_many_hands_over_a_batch_in_parts_no_larger_than_the_room(tmp_path, llama_lm):
    stats = llama_lm.token_stats(random_texts(5, seed=10), cache=False)
    cache = GatedCache(tmp_path)
    writes = WriteBehind(cache, max_pending=2)
    entries = [(f"{i}" * 64, st) for i, st in enumerate(stats)]
    handing = threading.Thread(target=writes.put_many, args=(entries,))
    handing.start()
    handing.join(0.3)
    assert handing.is_alive()  # five entries, room for two: the hand-over waits for the writes
    cache.gate.set()
    handing.join(30)
    writes.close()
    assert sorted(p.stem for p in tmp_path.rglob("*.stats")) == [f"{i}" * 64 for i in range(5)]


def test_an_entry_written_in_short_pieces_is_the_same_bytes(tmp_path, llama_lm, monkeypatch):
    stats = llama_lm.token_stats(random_texts(2, seed=11), cache=False)
    whole = StatsCache(tmp_path / "whole")
    whole.put_many([("e" * 64, stats[0]), ("f" * 64, stats[1])])
    real = os.writev
    calls = []

    def short_writev(fd, buffers):  # a system that writes at most 7 bytes a call
        calls.append(1)
        first = next(bytes(b) for b in buffers if len(b))
        return real(fd, [first[:7]])

    monkeypatch.setattr(os, "writev", short_writev)
    pieces = StatsCache(tmp_path / "pieces")
    pieces.put_many([("e" * 64, stats[0]), ("f" * 64, stats[1])])
    assert len(calls) > 20
    assert entry_bytes(whole.root) == entry_bytes(pieces.root) and len(entry_bytes(whole.root)) == 2
    again = pieces.get("e" * 64, stats[0].text)
    assert (again.logprob == stats[0].logprob).all() and (again.token_ids == stats[0].token_ids).all()


def test_a_folder_removed_after_the_first_write_is_made_again(tmp_path, llama_lm):
    stats = llama_lm.token_stats(random_texts(1, seed=12), cache=False)[0]
    cache = StatsCache(tmp_path)
    cache.put("ab" + "0" * 62, stats)
    shutil.rmtree(tmp_path / "ab")  # the instance remembers the folder; someone removed it
    cache.put("ab" + "1" * 62, stats)
    assert cache.get("ab" + "1" * 62, stats.text) is not None


class SteppedCache(StatsCache):
    """A real cache whose write of each key waits for that key's gate."""

    def __init__(self, root):
        super().__init__(root)
        self.gates: dict[str, threading.Event] = {}

    def put(self, key, stats):
        assert self.gates.setdefault(key, threading.Event()).wait(30)
        super().put(key, stats)


def test_room_comes_back_entry_by_entry_not_a_whole_part_at_a_time(tmp_path, llama_lm):
    stats = llama_lm.token_stats(random_texts(3, seed=13), cache=False)
    a, b, c = ("a" * 64, "b" * 64, "c" * 64)
    cache = SteppedCache(tmp_path)
    for key in (a, b, c):
        cache.gates[key] = threading.Event()
    writes = WriteBehind(cache, max_pending=2)
    writes.put_many([(a, stats[0]), (b, stats[1])])  # all the room
    third = threading.Thread(target=writes.put_many, args=([(c, stats[2])],))
    third.start()
    third.join(0.3)
    assert third.is_alive()
    cache.gates[a].set()  # one entry written: its room is back though b still waits
    third.join(30)
    assert not third.is_alive() and not cache.gates[b].is_set()
    cache.gates[b].set()
    cache.gates[c].set()
    writes.close()
    assert sorted(p.stem for p in tmp_path.rglob("*.stats")) == [a, b, c]


def test_a_failed_write_leaves_no_temporary_file(tmp_path, llama_lm, monkeypatch):
    stats = llama_lm.token_stats(random_texts(1, seed=14), cache=False)[0]

    def full_disk(fd, buffers):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", full_disk)
    with pytest.raises(OSError, match="No space"):
        StatsCache(tmp_path).put("ab" * 32, stats)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
