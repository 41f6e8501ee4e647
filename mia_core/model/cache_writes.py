"""Statistics-cache writes on one thread beside the statistics pass, so the pass never waits for the disk.

Writing an entry is mostly creating two directory entries (a temporary file, then its rename): 0.15–0.25 ms a text
on a 2-core machine's ext4 (one `writev`, its folder made once), still among the largest of the host's parts per
text (docs/performance.md, "Where the host's time goes (CPU)"). On a GPU that is time the device waits for the host.
The writes here run on one thread, a finished batch's entries handed over at once, and its file calls
release the GIL. The writes are bounded (`MAX_PENDING` wait at most), and a failed write is raised on the caller's
thread at its next `put` or at `close`, the same error that a write on the caller's thread would have raised.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from .stats_cache import StatsCache
from ..api.token_stats import TokenStats

#: Entries waiting to be written at most; `put` waits beyond (each holds a text's statistics, a few KB).
MAX_PENDING = 256


class WriteBehind:
    """`StatsCache.put` on a writer thread; `close` (or leaving the `with` block) waits until every entry is written."""

    def __init__(self, cache: StatsCache, max_pending: int = MAX_PENDING):
        self.cache = cache
        self.max_pending = max_pending
        self._room = threading.BoundedSemaphore(max_pending)
        self._pool: ThreadPoolExecutor | None = None  # started by the first write: no thread when everything is cached
        self._error: BaseException | None = None

    def put(self, key: str, stats: TokenStats) -> None:
        """Queue an entry (waiting while `max_pending` entries wait); raises the error of an earlier failed write."""
        self.put_many([(key, stats)])

    def put_many(self, entries: list[tuple[str, TokenStats]]) -> None:
        """Queue (key, statistics) entries as one task of the writer thread (a finished batch's texts: one hand-over,
        not one per text), waiting while `max_pending` entries wait; raises the error of an earlier failed write."""
        self._raise_failed()
        if self.cache.max_bytes <= 0 or not entries:  # the cache keeps nothing: nothing to hand over
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mia-cache-write")
        for start in range(0, len(entries), self.max_pending):  # a task never holds more room than there is
            part = entries[start : start + self.max_pending]
            taken = 0
            try:
                for _ in part:
                    self._room.acquire()
                    taken += 1
                self._pool.submit(self._write, part).add_done_callback(self._written)
            except BaseException:
                for _ in range(taken):
                    self._room.release()
                raise

    def _write(self, entries: list[tuple[str, TokenStats]]) -> None:
        """Write entries in order on the writer thread, giving room back entry by entry (a waiting `put_many` goes
        on after one write, not after its whole part); the first failure ends the part, its room given back."""
        given = 0
        try:
            for key, stats in entries:
                try:
                    self.cache.put(key, stats)
                finally:
                    self._room.release()
                    given += 1
        finally:
            for _ in range(len(entries) - given):
                self._room.release()

    def close(self) -> None:
        """Wait until every queued entry is written; raises the first failed write's error."""
        self._drain()
        self._raise_failed()

    def _drain(self) -> None:
        """Wait until the writer thread has written every queued entry, and let it end."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _written(self, future: Future) -> None:
        error = future.exception()
        if error is not None and self._error is None:
            self._error = error

    def _raise_failed(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:  # the block failed: its error is the one to see; still wait for the writer
            self._drain()
