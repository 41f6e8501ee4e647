"""Progress of scoring a reference set: texts done of all, the time elapsed, and an ETA, for a page or a log.

The count is of texts whose statistics are ready (cached ones at once); the ETA is from the token pace of the
model pass (texts are batched by length, so counting texts would misjudge the pace), counted down by the clock.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class TextsProgress:
    """`done` of `total` texts scored, `elapsed_s` since scoring began, `eta_s` left (None before any pace is known)."""

    done: int
    total: int
    elapsed_s: float
    eta_s: float | None

    def words(self) -> str:
        """"40 of 120 texts, ETA 1 min 10 s" (no ETA before the first batch, none once done)."""
        head = f"{self.done:,} of {self.total:,} texts"
        if self.done >= self.total or self.eta_s is None:
            return head
        return f"{head}, ETA {duration_words(self.eta_s)}"


def duration_words(seconds: float) -> str:
    """Seconds in words: "8 s", "1 min 10 s", "2 h 5 min" (rounded to the second)."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


class TextsClock:
    """Turns a scoring pass's events (a text ready, a batch of tokens fed) into `TextsProgress` for `report`."""

    def __init__(self, total: int, report: Callable[[TextsProgress], None],
                 now: Callable[[], float] = time.monotonic) -> None:
        self.total, self.report, self.now = total, report, now
        self.start = now()
        self.done = 0
        self.tokens: tuple[int, int] | None = None  # (fed, all) of the model pass over the texts not cached
        self.pace_at: float | None = None  # when the token count last moved

    def text_ready(self, index: int = 0, stats: object = None) -> None:
        """One more text's statistics are ready (an `on_stats` callback of `LanguageModel.token_stats`)."""
        self.done += 1
        self.report(self.progress())

    def texts_ready(self, count: int) -> None:
        """`count` more texts are scored (a batch of them, as `scoring.score_table`'s `texts_done` reports)."""
        self.done = min(self.total, self.done + count)
        self.report(self.progress())

    def tokens_fed(self, fed: int, total: int) -> None:
        """The model pass fed `fed` of its `total` tokens (a `progress` callback of `LanguageModel.token_stats`)."""
        self.tokens, self.pace_at = (fed, total), self.now()
        self.report(self.progress())

    def progress(self) -> TextsProgress:
        """Where scoring stands now: the ETA is the pass's time per token × tokens left, less the time since then."""
        moment = self.now()
        if self.done >= self.total:
            eta = 0.0
        elif self.tokens is None or self.tokens[0] <= 0 or self.pace_at is None:
            eta = None
        else:
            fed, total = self.tokens
            spent = self.pace_at - self.start
            eta = max(0.0, spent / fed * (total - fed) - (moment - self.pace_at))
        return TextsProgress(self.done, self.total, moment - self.start, eta)
