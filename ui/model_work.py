"""The pages' model work goes through one line per server (`ui.model_queue`), and stops when its session ends.

Two ways in. Work a page runs itself: `with model_turn(what, cost) as progress:` waits for its turn (its place in
line shown and updated), then gives a progress callback to pass to the model. Work inside a cached function (a
cache hit must not wait): the function body runs `with model_slot():`, and the page calls it through
`queued(lambda: cached_fn(...), what, cost)`; on a cache miss with the model busy the slot raises `Waiting` out of
the cached function, the page waits its turn outside it (where it may draw) and calls it again.

Cancellation: while waiting, every half second, and while computing, at every batch (the progress callback) and
before every layer of the model (`watch_layers`: a long window alone is one batch of a minute on a CPU), the session
is looked up in Streamlit's runtime; once it has ended (browser closed) the work stops with Streamlit's
StopException and its ticket leaves. The same look-up reads session state, one of Streamlit's own yield points: a
stop (Streamlit's Stop button, or the disconnect) stops the work there; a rerun (a widget changed) ends a wait (its
place kept for a few seconds for the rerun's own request) but lets running work finish, its result cached for the
rerun, which then follows at once.
Background book audits (`ui.jobs`) are not in this line: they have their own slot.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from torch import nn

from mia_core.limits import MODEL_QUEUE_GRACE_S, MODEL_WORK_SLOTS
from ui.model_queue import RUNNING, WAITING, ModelQueue, Place, Ticket, WorkCancelled

T = TypeVar("T")
#: The server's one line for page model work.
QUEUE = ModelQueue(MODEL_WORK_SLOTS, MODEL_QUEUE_GRACE_S)
#: Seconds between two looks at a waiting request's session and place.
POLL_S = 0.5
#: A session-state key only read: reading session state is where Streamlit stops or reruns a script.
PROBE = "model_work_probe"
LOG = logging.getLogger("mia_lens.model_work")
_current = threading.local()  # the request of the page call running on this thread, if any


class Waiting(BaseException):
    """Raised out of a cached function by `model_slot` when its request must wait its turn (never cached)."""


@dataclass
class _Request:
    """A page's call that may need the model: who asks, what for, what it costs, and its ticket once in line."""

    owner: str
    what: str
    cost: int
    ticket: Ticket | None = None
    rerun: RerunException | None = None  # asked while the work ran: raised once it ends
    defer_rerun: bool = True  # False inside a cached function not called through `queued`: raised at once


def session_id() -> str | None:
    """The browser session this script thread runs for, or None outside a Streamlit script (tests, threads)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


def owner_id() -> str:
    """Whose work this is: the browser session, else this thread."""
    return session_id() or f"thread-{threading.get_ident()}"


def session_alive(owner: str) -> bool:
    """Whether the session still exists in this server's runtime (a thread owner, or no runtime: always)."""
    if owner.startswith("thread-") or not runtime.exists():
        return True
    return bool(runtime.get_instance().is_active_session(owner))


def check_session(done: int = 0, total: int = 0) -> None:
    """The progress callback of page work: stop it when its session has ended or at Streamlit's stop; a rerun asked
    meanwhile is kept for the end of the running work (`_raise_rerun`), or raised at once outside a page request."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return
    if not session_alive(ctx.session_id):
        raise StopException()
    request = getattr(_current, "request", None)
    try:
        _ = PROBE in st.session_state  # Streamlit raises its StopException or RerunException here when one is pending
    except RerunException as rerun:
        if request is None or not request.defer_rerun or request.ticket is None or request.ticket.state != RUNNING:
            raise
        request.rerun = rerun  # the latest wins, as Streamlit's own


def _raise_rerun(request: "_Request") -> None:
    """The rerun asked while the request's work ran, now that it ended."""
    if request.rerun is not None:
        raise request.rerun


def _layer_check(module: nn.Module, args: tuple) -> None:
    """Before a model layer: page work whose session ended stops here (no-op on threads without a running request)."""
    request = getattr(_current, "request", None)
    if request is not None and request.ticket is not None and request.ticket.state == RUNNING:
        check_session()


def watch_layers(model: nn.Module) -> None:
    """Check a page request's session before every layer of `model` (each module of a ModuleList: the transformer
    blocks), so a single long window is stopped within a layer's time; once per loaded model."""
    if getattr(model, "_mia_layers_watched", False):
        return
    for modules in [m for m in model.modules() if isinstance(m, nn.ModuleList)]:
        for layer in modules:
            layer.register_forward_pre_hook(_layer_check)
    model._mia_layers_watched = True


def waiting_line(place: Place, cost: int) -> str:
    """What a waiting visitor reads: their place, and why they wait."""
    busy = "another visitor's request" if place.running else "the request ahead of yours"
    return (f"Waiting for the model: position {place.position} of {place.waiting} in line (the model is busy with "
            f"{busy}; requests run one at a time, in order)." + (f" Yours: ≈ {cost:,} token-passes." if cost else ""))


def _alive_and_prune(owner: str) -> bool:
    """Tickets of sessions that ended leave the line; whether `owner`'s session still runs (Streamlit may stop or
    rerun the script here)."""
    QUEUE.drop(lambda other: not session_alive(other))
    check_session()
    return session_alive(owner)


def _wait_turn(ticket: Ticket) -> None:
    """Wait for the ticket's turn, its place drawn in a new placeholder; a wait ends with a caption."""
    if QUEUE.start(ticket):
        return
    box = st.empty()
    began = time.monotonic()
    QUEUE.wait(ticket, alive=lambda: _alive_and_prune(ticket.owner),
               on_place=lambda place: box.info(waiting_line(place, ticket.cost), icon="⏳"), poll_s=POLL_S)
    box.caption(f"Waited {time.monotonic() - began:.0f} s in line for the model.")


def _end(ticket: Ticket, error: BaseException | None) -> None:
    """The ticket's work ended: a rerun keeps its place a few seconds, anything else leaves the line."""
    if isinstance(error, RerunException):
        QUEUE.detach(ticket)
        return
    QUEUE.finish(ticket)
    if isinstance(error, (StopException, WorkCancelled)) and not session_alive(ticket.owner):
        LOG.warning("Model work cancelled, its session ended: %s (%s)", ticket.what, ticket.owner)


@contextmanager
def model_turn(what: str, cost: int = 0) -> Iterator[Callable[[int, int], None]]:
    """Wait for this page request's turn with the model (its place shown), then hold it: yields the progress
    callback that stops the work when the session ends or reruns."""
    outer = getattr(_current, "request", None)
    if outer is not None and outer.ticket is not None and outer.ticket.state == RUNNING:
        yield check_session  # inside a request that already holds the model
        return
    request = _Request(owner_id(), what, cost)
    request.ticket = QUEUE.join(request.owner, what, cost)
    _current.request = request
    try:
        _wait_turn(request.ticket)
        yield check_session
    except BaseException as err:
        _end(request.ticket, err)
        raise
    else:
        _end(request.ticket, None)
    finally:
        _current.request = outer
    _raise_rerun(request)


@contextmanager
def model_slot() -> Iterator[Callable[[int, int], None]]:
    """In a cached function's body, around its model work: the turn of the page request calling it (`queued`),
    raising `Waiting` when it must wait; called otherwise, it waits here (nothing drawn). Yields the progress callback."""
    request = getattr(_current, "request", None)
    if request is None:
        with model_turn_quiet() as progress:
            yield progress
        return
    if request.ticket is None or request.ticket.state not in (WAITING, RUNNING):
        request.ticket = QUEUE.join(request.owner, request.what, request.cost)
    if not QUEUE.start(request.ticket):
        raise Waiting(request.what)
    yield check_session


@contextmanager
def model_turn_quiet() -> Iterator[Callable[[int, int], None]]:
    """A turn for work not called from a page's `queued` (nothing drawn while it waits)."""
    request = _Request(owner_id(), "model work", 0, defer_rerun=False)
    ticket = request.ticket = QUEUE.join(request.owner, request.what)
    try:
        QUEUE.wait(ticket, alive=lambda: _alive_and_prune(ticket.owner), poll_s=POLL_S)
        _current.request = request  # the layer checks see it
        yield check_session
    except BaseException as err:
        _end(ticket, err)
        raise
    else:
        _end(ticket, None)
    finally:
        _current.request = None


def queued(call: Callable[[], T], what: str, cost: int = 0) -> T:
    """`call()` (a cached function whose model work is in a `model_slot`): a cache hit at once; a miss in its turn,
    the request's place shown while it waits."""
    outer = getattr(_current, "request", None)
    if outer is not None:
        return call()  # inside another request: its turn covers this call
    request = _current.request = _Request(owner_id(), what, cost)
    try:
        try:
            result = call()
        except Waiting:
            assert request.ticket is not None  # joined by the slot that raised
            _wait_turn(request.ticket)
            result = call()
    except BaseException as err:
        if request.ticket is not None:
            _end(request.ticket, err)
            request.ticket = None
        raise
    finally:
        if request.ticket is not None:
            _end(request.ticket, None)
        _current.request = None
    _raise_rerun(request)
    return result
