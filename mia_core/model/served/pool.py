"""Requests to a server, a bounded number at a time, answered as they arrive — shared by the statistics windows and
the sampled generations, so both run at the model's concurrency and both stop sending when their run is cancelled."""
from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")


def answers(calls: Sequence[Callable[[], T]], concurrency: int, cancelled: threading.Event) -> Iterator[tuple[int, T]]:
    """(index, answer) of every call, in the order they finish; at most `concurrency` run at once and as many wait
    queued behind them (one new call for each answer).

    Closing the iterator (a cancelled run), or a call that raises, sets `cancelled` (the client then sends nothing
    more and stops waiting between retries), drops the calls not yet started and waits for those in flight, so no
    thread is left running; `cancelled` is cleared on the way out.
    """
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="served")
    pending: dict[Future, int] = {}
    queue = iter(range(len(calls)))
    try:
        for k in queue:
            pending[pool.submit(calls[k])] = k
            if len(pending) >= 2 * concurrency:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                k = pending.pop(future)
                answer = future.result()
                for nxt in queue:  # keep the pool busy: one new call for each answer
                    pending[pool.submit(calls[nxt])] = nxt
                    break
                yield k, answer
    finally:
        if pending:  # a failed call or a closed iterator: nothing more is sent, retries stop waiting
            cancelled.set()
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        cancelled.clear()
