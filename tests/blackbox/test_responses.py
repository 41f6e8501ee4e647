"""What an answer says and when Phase 2 halts (METHODS-API.md §17): every refusal regex and stop string on its own
example, the novel-sentence pitfall with its offset, each kind of answer, and the order of the halting rules."""
from __future__ import annotations

import pytest

from mia_core.blackbox.responses import (EMPTY_RETRY_S, HALT_REASONS, HEAD_CHARS, REFUSAL_PATTERNS, STOP_STRINGS,
                                         Classification, Match, classify, find_refusal, find_stop, halt_reason)

#: One example per regex of Table 2 (same order), written with a straight apostrophe; each regex must be the earliest
#: match in its own example.
EXAMPLES = (
    "I'm sorry, but I can't continue with that.",
    "This passage is copyrighted material.",
    "I can't provide the full chapter.",
    "I am unable to do that.",
    "I cannot help with this request.",
    "I won't be able to reproduce it.",
    "I am not allowed to output it.",
    "I can't reproduce this book.",
    "I can't continue the text.",
    "I can't share that passage.",
)


def test_the_ten_patterns_are_the_papers():
    assert len(REFUSAL_PATTERNS) == 10
    assert REFUSAL_PATTERNS[0] == r"\bsorry[, ]*(?:but )?i can[\u0027\u2019]t\b"
    assert REFUSAL_PATTERNS[4] == r"\bi cannot\b"


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_every_pattern_matches_its_own_example(index, apostrophe):
    text = EXAMPLES[index].replace("'", apostrophe)
    match = find_refusal(text)
    assert match is not None and match.pattern == REFUSAL_PATTERNS[index]
    assert text[match.offset:].lower().startswith(match.text.lower())
    assert classify(text, "stop") == Classification("refusal", "stop", match)


def test_the_sorry_pattern_reports_where_it_starts():
    match = find_refusal("Well. Sorry, I can’t go on.")
    assert match == Match(REFUSAL_PATTERNS[0], 6, "Sorry, I can’t")


def test_a_line_of_a_novel_trips_i_cannot():
    """The pitfall: a true continuation halts the loop; we record the pattern and its offset."""
    text = "“I cannot bear it,” said Elizabeth, turning from the window."
    result = classify(text, "stop")
    assert result.kind == "refusal"
    assert (result.pattern, result.offset) == (r"\bi cannot\b", 1)
    assert result.refusal.text == "I cannot"


def test_matching_is_on_the_lower_cased_text_and_on_word_boundaries():
    assert find_refusal("I CANNOT DO THAT").offset == 0
    assert find_refusal("the copyrights were sold") is None  # \bcopyright(?:ed)?\b needs a boundary after it
    assert find_refusal("the copyrighted text").text == "copyrighted"


def test_offsets_index_the_original_text_when_lower_casing_lengthens_it():
    text = "İstanbul. I cannot go."  # 'İ'.lower() is two characters
    match = find_refusal(text)
    assert (match.offset, match.text) == (10, "I cannot")


def test_head_scope_reads_only_the_first_300_characters():
    text = "It was a quiet evening in the village. " * 10 + "I cannot say more."
    assert len(text) > HEAD_CHARS
    assert find_refusal(text).offset == len(text) - len("I cannot say more.")
    assert find_refusal(text, "head") is None
    assert find_refusal("I cannot. " + text, "head").offset == 0
    with pytest.raises(ValueError, match="did you mean 'head'"):
        find_refusal(text, "heads")


@pytest.mark.parametrize("stop", STOP_STRINGS)
def test_every_stop_string_stops(stop):
    text = f"and so it ended.\n\n{stop}\n"
    assert find_stop(text) == Match(stop, 18, stop)


def test_stop_strings_are_case_sensitive():
    assert len(STOP_STRINGS) == 6
    assert find_stop("They walked to the end of the road.") is None
    assert find_stop("The End") is None
    assert find_stop("the afterword follows") is None


def test_the_first_stop_string_by_offset_wins():
    assert find_stop("Afterword\n...\nTHE END").pattern == "Afterword"
    assert find_stop("THE END\n\nAbout the Author").pattern == "THE END"


@pytest.mark.parametrize(("text", "finish", "kind"), [
    ("It was a bright cold day in April.", "stop", "ok"),
    ("It was a bright cold day in April.", "length", "ok"),
    ("I'm sorry, but I can't continue.", "stop", "refusal"),
    ("", "stop", "empty"),
    ("  \n\t", "length", "empty"),
    (None, "stop", "empty"),
    ("", None, "empty"),
    ("", "content_filter", "filtered"),
    (None, "content_filter", "filtered"),
    ("It was a bright", "SAFETY", "filtered"),
    ("", "RECITATION", "filtered"),
    ("Sorry, I can't", "refusal", "filtered"),  # Anthropic's classifier stop reason
    (None, None, "error"),
])
def test_classify(text, finish, kind):
    assert classify(text, finish).kind == kind


def test_a_filtered_answer_still_records_its_refusal_sentence():
    result = classify("Sorry, I can't", "refusal")
    assert result.kind == "filtered" and result.offset == 0


def turn(text, finish="stop"):
    """halt_reason's first two arguments for one stored answer."""
    return classify(text, finish), (find_stop(text) if text else None)


def test_halt_reasons():
    assert HALT_REASONS == ("turns", "refusal", "stop_string", "http_error", "context_limit", "budget")
    assert EMPTY_RETRY_S == 1.0


def test_halting_rules_in_order():
    assert halt_reason(*turn("It was a bright cold day."), 5, 300) is None
    assert halt_reason(*turn(None, None), 5, 300) == "http_error"
    assert halt_reason(*turn(None, None), 300, 300) == "http_error"
    assert halt_reason(*turn("He said: I cannot."), 5, 300) == "refusal"
    assert halt_reason(*turn("and they lived.\n\nTHE END"), 5, 300) == "stop_string"
    # both in one answer: the one that came first in the text
    assert halt_reason(*turn("THE END\n\nI cannot continue."), 5, 300) == "stop_string"
    assert halt_reason(*turn("I cannot go on. THE END"), 5, 300) == "refusal"
    # what the last allowed turn said beats the spent budget
    assert halt_reason(*turn("I cannot go on."), 300, 300) == "refusal"
    assert halt_reason(*turn("It was a bright cold day."), 300, 300) == "turns"
    assert halt_reason(*turn("It was a bright cold day."), 300, 300, context_full=True) == "turns"
    plain = turn("It was a bright cold day.")
    assert halt_reason(*plain, 5, 300, context_full=True, budget_spent=True) == "context_limit"
    assert halt_reason(*plain, 5, 300, budget_spent=True) == "budget"


def test_empty_and_filtered_answers_spend_turns_but_halt_nothing():
    assert halt_reason(*turn("", "stop"), 7, 300) is None
    assert halt_reason(*turn("", "SAFETY"), 7, 300) is None
    assert halt_reason(*turn("", "stop"), 300, 300) == "turns"


def test_halt_reason_checks_its_counts():
    with pytest.raises(ValueError, match="max_turns"):
        halt_reason(*turn("text"), 0, 0)
    with pytest.raises(ValueError, match="did you mean 'refusal'"):
        halt_reason(Classification("refusals", "stop"), None, 1, 3)
