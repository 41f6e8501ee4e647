"""The statistics cache (token text of every scored text) stays under its size cap, least recently used out first;
`mia cache info` / `mia cache clear` show and empty it."""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from mia_core.model import stats_cache
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts

MB = 1 << 20


@pytest.fixture
def stats(llama_lm):
    """Statistics of 8 texts of similar length (each entry a few KB on disk)."""
    return llama_lm.token_stats(random_texts(8, seed=21, min_words=20, max_words=20), cache=False)


def entries(root):
    return {p.stem: p.stat().st_size for p in root.rglob("*.stats")}


def test_least_recently_used_entries_go_first(tmp_path, stats):
    uncapped = StatsCache(tmp_path, max_bytes=10**12)
    for i, s in enumerate(stats[:6]):
        uncapped.put(f"{i:02d}{'0' * 62}", s)
    sizes = entries(tmp_path)
    keys = sorted(sizes)
    now = time.time()
    for age, key in enumerate(reversed(keys)):  # key 00… written longest ago, 05… last
        path = next(tmp_path.rglob(f"{key}.stats"))
        os.utime(path, (now - 100 - 10 * age, now - 100 - 10 * age))
    cap = int(sum(sizes.values()) * 0.8)
    capped = StatsCache(tmp_path, max_bytes=cap)
    assert capped.get(keys[0], stats[0].text) is not None  # a read makes 00… the most recently used
    capped.put(f"06{'0' * 62}", stats[6])  # over the cap: evict
    new_size = entries(tmp_path).get(f"06{'0' * 62}")
    # naive LRU: drop least recently used until the total is ≤ the eviction target
    order = keys[1:] + [keys[0]]  # 01… oldest, …, 05…, then 00… (read), then the new one
    total = sum(sizes.values()) + new_size
    evicted = []
    for key in order:
        if total <= stats_cache.EVICT_TO * cap:
            break
        evicted.append(key)
        total -= sizes[key]
    assert evicted and keys[0] not in evicted
    assert set(entries(tmp_path)) == set(keys + [f"06{'0' * 62}"]) - set(evicted)
    assert sum(entries(tmp_path).values()) == total <= cap
    for key, s in zip(keys, stats):
        got = capped.get(key, s.text)
        assert (got is None) == (key in evicted)
        if got is not None:
            np.testing.assert_array_equal(got.logprob, s.logprob)


def test_the_cap_holds_after_every_write(tmp_path, stats):
    one = len(open(_write_one(tmp_path / "probe", stats[0]), "rb").read())
    cap = int(2.5 * one)
    caches = [StatsCache(tmp_path / "capped", max_bytes=cap) for _ in range(2)]  # two models, one folder
    for i in range(40):
        caches[i % 2].put(f"{i:04d}{'a' * 60}", stats[i % len(stats)])
        on_disk = entries(tmp_path / "capped")
        assert 0 < sum(on_disk.values()) <= cap and f"{i:04d}{'a' * 60}" in on_disk  # the newest is kept
    assert not [p for p in (tmp_path / "capped").rglob("*") if ".tmp" in p.name]


def _write_one(root, s):
    StatsCache(root, max_bytes=10**12).put("f" * 64, s)
    return next(root.rglob("*.stats"))


def test_cap_from_the_environment(tmp_path, monkeypatch, stats):
    monkeypatch.setenv("MIA_LENS_CACHE_MAX_MB", "0.5")
    assert StatsCache(tmp_path).max_bytes == MB // 2
    monkeypatch.setenv("MIA_LENS_CACHE_MAX_MB", "0")  # keep nothing
    StatsCache(tmp_path).put("e" * 64, stats[0])
    assert entries(tmp_path) == {}
    monkeypatch.delenv("MIA_LENS_CACHE_MAX_MB")
    assert StatsCache(tmp_path).max_bytes == stats_cache.DEFAULT_MAX_MB * MB
    monkeypatch.setenv("MIA_LENS_CACHE_MAX_MB", "lots")
    with pytest.raises(ValueError, match="MIA_LENS_CACHE_MAX_MB"):
        StatsCache(tmp_path)


def test_cache_info_and_clear_commands(tmp_path, monkeypatch, stats):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MIA_LENS_CACHE_MAX_MB", "64")
    root = tmp_path / "cache" / "stats"
    for i, s in enumerate(stats[:3]):
        StatsCache(root).put(f"{i}" * 64, s)
    (root / "ab").mkdir()
    (root / "ab" / "unrelated.txt").write_text("not ours")  # only cache entries are counted and removed
    size = sum(entries(root).values())
    code, out, err = run_cli("cache", "info")
    assert code == 0, err
    assert str(root) in out and "entries: 3" in out and f"size: {size / MB:.2f} MB" in out and "cap: 64.00 MB" in out
    code, out, err = run_cli("cache", "clear")
    assert code == 0, err
    assert "removed 3 entries" in out and entries(root) == {} and (root / "ab" / "unrelated.txt").exists()
    code, out, _ = run_cli("cache", "info")
    assert "entries: 0" in out and "size: 0.00 MB" in out
    monkeypatch.setenv("MIA_LENS_CACHE_MAX_MB", "-1")
    code, _, err = run_cli("cache", "info")
    assert code == 2 and err.startswith("error: MIA_LENS_CACHE_MAX_MB")


def test_an_entry_gives_back_exactly_what_was_stored(tmp_path, stats):
    cache = StatsCache(tmp_path, max_bytes=10**12)
    for i, s in enumerate(stats):
        cache.put(f"{i:02d}{'c' * 62}", s)
    for i, s in enumerate(stats):
        got = cache.get(f"{i:02d}{'c' * 62}", s.text)
        for name in ("token_ids", "offsets", "logprob", "mu", "sigma", "top1_id", "top1_logprob", "entropy", "rank"):
            want = getattr(s, name)
            assert getattr(got, name).dtype == want.dtype and getattr(got, name).shape == want.shape
            np.testing.assert_array_equal(getattr(got, name), want)
        assert got.tokens == s.tokens and got.long_text == s.long_text and got.vocab_width == s.vocab_width
        assert got.logprob.flags.writeable  # the arrays are the entry's own, as np.load's were


def test_entries_of_the_earlier_format_are_misses_but_counted_and_cleared(tmp_path, stats):
    old = tmp_path / "ab" / f"ab{'0' * 62}.npz"
    old.parent.mkdir(parents=True)
    np.savez(old, logprob=stats[0].logprob)
    cache = StatsCache(tmp_path, max_bytes=10**12)
    assert cache.get(f"ab{'0' * 62}", stats[0].text) is None
    assert cache.usage().entries == 1 and cache.usage().bytes == old.stat().st_size
    assert cache.clear().entries == 1 and not old.exists()


@pytest.mark.parametrize("damage", ["object dtype", "past the end", "wrong magic", "not json", "missing array",
                                    "float ids", "short array", "name past the end", "name at infinity",
                                    "negative name", "deep json"])
def test_a_damaged_entry_is_a_miss_never_unpickled(tmp_path, stats, damage):
    cache = StatsCache(tmp_path, max_bytes=10**12)
    key = "d" * 64
    cache.put(key, stats[0])
    path = next(tmp_path.rglob("*.stats"))
    data = path.read_bytes()
    start = len(stats_cache.MAGIC) + 8
    length = int.from_bytes(data[len(stats_cache.MAGIC):start], "little")
    header = json.loads(data[start:start + length])
    if damage == "object dtype":
        header["arrays"][0][1] = "|O"
    elif damage == "past the end":
        header["arrays"][-1][3] += 10**6
    elif damage == "missing array":
        header["arrays"] = header["arrays"][1:]
    elif damage == "float ids":
        header["arrays"][0][1] = "<f8"
    elif damage == "short array":
        header["arrays"][-1][2] = [header["arrays"][-1][2][0] - 1]
        header["arrays"][-1][4] -= 8
    elif damage.startswith("name") or damage == "negative name":
        j = {"name past the end": 10**6, "name at infinity": float("inf"), "negative name": -1}[damage]
        header["meta"]["token_names"] = [[j, "x"]]
    body = {"not json": b"{" * length, "deep json": b"[" * 100_000 + b"]" * 100_000}.get(damage,
                                                                                         json.dumps(header).encode())
    data = data[:len(stats_cache.MAGIC)] + len(body).to_bytes(8, "little") + body + data[start + length:]
    path.write_bytes(b"NOT-MIA" + data[7:] if damage == "wrong magic" else data)
    assert cache.get(key, stats[0].text) is None
