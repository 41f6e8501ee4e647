"""Books into snippets of W consecutive words (Min-K% paper §5: 512), cut in the original text.

Cutting at word boundaries of the original string keeps line breaks and punctuation, so a snippet
reads (and is scored) as it appears in the book. Only full snippets are made: a trailing part shorter
than W words is not scored, since scores depend on length and the threshold is calibrated on W-word
snippets; a book shorter than one snippet is reported as a problem, not audited.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .sources import Book, Problem

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Snippet:
    """One snippet: its id (`book#position`), book, 0-based position in the book, text and word count."""

    snippet_id: str
    book: str
    position: int
    text: str
    n_words: int


def word_chunks(text: str, words: int) -> list[tuple[int, int, int]]:
    """(char_start, char_end, n_words) of consecutive `words`-word chunks of `text`; the last may be shorter."""
    if words < 1:
        raise ValueError(f"chunk size must be at least 1 word (got {words})")
    spans = [m.span() for m in _WORD.finditer(text)]
    return [(spans[i][0], spans[min(i + words, len(spans)) - 1][1], min(words, len(spans) - i))
            for i in range(0, len(spans), words)]


def split_words(text: str, words: int = 512) -> list[str]:
    """Consecutive `words`-word pieces of `text`, cut in the original string; a shorter tail is dropped."""
    return [text[a:b] for a, b, n in word_chunks(text, words) if n == words]


def spread_positions(n: int, limit: int | None) -> list[int]:
    """All of range(n), or `limit` positions evenly spread over it (first and last included)."""
    if limit is None or n <= limit:
        return list(range(n))
    if limit < 1:
        raise ValueError(f"at most {limit} snippets per book: need at least 1")
    return sorted({round(i * (n - 1) / max(limit - 1, 1)) for i in range(limit)})


def book_snippets(books: list[Book], words: int = 512, max_per_book: int | None = None) -> tuple[list[Snippet], list[Problem]]:
    """Snippets of every book, in book order; books shorter than one snippet become problems.

    `max_per_book` samples that many snippets evenly along each longer book (for large catalogues:
    cost scales with snippets; the positions are kept, so a book's snippets stay in order).
    """
    snippets, problems = [], []
    for book in books:
        pieces = split_words(book.text, words)
        if not pieces:
            n = len(_WORD.findall(book.text))
            problems.append(Problem(book.name, f"{book.name}: {n} words, fewer than one {words}-word snippet; "
                                               f"not audited (a smaller snippet size would include it)"))
            continue
        snippets += [Snippet(f"{book.name}#{i:05d}", book.name, i, pieces[i], words)
                     for i in spread_positions(len(pieces), max_per_book)]
    return snippets, problems
