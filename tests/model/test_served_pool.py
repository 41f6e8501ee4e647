"""`served.pool.answers`: how many requests a run may have sent when it is cancelled. The pool keeps as many calls
queued as running, so a consumer slower than the server sees its cancel land after up to 2 × concurrency more calls
than it has read; none starts after the iterator is closed."""
from __future__ import annotations

import threading
import time

from mia_core.model.served.pool import answers

CONCURRENCY = 2


def test_a_closed_run_starts_nothing_more_and_at_most_twice_the_concurrency_beyond_what_it_read():
    started, lock = [], threading.Lock()

    def call(k: int):
        def run() -> int:
            with lock:
                started.append(k)
            return k * k
        return run

    cancelled = threading.Event()
    run = answers([call(k) for k in range(40)], CONCURRENCY, cancelled)
    read = [next(run) for _ in range(3)]
    deadline = time.monotonic() + 30
    while len(started) < 3 + 2 * CONCURRENCY and time.monotonic() < deadline:  # a slow reader: the pool runs ahead
        time.sleep(0.01)
    time.sleep(0.2)
    assert len(started) == 3 + 2 * CONCURRENCY  # each answer read put one more call in; no more than that
    run.close()  # the cancel
    time.sleep(0.2)
    assert len(started) == 3 + 2 * CONCURRENCY and not cancelled.is_set()  # nothing after it; the flag cleared
    assert [a for _, a in read] == [k * k for k, _ in read]
    assert not [t for t in threading.enumerate() if t.name.startswith("served")]


def test_a_closed_run_drops_its_queued_calls_and_waits_for_those_running():
    started, lock, release = [], threading.Lock(), threading.Event()

    def call(k: int):
        def run() -> int:
            with lock:
                started.append(k)
            if k >= 3:
                release.wait(10)  # the server is slow from the fourth request on
            return k
        return run

    cancelled = threading.Event()
    run = answers([call(k) for k in range(40)], CONCURRENCY, cancelled)
    read = sorted(next(run)[0] for _ in range(3))
    deadline = time.monotonic() + 30
    while len(started) < 3 + CONCURRENCY and time.monotonic() < deadline:
        time.sleep(0.01)
    timer = threading.Timer(0.5, release.set)  # the two running calls answer only after the cancel
    timer.start()
    run.close()
    returned_after_release = release.is_set()
    timer.join()
    assert read == [0, 1, 2]
    assert sorted(started) == [0, 1, 2, 3, 4]  # 5 and 6 were queued: dropped, never sent
    assert returned_after_release  # the close waited for the two running calls
    assert not [t for t in threading.enumerate() if t.name.startswith("served")] and not cancelled.is_set()
