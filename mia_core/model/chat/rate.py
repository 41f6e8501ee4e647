"""Requests and tokens per minute: a run waits before a request that would take it past the spec's `rpm=`/`tpm=` in
the last 60 seconds (the API's own 429 and Retry-After are honoured besides, by the client)."""
from __future__ import annotations

import threading
import time
from collections import deque

WINDOW_S = 60.0


class RateLimit:
    """A sliding one-minute window of sent requests and their tokens, shared by a run's threads."""

    def __init__(self, rpm: int | None, tpm: int | None, *, clock=time.monotonic, sleep=time.sleep):
        self.rpm, self.tpm = rpm, tpm
        self._sent: deque[list] = deque()  # [time, tokens] per request, oldest first
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def wait(self, tokens: int, cancelled: threading.Event | None = None) -> list:
        """Block until a request of `tokens` (its bound) fits in the window, then count it; the returned entry is
        corrected with `settle` once the API says what it used."""
        tokens = min(tokens, self.tpm) if self.tpm else tokens  # a request larger than a minute's tokens still goes
        while True:
            with self._lock:
                now = self._clock()
                while self._sent and now - self._sent[0][0] >= WINDOW_S:
                    self._sent.popleft()
                used = sum(entry[1] for entry in self._sent)
                fits = (self.rpm is None or len(self._sent) < self.rpm) and (self.tpm is None or used + tokens <= self.tpm)
                if fits or not self._sent:
                    entry = [now, tokens]
                    self._sent.append(entry)
                    return entry
                pause = max(0.05, WINDOW_S - (now - self._sent[0][0]))
            if cancelled is not None and cancelled.wait(pause):
                raise InterruptedError("cancelled")
            if cancelled is None:
                self._sleep(pause)

    def settle(self, entry: list, tokens: int) -> None:
        """Replace a request's bound by the tokens it really used (the API's `usage`)."""
        with self._lock:
            entry[1] = tokens
