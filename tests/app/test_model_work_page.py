"""The pages' side of the model line, through AppTest on Explore with a tiny model: the estimate is shown before a
request runs and a request over the bound is refused; a request waits its turn behind another visitor's, told its
place; its session ending (Streamlit's runtime says so) takes it out of the line, or stops it while it computes."""
from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest
from streamlit.runtime import Runtime

import mia_core.limits
from ui import model_work
from ui.model_queue import ModelQueue


@pytest.fixture
def line(monkeypatch) -> ModelQueue:
    """A line of this test's own, looked at every 0.1 s."""
    queue = ModelQueue(slots=1, grace_s=1.0)
    monkeypatch.setattr(model_work, "QUEUE", queue)
    monkeypatch.setattr(model_work, "POLL_S", 0.1)
    return queue


def explore_with_text(tiny_app, words: int = 40):
    """Explore with the tiny model and a text no earlier test scored (no cache hit)."""
    at = tiny_app("app_pages/explore.py")
    text = f"{uuid.uuid4().hex} " + " ".join(["the river ran past the castle"] * (words // 6))
    at.text_area(key="explore_text").input(text).run()
    return at


def test_the_estimate_is_shown_before_scoring_and_a_request_over_the_bound_is_refused(tiny_app, line, monkeypatch):
    at = explore_with_text(tiny_app)
    estimate = next(c.value for c in at.caption if c.value.startswith("Estimated cost"))
    assert "× 1 pass =" in estimate and "one request may cost on this server's CPU" in estimate
    monkeypatch.setattr(mia_core.limits, "MAX_REQUEST_TOKEN_PASSES_CPU", 10)
    at.run()
    assert "over the bound" in next(c.value for c in at.caption if c.value.startswith("Estimated cost"))
    at.button[0].click().run()
    assert any("token-passes" in e.value and "over the 10" in e.value for e in at.error)
    assert "explore_request" not in at.session_state  # nothing ran, nothing queued
    assert line.tickets() == []


def test_a_request_waits_its_turn_behind_another_visitors_and_is_told_its_place(tiny_app, line, monkeypatch):
    at = explore_with_text(tiny_app)
    other = line.join("another visitor", "a long text")
    assert line.start(other)
    told = []
    monkeypatch.setattr(model_work, "waiting_line",
                        lambda place, cost, shown=model_work.waiting_line: told.append(shown(place, cost)) or told[-1])
    threading.Timer(1.5, line.finish, args=(other,)).start()
    began = time.monotonic()
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert time.monotonic() - began >= 1.4  # it waited for the other request
    assert told and told[0].startswith("Waiting for the model: position 1 of 1 in line (the model is busy with "
                                       "another visitor's request")
    assert any(c.value.startswith("Waited ") and "in line for the model" in c.value for c in at.caption)
    assert any("tokens scored" in c.value for c in at.caption)  # then it ran
    assert line.tickets() == []


def end_session_after(seconds: float) -> threading.Timer:
    """From another thread: Streamlit's runtime (AppTest's) reports the session gone after `seconds`."""
    timer = threading.Timer(seconds, lambda: setattr(Runtime._instance.is_active_session, "return_value", False))
    timer.start()
    return timer


def test_a_waiting_request_whose_session_ended_leaves_the_line(tiny_app, line, caplog):
    at = explore_with_text(tiny_app)
    other = line.join("another visitor", "a long text")
    assert line.start(other)
    end_session_after(1.0)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="mia_lens.model_work"):
        at.button[0].click().run()
    assert time.monotonic() - began < 5  # out of the line well within 10 s, while the other still runs
    assert [t.owner for t in line.tickets()] == ["another visitor"]
    assert "Model work cancelled, its session ended" in caplog.text
    assert not any("tokens scored" in c.value for c in at.caption)
    line.finish(other)


def test_running_work_whose_session_ended_stops_before_its_next_layer(tiny_app, line, caplog, monkeypatch):
    at = explore_with_text(tiny_app, words=400)
    checks = []
    alive = model_work.session_alive

    def ends_during_the_pass(owner: str) -> bool:  # the session ends while the model computes
        checks.append(owner)
        return alive(owner) and len(checks) < 2  # the tiny model's one pass checks before each of its 2 layers

    monkeypatch.setattr(model_work, "session_alive", ends_during_the_pass)
    with caplog.at_level(logging.WARNING, logger="mia_lens.model_work"):
        at.button[0].click().run()
    assert "Model work cancelled, its session ended: Scoring a text" in caplog.text
    assert not any("tokens scored" in c.value for c in at.caption)
    assert line.tickets() == []  # the slot is free for the next visitor
