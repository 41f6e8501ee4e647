"""The GL bound per window (METHODS-API.md §18) from a greedy answer's top log-probs: hand-computed cases, tokens
spelt as text or as ids, and a token that is not readable as text stopping the comparison so the bound still holds."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from mia_core.blackbox.gl_bound import file_sha256, spells_ids, token_strings, tokenizer_file, window_bound
from mia_core.model.chat.answers import Choice, TokenLogprob

TOKENIZER = Path(__file__).resolve().parents[1] / "assets" / "book-model" / "tokenizer.json"


def answer(*tokens: tuple[str, float, dict]) -> Choice:
    return Choice("".join(t for t, _, _ in tokens), "length", tuple(TokenLogprob(t, v, top) for t, v, top in tokens))


def test_an_answer_that_recites_the_path_gives_its_log_probability():
    row = window_bound(answer(("a", -0.1, {"a": -0.1}), ("b", -0.2, {"b": -0.2})), ["a", "b"], 100, (0.5, 0.95))
    assert row["gl_exact_path"] and row["gl_log_p"] == pytest.approx(-0.3) and row["gl_discoverable"] == [True, True]


def test_a_diverging_answer_gives_an_upper_bound_by_hand():
    # j = 1; z_2 = "c" is listed at position 2 with −3.0: log p(z) ≤ −0.1 − 3.0
    row = window_bound(answer(("a", -0.1, {"a": -0.1}), ("b", -0.2, {"b": -0.2, "c": -3.0})), ["a", "c", "d"],
                       100, (0.5, 0.95))
    assert (row["gl_j"], row["gl_side"]) == (1, "in_top") and row["gl_log_p"] == pytest.approx(-3.1)
    u = math.exp(-3.1)
    assert row["gl_ruled_out"] == [1 - (1 - u) ** 100 < 0.5, 1 - (1 - u) ** 100 < 0.95]
    # z_2 unlisted among k = 2 alternatives: u ≤ min(exp(−2.0), 1 − 0.82 − exp(−2.0)) = the rest, 0.045
    row = window_bound(answer(("a", -0.1, {"a": -0.1}), ("b", math.log(0.82), {"b": math.log(0.82), "e": -2.0})),
                       ["a", "c"], 100, (0.5,))
    rest = 1 - 0.82 - math.exp(-2.0)
    assert row["gl_side"] == "rest" and row["gl_log_p"] == pytest.approx(-0.1 + math.log(rest))


def test_an_unreadable_token_stops_the_comparison_and_bounds_the_next_by_one():
    # "\ufffd" (a partial character) at position 2: it may be z_2, so nothing is claimed past position 1
    row = window_bound(answer(("a", -0.1, {"a": -0.1}), ("\ufffd", -0.2, {"\ufffd": -0.2, "x": -5.0})), ["a", "c"],
                       100, (0.5,))
    assert (row["gl_j"], row["gl_side"]) == (1, "unreadable") and row["gl_log_p"] == pytest.approx(-0.1)


def test_tokens_spelt_as_ids_compare_as_ids():
    sha = file_sha256(TOKENIZER)
    text_tokens = token_strings(str(TOKENIZER), sha, " Fair is foul")
    id_tokens = token_strings(str(TOKENIZER), sha, " Fair is foul", as_ids=True)
    assert "".join(text_tokens) == " Fair is foul" and all(t.startswith("token_id:") for t in id_tokens)
    assert len(text_tokens) == len(id_tokens)
    assert spells_ids(answer(("token_id:5", -0.1, {}))) and not spells_ids(answer(("a", -0.1, {})))


def test_a_tokenizer_is_checked_against_its_recorded_hash(tmp_path):
    with pytest.raises(ValueError, match="SHA-256 differs"):
        token_strings(str(TOKENIZER), "0" * 64, "x")
    with pytest.raises(ValueError, match="no tokenizer at"):
        tokenizer_file(tmp_path)
    assert tokenizer_file(TOKENIZER.parent) == TOKENIZER
