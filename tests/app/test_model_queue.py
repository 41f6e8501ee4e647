"""The server's line for model work (`ui.model_queue`, `ui.model_work`): real threads, order kept, places told, a
waiter whose owner is gone leaves, and running work on a tiny real model stops at the next batch or layer."""
from __future__ import annotations

import threading
import time

import pytest

from mia_core.limits import RequestTooLarge, check_request_cost, token_pass_bound
from mia_core.model.language_model import LanguageModel
from mia_core.model.stats_cache import StatsCache
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer
from ui import model_work
from ui.model_queue import DONE, RUNNING, ModelQueue, Place, WorkCancelled
from ui.work_estimate import estimate_line, request_passes


def waiter(queue: ModelQueue, owner: str, started: list[str], places: dict[str, list[Place]], alive=lambda: True,
           errors: dict | None = None, hold_s: float = 0.05) -> threading.Thread:
    """A thread that joins now, waits its turn (recording its places), holds the model briefly, and leaves."""
    ticket = queue.join(owner, f"{owner}'s request")

    def run():
        try:
            queue.wait(ticket, alive=alive, on_place=places.setdefault(owner, []).append, poll_s=0.02)
        except WorkCancelled as err:
            (errors if errors is not None else {})[owner] = err
            return
        started.append(owner)
        time.sleep(hold_s)
        queue.finish(ticket)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_requests_start_one_at_a_time_in_order_and_are_told_their_place():
    queue = ModelQueue(slots=1, grace_s=1.0)
    first = queue.join("a", "a's request")
    assert queue.start(first)
    started, places = [], {}
    threads = [waiter(queue, owner, started, places) for owner in "bcd"]
    time.sleep(0.2)
    assert started == []  # the model is busy with a's request
    assert [places[o][-1] for o in "bcd"] == [Place(1, 3, 1), Place(2, 3, 1), Place(3, 3, 1)]
    queue.finish(first)
    for thread in threads:
        thread.join(5)
    assert started == ["b", "c", "d"]
    assert Place(1, 2, 1) in places["c"] and Place(1, 1, 1) in places["d"]  # each moved up as the line went
    assert queue.tickets() == []


def test_a_waiter_whose_owner_is_gone_leaves_and_the_others_move_up():
    queue = ModelQueue(slots=1)
    first = queue.join("a", "a's request")
    assert queue.start(first)
    gone = threading.Event()
    started, places, errors = [], {}, {}
    threads = [waiter(queue, "b", started, places),
               waiter(queue, "c", started, places, alive=lambda: not gone.is_set(), errors=errors),
               waiter(queue, "d", started, places)]
    time.sleep(0.1)
    began = time.monotonic()
    gone.set()
    threads[1].join(2)
    assert isinstance(errors.get("c"), WorkCancelled) and time.monotonic() - began < 1
    assert [t.owner for t in queue.tickets()] == ["a", "b", "d"]
    time.sleep(0.1)
    assert places["d"][-1] == Place(2, 2, 1)
    queue.finish(first)
    for thread in threads:
        thread.join(5)
    assert started == ["b", "d"]


def test_drop_removes_the_tickets_of_owners_gone():
    queue = ModelQueue()
    running, waiting, other = queue.join("a", "x"), queue.join("b", "y"), queue.join("c", "z")
    assert queue.start(running)
    assert queue.drop(lambda owner: owner in ("a", "b")) == 1  # a runs: its own thread stops it, at its next batch
    assert [t.owner for t in queue.tickets()] == ["a", "c"] and waiting.state == DONE
    assert queue.place(other) == Place(1, 1, 1)


def test_a_rerun_keeps_its_place_for_the_grace_then_leaves():
    queue = ModelQueue(slots=1, grace_s=0.3)
    a, b = queue.join("a", "old"), queue.join("b", "b's")
    queue.detach(a)  # a's script was rerun while it waited
    assert not queue.start(b)  # a's place is kept for its rerun
    again = queue.join("a", "new")  # the rerun's request takes it back, ahead of b
    assert [t.what for t in queue.tickets()] == ["new", "b's"] and a.state == DONE
    assert queue.start(again) and not queue.start(b)
    queue.detach(again)
    time.sleep(0.4)  # not claimed within the grace: it leaves, b goes
    assert queue.start(b) and [t.owner for t in queue.tickets()] == ["b"]


def test_a_newer_request_of_the_same_owner_supersedes_the_waiting_one():
    queue = ModelQueue()
    busy, old = queue.join("x", "busy"), queue.join("a", "old")
    assert queue.start(busy)
    queue.join("b", "b's")
    new = queue.join("a", "new")
    assert [t.what for t in queue.tickets()] == ["busy", "new", "b's"]
    with pytest.raises(WorkCancelled):
        queue.start(old)
    assert queue.place(new) == Place(1, 2, 1)


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> LanguageModel:
    """A tiny real model with a statistics cache of its own (nothing read from an earlier test)."""
    tok = tiny_tokenizer(300)
    return LanguageModel(tiny_llama(len(tok), max_positions=512), tok, name="tiny",
                         stats_cache=StatsCache(tmp_path_factory.mktemp("stats")))


def test_running_work_stops_at_the_next_batch_when_the_callback_raises(lm):
    texts = random_texts(12, seed=3, min_words=60, max_words=80)
    batches, owner_gone = [], threading.Event()

    def progress(done: int, total: int) -> None:
        batches.append(done)
        owner_gone.set()  # the session ends during the first batch
        if owner_gone.is_set():
            raise WorkCancelled("session ended")

    with pytest.raises(WorkCancelled):
        lm.token_stats(texts, progress=progress, cache=False, batch_tokens=128)
    assert len(batches) == 1  # stopped after the first of many batches
    finished = lm.token_stats(texts[:1], cache=False, batch_tokens=128)  # the model still works afterwards
    assert finished[0].n_scored > 0


def test_a_long_window_is_stopped_between_layers(lm, monkeypatch):
    """One window is one batch: the page request's check also runs before every layer (`watch_layers`)."""
    model_work.watch_layers(lm.model)
    model_work.watch_layers(lm.model)  # once per model
    calls = []

    def check(done: int = 0, total: int = 0) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise WorkCancelled("session ended")

    monkeypatch.setattr(model_work, "check_session", check)
    request = model_work._Request("s", "one window", 0, ticket=ModelQueue().join("s", "one window"))
    request.ticket.state = RUNNING
    model_work._current.request = request
    try:
        with pytest.raises(WorkCancelled):
            lm.token_stats(random_texts(1, seed=5, min_words=100, max_words=100), cache=False)
    finally:
        model_work._current.request = None
    assert len(calls) == 2  # the second layer of the first forward pass: nothing after it ran
    lm.token_stats(["no page request on this thread: not checked."], cache=False)
    assert len(calls) == 2


def test_queued_and_turns_outside_a_page_keep_order_across_threads(monkeypatch):
    """`model_turn` and `model_slot` without a Streamlit session: each thread is an owner, served in order."""
    queue = ModelQueue(slots=1)
    monkeypatch.setattr(model_work, "QUEUE", queue)
    monkeypatch.setattr(model_work, "POLL_S", 0.02)
    order, gate = [], threading.Event()

    def work(name: str) -> None:
        with model_work.model_slot() as progress:
            progress(0, 1)
            order.append(name)
            gate.wait(5)

    threads = [threading.Thread(target=work, args=(n,)) for n in "xyz"]
    for thread in threads:
        thread.start()
        time.sleep(0.1)  # each joins after the one before
    assert order == ["x"] and [t.state for t in queue.tickets()] == [RUNNING, "waiting", "waiting"]
    gate.set()
    for thread in threads:
        thread.join(5)
    assert order == ["x", "y", "z"] and queue.tickets() == []


def test_the_bound_on_a_request_is_larger_on_a_gpu_and_the_estimate_says_it():
    assert token_pass_bound("cpu") < token_pass_bound("cuda") == token_pass_bound("mps")
    check_request_cost(token_pass_bound("cpu"), "cpu")
    with pytest.raises(RequestTooLarge, match="token-passes"):
        check_request_cost(token_pass_bound("cpu") + 1, "cpu")
    check_request_cost(token_pass_bound("cpu") + 1, "cuda")
    assert request_passes(["min_k", "zlib"]) == 1  # statistics-only methods share the one pass
    assert request_passes(["min_k", "lowercase", "neighbor"], {"neighbor": {"n_neighbors": 5}}) == 1 + 1 + 6
    line = estimate_line(16_000, 4, "cpu")
    assert "16,000 tokens × 4 passes = 64,000 token-passes" in line and "over the bound" in line
    assert "over the bound" not in estimate_line(16_000, 2, "cpu")
