"""How long a book audit takes: an estimate before it runs, and its progress with an ETA while it runs.

The estimate is snippets × tokens per snippet × the model's seconds per token, the last measured once on
this machine by a short pass over a fixed text (`measure_speed`); the same speed sizes a run's first batch
(`first_batch_size`) so its first result comes within `FIRST_BATCH_S`. The ETA is read from the results store
(`runs.store.RunProgress`): the pace of the batches committed in this scoring session times the snippets
left, counted down from the last batch by the clock, and the elapsed time runs with the clock too.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable

from ..model.language_model import LanguageModel
from ..runs.run_status import RunProgress
from .snippets import spread_positions

#: A fixed English paragraph (written for this purpose) timed to measure a model's speed; repeated to `TIMING_TOKENS`.
TIMING_TEXT = (
    "The ferry left the harbour a little after dawn, when the water was still grey and the gulls had not yet "
    "found their voices. Most of the passengers were farmers taking early vegetables to the market across the bay, "
    "and they stood by the rail with their baskets, talking about the weather, the price of seed and a neighbour's "
    "new roof. A schoolteacher sat apart with a book she did not read. By the time the town came into view, the sun "
    "had burned the mist off the hills, and the bells of the old church were ringing the hour.")
#: Seconds the first batch of a page audit should take (its first result then shows within about this long).
FIRST_BATCH_S = 20.0
#: What the progress line says once the ETA has counted down with snippets still to score (never "0:00 left").
OVERDUE = "taking longer than its pace so far: still scoring"
#: Tokens per text of the timing pass (two texts, after a short warm-up): about a second for a 135M model on a CPU.
TIMING_TOKENS = 192


@dataclass(frozen=True)
class ModelSpeed:
    """A model's measured speed on this machine: seconds per scored token, and tokens per word of English prose."""

    seconds_per_token: float
    tokens_per_word: float


def tokens_per_word(lm: LanguageModel) -> float:
    """Tokens per word of English prose (`TIMING_TEXT`) under this model's tokenizer."""
    return len(lm.tokenizer(TIMING_TEXT)["input_ids"]) / len(TIMING_TEXT.split())


def timing_text(lm: LanguageModel, n_tokens: int = TIMING_TOKENS) -> str:
    """`TIMING_TEXT` repeated and cut to about `n_tokens` tokens of this model's tokenizer (whole words)."""
    words = TIMING_TEXT.split()
    per_word = tokens_per_word(lm)
    n_words = max(1, int(n_tokens / per_word))
    return " ".join(words[i % len(words)] for i in range(n_words))


def measure_speed(lm: LanguageModel, *, clock: Callable[[], float] = time.perf_counter) -> ModelSpeed:
    """Time one batch of two timing texts through `lm.token_stats` (no statistics cache) after a short warm-up."""
    text = timing_text(lm)
    lm.token_stats([" ".join(text.split()[:8])], cache=False)  # first-call costs (allocations, kernels) not timed
    start = clock()
    stats = lm.token_stats([text, text], cache=False)
    seconds = clock() - start
    tokens = sum(s.n_scored for s in stats)
    return ModelSpeed(seconds / max(tokens, 1), stats[0].n_scored / len(text.split()))


def snippet_count(word_counts: Iterable[int], snippet_words: int, max_per_book: int | None = None) -> int:
    """How many snippets `audit.snippets.book_snippets` cuts from books of these word counts (full snippets only)."""
    return sum(len(spread_positions(n // snippet_words, max_per_book)) for n in word_counts if n >= snippet_words)


def snippet_tokens(snippet_words: int, speed: ModelSpeed, context: int) -> int:
    """Tokens scored per snippet of `snippet_words` words at the measured tokens per word, truncated to `context`."""
    return min(math.ceil(snippet_words * speed.tokens_per_word), context)


def audit_seconds(n_snippets: int, snippet_words: int, speed: ModelSpeed, context: int) -> float:
    """Seconds to score `n_snippets` snippets of `snippet_words` words, each truncated to `context` tokens."""
    return n_snippets * snippet_tokens(snippet_words, speed, context) * speed.seconds_per_token


def first_batch_size(speed: ModelSpeed, snippet_words: int, context: int, normal: int,
                     target_s: float = FIRST_BATCH_S) -> int:
    """Snippets the first batch may hold to take about `target_s` at the measured speed: at least 1, at most `normal`."""
    per_snippet = snippet_tokens(snippet_words, speed, context) * speed.seconds_per_token
    return max(1, min(normal, int(target_s // per_snippet) if per_snippet > 0 else normal))


def clock_text(seconds: float) -> str:
    """Seconds as m:ss, or h:mm:ss from an hour on (72 → "1:12", 3723 → "1:02:03")."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def about(seconds: float) -> str:
    """A duration in round words: "under a minute", "about 4 min", "about 2 h 10 min"."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min" if hours else f"about {minutes} min"


def progress_line(progress: RunProgress, now: datetime | None = None) -> str:
    """"32 of 60 snippets · 1:12 elapsed · about 1:05 left", as of `now` (UTC, no time zone; default: the last batch).

    Elapsed runs from the session's start to `now`, so it keeps ticking while a batch is scored. The pace is that of
    this scoring session (snippets stored before it, by an earlier session, are not counted), so a resumed run's ETA
    is not flattered by work it did not do; the time since the last batch is taken off the ETA. Once that countdown
    runs out with snippets left, the line says the run is slower than its pace so far (`OVERDUE`), never "0:00 left".
    """
    head = f"{progress.scored:,} of {progress.planned:,} snippets"
    new = progress.scored - progress.scored_before
    resumed = f" · {progress.scored_before:,} stored before (resumed)" if progress.scored_before else ""
    if progress.started_at is None:
        return head
    first = new <= 0 or progress.last_batch_at is None or progress.last_batch_at < progress.started_at
    until = now if now is not None and progress.scored < progress.planned else progress.last_batch_at
    elapsed = f" · {clock_text((until - progress.started_at).total_seconds())} elapsed" if until is not None else ""
    if first:
        return head + " · first batch in progress" + (elapsed if now is not None else "") + resumed
    spent = (progress.last_batch_at - progress.started_at).total_seconds()
    line = head + elapsed
    if progress.scored < progress.planned:
        since = max(0.0, (until - progress.last_batch_at).total_seconds())
        left = spent / new * (progress.planned - progress.scored) - since
        line += f" · about {clock_text(max(left, 1.0))} left" if left > 0 else f" · {OVERDUE}"  # never "0:00 left"
    return line + resumed
