"""Progress of a long command on stderr: a live bar on a terminal, plain lines about every 10% otherwise.

The core reports progress through a callback `progress(done, total)`; this module turns it into
what a person or a log file can read. On a terminal: tqdm's bar. Redirected to a file, a pipe or a
job log: one line per tenth of the work, and one at least every `EVERY_S` seconds while work advances
(a tenth of one long text can take many minutes), e.g.
`scoring: 12,000/120,000 tokens (10%), 0:41 elapsed, ETA 6:09` — never a carriage return.
A pass that starts again (done falls back, or the total changes: a method's extra pass) starts a
new series of lines and a new clock.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm.auto import tqdm

from ..audit.timing import clock_text as clock  # m:ss / h:mm:ss, one formatter for the audit page and the CLI
from ..model.served.served_model import LARGE_ANSWER_BYTES, answer_size_words
from .terminal import echo, one_line

#: Lines per pass when stderr is not a terminal (one each tenth of the work).
STEPS = 10
#: Seconds after which a line is written anyway, if the work advanced since the last one.
EVERY_S = 30.0

#: progress(done, total) as the core calls it; the command's own loops may add note="loss 0.731".
Progress = Callable[..., None]


class PlainProgress:
    """`progress(done, total)` written as one line per tenth of the work, with the elapsed time and an ETA."""

    def __init__(self, label: str, unit: str | None, stream: TextIO, now: Callable[[], float] = time.monotonic, *,
                 done: int = 0, total: int | None = None) -> None:
        """`done`/`total`: where a resumed job starts (the ETA counts only the work done in this run)."""
        self.label, self.unit, self.stream, self.now = label, unit, stream, now
        self._new_pass(done, total)

    def _new_pass(self, done: int, total: int | None) -> None:
        """Start counting a pass (again): its lines, its clock and the work it starts from."""
        self.total, self.done, self.base, self.start = total, done, done, self.now()
        self.step = STEPS * done // total if total else 0
        self.last_at, self.last_done = self.start, done  # the last line written: when, and at what count

    def __call__(self, done: int, total: int | None, note: str = "") -> None:
        """Record progress; write a line when it crosses the next tenth, or when EVERY_S seconds have passed since the
        last line and the work advanced (nothing while the total is unknown)."""
        if done < self.done or (self.total is not None and total != self.total):  # a new pass: new lines, new clock
            self._new_pass(0, total)
        self.total, self.done = total, done  # the first call tells the total; the clock runs from the start
        if not total:
            return
        step, moment = min(STEPS, STEPS * done // total), self.now()
        if step > self.step or (moment - self.last_at >= EVERY_S and done > self.last_done):
            self.step, self.last_at, self.last_done = max(step, self.step), moment, done
            self.stream.write(one_line(self.line(done, total) + (f", {note}" if note else "")) + "\n")
            self.stream.flush()

    def line(self, done: int, total: int) -> str:
        """`label: done/total unit (pct%), elapsed, ETA` (no ETA once done; `label: pct%, …` without a unit)."""
        elapsed = self.now() - self.start
        percent = f"{100 * done // total}%"
        count = percent if self.unit is None else f"{done:,}/{total:,} {self.unit} ({percent})"
        text = f"{self.label}: {count}, {clock(elapsed)} elapsed"
        if self.base < done < total:
            text += f", ETA {clock(elapsed * (total - done) / (done - self.base))}"
        return text


def bar(label: str, unit: str | None, stream: TextIO) -> Progress:
    """tqdm's live bar driven by `progress(done, total)`."""
    meter = tqdm(desc=label, unit=unit or "it", file=stream, leave=False, disable=False)  # not the TQDM_DISABLE of quiet

    def update(done: int, total: int | None, note: str = "") -> None:
        if total is not None and meter.total != total:
            meter.total = total
        meter.n = done
        if note:
            meter.set_postfix_str(note, refresh=False)
        meter.refresh()

    return update


def progress_bar(label: str, unit: str | None = "tokens", *, stream: TextIO | None = None, done: int = 0,
                 total: int | None = None) -> Progress:
    """The progress callback for a command: a bar when stderr is a terminal, else plain lines.

    unit : what `done` counts ("tokens", "snippets"); None shows only the percentage (a scale of thousandths).
    done, total : where a resumed job starts.
    """
    stream = sys.stderr if stream is None else stream
    is_terminal = getattr(stream, "isatty", lambda: False)()
    return bar(label, unit, stream) if is_terminal else PlainProgress(label, unit, stream, done=done, total=total)


def answer_note(lm, texts: list[str], bos: str) -> None:
    """Before a served run that brings the whole distribution back (logprobs=full), one line on stderr: how many MB
    the server will send, so a run that takes minutes on a CPU server is expected, not a hang."""
    per_token = float(getattr(lm, "answer_bytes_per_token", 0.0))
    if per_token < LARGE_ANSWER_BYTES:
        return
    tokens = sum(len(lm.fed_ids(text, bos)) for text in texts)
    echo(f"note: {answer_size_words(per_token, tokens, f'these {tokens:,} tokens')}", err=True)
