"""A first-in, first-out line for the model work of a dashboard server: one request computes at a time (a stated
number of slots), the others wait in the order they came, each told its place.

Plain threads, no Streamlit (the pages' side is `ui.model_work`). A ticket belongs to an owner (a browser session):
an owner holds at most one ticket, so a new request of the same session takes its older one's place in line. A
ticket left by a rerun is *detached*: it keeps its place for `grace_s` seconds for the rerun to claim it again, and
then leaves. Tickets of owners that are gone leave at once (`drop`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

WAITING, RUNNING, DETACHED, DONE = "waiting", "running", "detached", "done"


class WorkCancelled(BaseException):
    """The work's owner is gone (its browser session ended): raised out of the wait or from the progress callback.

    A BaseException, as Streamlit's own StopException, so no `except Exception` between a batch and the page keeps
    the cancelled work going."""


@dataclass(eq=False)
class Ticket:
    """One request's place: who asked (`owner`), what for (`what`), what it costs (token-passes), and where it is."""

    owner: str
    what: str
    cost: int
    state: str = WAITING
    detached_at: float = 0.0


@dataclass(frozen=True)
class Place:
    """Where a waiting ticket stands: `position` (1 = next) of `waiting` tickets in line, with `running` computing."""

    position: int
    waiting: int
    running: int


class ModelQueue:
    """The line: `join`, then `start` (or `wait`), then `finish`; `detach` on a rerun, `drop` for owners gone."""

    def __init__(self, slots: int = 1, grace_s: float = 3.0) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1 (got {slots})")
        self.slots, self.grace_s = slots, grace_s
        self._tickets: list[Ticket] = []  # in order of arrival; running ones stay where they were
        self._changed = threading.Condition()

    def join(self, owner: str, what: str, cost: int = 0) -> Ticket:
        """A ticket at the end of the line, or in the place of the owner's own ticket still in it (a newer request
        of the same session supersedes its older one)."""
        with self._changed:
            self._expire()
            mine = next((t for t in self._tickets if t.owner == owner and t.state in (WAITING, DETACHED)), None)
            ticket = Ticket(owner, what, cost)
            if mine is None:
                self._tickets.append(ticket)
            else:
                self._tickets[self._tickets.index(mine)] = ticket
                mine.state = DONE
            self._changed.notify_all()
            return ticket

    def start(self, ticket: Ticket) -> bool:
        """Start the ticket if a slot is free and no waiting ticket (or detached one in its grace) is ahead of it."""
        with self._changed:
            self._expire()
            if ticket.state == RUNNING:
                return True
            if ticket.state != WAITING:
                raise WorkCancelled(f"{ticket.what}: no longer in line")
            running = sum(t.state == RUNNING for t in self._tickets)
            ahead = self._tickets[:self._tickets.index(ticket)]
            if running >= self.slots or any(t.state in (WAITING, DETACHED) for t in ahead):
                return False
            ticket.state = RUNNING
            return True

    def place(self, ticket: Ticket) -> Place:
        """The ticket's place in line now (position 0 once it runs or has left)."""
        with self._changed:
            self._expire()
            line = [t for t in self._tickets if t.state in (WAITING, DETACHED)]
            running = sum(t.state == RUNNING for t in self._tickets)
            return Place(line.index(ticket) + 1 if ticket in line else 0, len(line), running)

    def wait(self, ticket: Ticket, *, alive: Callable[[], bool] = lambda: True,
             on_place: Callable[[Place], None] | None = None, poll_s: float = 0.5) -> None:
        """Block until the ticket starts; `on_place` hears every change of its place, `alive` is asked every poll and
        its False ends the wait with `WorkCancelled` (the ticket leaves the line). An exception raised by either
        leaves the ticket as it is, for the caller to `finish` or `detach`."""
        seen = None
        while not self.start(ticket):
            if not alive():
                self.finish(ticket)
                raise WorkCancelled(f"{ticket.what}: its owner is gone")
            now = self.place(ticket)
            if on_place is not None and now != seen:
                on_place(now)
            seen = now
            with self._changed:
                self._changed.wait(poll_s)

    def finish(self, ticket: Ticket) -> None:
        """The ticket leaves the line (its work ended, failed or was cancelled): the next one may start."""
        with self._changed:
            ticket.state = DONE
            if ticket in self._tickets:
                self._tickets.remove(ticket)
            self._changed.notify_all()

    def detach(self, ticket: Ticket) -> None:
        """The owner's script was rerun while the ticket waited or ran: it frees its slot and keeps its place for
        `grace_s` seconds, for the rerun's own request to take (`join` by the same owner)."""
        with self._changed:
            if ticket in self._tickets:
                ticket.state, ticket.detached_at = DETACHED, time.monotonic()
            self._changed.notify_all()

    def drop(self, gone: Callable[[str], bool]) -> int:
        """Remove the waiting and detached tickets of owners that are gone; how many left."""
        with self._changed:
            leaving = [t for t in self._tickets if t.state in (WAITING, DETACHED) and gone(t.owner)]
            for ticket in leaving:
                ticket.state = DONE
                self._tickets.remove(ticket)
            if leaving:
                self._changed.notify_all()
            return len(leaving)

    def tickets(self) -> list[Ticket]:
        """The tickets in line and running, in order (a copy)."""
        with self._changed:
            self._expire()
            return list(self._tickets)

    def _expire(self) -> None:
        """Detached tickets past their grace leave (called with the lock held)."""
        now = time.monotonic()
        for ticket in [t for t in self._tickets if t.state == DETACHED and now - t.detached_at > self.grace_s]:
            ticket.state = DONE
            self._tickets.remove(ticket)
            self._changed.notify_all()
