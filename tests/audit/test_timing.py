"""An audit's time: the estimate before it runs (snippets × tokens × seconds per token) and the ETA line while it runs."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from mia_core.audit.snippets import book_snippets
from mia_core.audit.sources import Book
from mia_core.audit.timing import (
    FIRST_BATCH_S, ModelSpeed, about, audit_seconds, clock_text, first_batch_size, measure_speed, progress_line,
    snippet_count, timing_text,
)
from mia_core.runs.run_status import RunProgress

T0 = datetime(2026, 1, 5, 9, 0, 0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_progress_line_paces_the_batches_of_this_session():
    # 32 snippets in 72 s: 2.25 s each; 28 left → 63 s
    line = progress_line(RunProgress("running", 32, 60, 0, T0, at(72)))
    assert line == "32 of 60 snippets · 1:12 elapsed · about 1:03 left"
    # resumed: 16 were stored before; this session scored 24 in 48 s (2 s each); 20 left → 40 s
    line = progress_line(RunProgress("running", 40, 60, 16, T0, at(48)))
    assert line == "40 of 60 snippets · 0:48 elapsed · about 0:40 left · 16 stored before (resumed)"
    # an hour-long run: 100 of 1000 in 400 s → 900 × 4 s = 3600 s
    assert progress_line(RunProgress("running", 100, 1000, 0, T0, at(400))) == \
        "100 of 1,000 snippets · 6:40 elapsed · about 1:00:00 left"


def test_progress_line_before_the_first_batch_and_when_done():
    assert progress_line(RunProgress("created", 0, 60, 0, None, None)) == "0 of 60 snippets"
    assert progress_line(RunProgress("running", 0, 60, 0, T0, None)) == "0 of 60 snippets · first batch in progress"
    # resumed, and the newest batch is the earlier session's: no pace yet
    assert progress_line(RunProgress("running", 16, 60, 16, T0, at(-30))) == \
        "16 of 60 snippets · first batch in progress · 16 stored before (resumed)"
    assert progress_line(RunProgress("scored", 60, 60, 0, T0, at(210))) == "60 of 60 snippets · 3:30 elapsed"


def test_durations_in_words():
    assert [clock_text(s) for s in (0, 41, 72, 369, 3723)] == ["0:00", "0:41", "1:12", "6:09", "1:02:03"]
    assert about(20) == "under a minute" and about(200) == "about 3 min" and about(7800) == "about 2 h 10 min"


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.mark.parametrize("max_per_book", [None, 1, 2, 7])
def test_snippet_count_agrees_with_the_snippets_cut(max_per_book):
    counts = [3000, 511, 512, 1030, 5000]
    books = [Book(f"b{i}", words(n), "test") for i, n in enumerate(counts)]
    cut, _ = book_snippets(books, 512, max_per_book)
    assert snippet_count(counts, 512, max_per_book) == len(cut)
    hand = {None: 5 + 0 + 1 + 2 + 9, 1: 1 + 0 + 1 + 1 + 1, 2: 2 + 0 + 1 + 2 + 2, 7: 5 + 0 + 1 + 2 + 7}
    assert snippet_count(counts, 512, max_per_book) == hand[max_per_book]


def test_audit_seconds_is_snippets_times_tokens_times_seconds_per_token():
    speed = ModelSpeed(seconds_per_token=0.004, tokens_per_word=1.3)
    # 512 words × 1.3 = 665.6 → 666 tokens; 60 × 666 × 0.004 s
    assert audit_seconds(60, 512, speed, context=2048) == pytest.approx(159.84)
    # truncated to a 512-token context: 60 × 512 × 0.004 s
    assert audit_seconds(60, 512, speed, context=512) == pytest.approx(122.88)


def test_measure_speed_divides_the_timed_pass_by_its_tokens(llama_lm):
    ticks = iter([10.0, 13.0])  # the timed pass "takes" 3 s
    speed = measure_speed(llama_lm, clock=lambda: next(ticks))
    text = timing_text(llama_lm)
    n = len(llama_lm.tokenizer(text)["input_ids"])  # every token of the text is scored (BOS before it)
    assert llama_lm.token_stats([text], cache=False)[0].n_scored == n
    assert speed.seconds_per_token == pytest.approx(3.0 / (2 * n))
    assert speed.tokens_per_word == pytest.approx(n / len(text.split()))


def test_elapsed_and_eta_move_with_the_clock_between_batches():
    # 32 snippets in 72 s (2.25 s each), 28 left → 63 s; 20 s after that batch: 1:32 elapsed, 43 s left
    line = progress_line(RunProgress("running", 32, 60, 0, T0, at(72)), now=at(92))
    assert line == "32 of 60 snippets · 1:32 elapsed · about 0:43 left"
    # a batch late beyond its pace: no "0:00 left" while 28 snippets remain, but what is happening
    late = progress_line(RunProgress("running", 32, 60, 0, T0, at(72)), now=at(200))
    assert late == "32 of 60 snippets · 3:20 elapsed · taking longer than its pace so far: still scoring"
    assert progress_line(RunProgress("running", 32, 60, 0, T0, at(72)), now=at(134)).endswith("about 0:01 left")
    # before the first batch the elapsed time runs too
    assert progress_line(RunProgress("running", 0, 60, 0, T0, None), now=at(42)) == \
        "0 of 60 snippets · first batch in progress · 0:42 elapsed"
    # finished: elapsed stops at the last batch
    assert progress_line(RunProgress("scored", 60, 60, 0, T0, at(210)), now=at(400)) == "60 of 60 snippets · 3:30 elapsed"


def test_first_batch_takes_about_the_target_time_at_the_measured_speed():
    speed = ModelSpeed(seconds_per_token=0.01, tokens_per_word=1.25)
    # 512 words → 640 tokens → 6.4 s a snippet: 20 s hold 3 snippets
    assert first_batch_size(speed, 512, 2048, 16) == 3 == int(FIRST_BATCH_S // 6.4)
    assert first_batch_size(speed, 512, 2048, 16, target_s=1.0) == 1  # a snippet slower than the target: still 1
    assert first_batch_size(speed, 32, 2048, 16) == 16  # 0.4 s a snippet: capped at the normal batch
    assert first_batch_size(speed, 512, 128, 16) == 15  # truncated to the context: 1.28 s a snippet
