"""`served.pool.answers`: how many requests a run may have sent when it is cancelled. The pool keeps as many calls
queued as running, so a consumer slower than the server sees its cancel land after up to 2 × concurrency more calls
than it has read; none starts after the iterator is closed."""
from __future__ import annotations

import threading
import time
from typing import Callable

from mia_core.model.served.pool import answers
from tests.served.test_served_cancel import served_threads

CONCURRENCY = 2


def recorded_calls(n: int, release: threading.Event | None = None) -> tuple[list[Callable[[], int]], list[int]]:
    """`n` calls answering k * k, and the list of the calls started, in order; with `release`, those from the fourth
    on wait for it (a server slow from then on)."""
    started, lock = [], threading.Lock()

    def call(k: int) -> Callable[[], int]:
        def run() -> int:
            with lock:
                started.append(k)
            if release is not None and k >= 3:
                release.wait(10)
            return k * k
        return run

    return [call(k) for k in range(n)], started


def wait_started(started: list[int], n: int, timeout_s: float = 30) -> None:
    """Until `n` calls have started, or the timeout has passed (the test's assertion then says what did)."""
    deadline = time.monotonic() + timeout_s
    while len(started) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_closed_run_starts_nothing_more_and_at_most_twice_the_concurrency_beyond_what_it_read():
    calls, started = recorded_calls(40)
    cancelled = threading.Event()
    run = answers(calls, CONCURRENCY, cancelled)
    read = [next(run) for _ in range(3)]
    wait_started(started, 3 + 2 * CONCURRENCY)  # a slow reader: the pool runs ahead
    time.sleep(0.2)
    assert len(started) == 3 + 2 * CONCURRENCY  # each answer read put one more call in; no more than that
    run.close()  # the cancel: it returns once the pool's threads have ended
    assert len(started) == 3 + 2 * CONCURRENCY and not cancelled.is_set()  # nothing after it; the flag cleared
    assert [a for _, a in read] == [k * k for k, _ in read]
    assert served_threads() == []


def test_a_closed_run_drops_its_queued_calls_and_waits_for_those_running():
    release = threading.Event()
    calls, started = recorded_calls(40, release)
    cancelled = threading.Event()
    run = answers(calls, CONCURRENCY, cancelled)
    read = sorted(next(run)[0] for _ in range(3))
    wait_started(started, 3 + CONCURRENCY)
    timer = threading.Timer(0.5, release.set)  # the two running calls answer only after the cancel
    timer.start()
    run.close()
    returned_after_release = release.is_set()
    timer.join()
    assert read == [0, 1, 2]
    assert sorted(started) == [0, 1, 2, 3, 4]  # 5 and 6 were queued: dropped, never sent
    assert returned_after_release  # the close waited for the two running calls
    assert served_threads() == [] and not cancelled.is_set()
