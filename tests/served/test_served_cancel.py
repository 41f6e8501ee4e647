"""A cancelled run on a served model stops sending: the dashboard cancels model work by raising `WorkCancelled` from
the progress callback (`ui.model_work`); through a counting proxy in front of the real engine, no request reaches the
server after that, no request thread is left running, and the same model scores again afterwards."""
from __future__ import annotations

import threading
import time

import pytest

from mia_core.model.loading import load_model
from tests.support.tcp_proxy import TcpProxy
from tests.support.tiny import random_texts
from ui.model_queue import WorkCancelled

pytestmark = [pytest.mark.integration]

CONCURRENCY = 2
TEXTS = random_texts(40, seed=23, min_words=40, max_words=40)


def served_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("served")]


def test_a_cancelled_run_sends_nothing_more(vllm_demo):
    host, port = vllm_demo.url.removeprefix("http://").split(":")
    proxy = TcpProxy((host, int(port))).start()
    try:
        served = load_model(f"{proxy.url}/v1?model=demo&concurrency={CONCURRENCY}")
        before, answered = proxy.requests, []

        def progress(done: int, total: int) -> None:
            answered.append(done)
            if len(answered) == 3:
                raise WorkCancelled("the session ended")

        with pytest.raises(WorkCancelled):
            served.token_stats(TEXTS, progress=progress, cache=False)
        assert served_threads() == []  # the requests in flight were waited for, the queued ones dropped
        sent, connections = proxy.requests - before, proxy.connections
        # the 3 answered, and at most the 2 × CONCURRENCY more the pool had taken on (`served.pool.answers` keeps as
        # many queued as running): a thread that finished may have started a queued one before the cancel reached it
        assert 3 <= sent <= 3 + 2 * CONCURRENCY < len(TEXTS)
        time.sleep(3)  # long enough for a few more 40-word windows on this engine
        assert proxy.requests - before == sent and proxy.connections == connections  # nothing sent after the cancel
        again = served.token_stats(TEXTS[:2], cache=False)  # the model is not left cancelled
        assert [s.n_scored for s in again] == [len(served.fed_ids(t)) - 1 for t in TEXTS[:2]]
        assert proxy.requests - before == sent + 2
    finally:
        proxy.stop()
