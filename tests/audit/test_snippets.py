"""Snippets: words split with the original text kept, snippet ids, short books, snippets spread along long books."""
from __future__ import annotations

import pytest

from mia_core.audit.snippets import book_snippets, split_words
from mia_core.audit.sources import Book

from tests.support.books import words


def test_split_words_keeps_the_original_text_and_drops_the_short_tail():
    text = "One two,\nthree  four five six seven"
    assert split_words(text, 3) == ["One two,\nthree", "four five six"]
    assert split_words("a b", 3) == []
    with pytest.raises(ValueError, match="at least 1"):
        split_words(text, 0)


def test_book_snippets_ids_and_short_books():
    snippets, problems = book_snippets([Book("long", words(25), "x"), Book("short", words(7), "y")], words=10)
    assert [s.snippet_id for s in snippets] == ["long#00000", "long#00001"]
    assert snippets[1].text == " ".join(f"w{i}" for i in range(10, 20))
    assert len(problems) == 1 and problems[0].book == "short" and "7 words, fewer than one 10-word snippet" in problems[0].message


def test_snippets_can_be_spread_along_long_books():
    snippets, _ = book_snippets([Book("long", words(100), "x")], words=10, max_per_book=4)
    assert [s.position for s in snippets] == [0, 3, 6, 9]
    assert snippets[1].text.split()[0] == "w30"
    assert len(book_snippets([Book("b", words(30), "x")], words=10, max_per_book=5)[0]) == 3
