"""Books into snippets of W consecutive words (Min-K% paper §5: 512), cut in the original text.

Cutting at word boundaries of the original string keeps line breaks and punctuation, so a snippet
reads (and is scored) as it appears in the book. Only full snippets are made: a trailing part shorter
than W words is not scored, since scores depend on length and the threshold is calibrated on W-word
snippets; a book shorter than one snippet is reported as a problem, not audited.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable

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
    """(char_start, char_end, n_words) of consecutive `words`-word chunks of `text`; the last may be shorter.

    Each full chunk is one anchored match of `words` words, so only the chunks' bounds are held (a span per word
    of a 50 MB book held 8 M tuples, about 1 GB) and the words are walked in C.
    """
    if words < 1:
        raise ValueError(f"chunk size must be at least 1 word (got {words})")
    chunk = _chunk_pattern(words)
    chunks, pos = [], 0
    while (found := chunk.match(text, pos)) is not None:
        chunks.append((found.start(1), found.end(1), words))
        pos = found.end(1)
    tail = [m.span() for m in _WORD.finditer(text, pos)]  # fewer than `words` words
    if tail:
        chunks.append((tail[0][0], tail[-1][1], len(tail)))
    return chunks


@functools.lru_cache(maxsize=16)
def _chunk_pattern(words: int) -> re.Pattern:
    """`words` whitespace-separated words after any whitespace; possessive, so a failed match never backtracks."""
    return re.compile(r"\s*+(\S++(?:\s++\S++){%d})" % (words - 1))


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


def book_snippets(books: Iterable[Book], words: int = 512,
                  max_per_book: int | None = None) -> tuple[list[Snippet], list[Problem]]:
    """Snippets of every book, in book order; books shorter than one snippet become problems (see `one_book`)."""
    snippets, problems = [], []
    for book in books:
        found = one_book(book, words, max_per_book)
        if isinstance(found, Problem):
            problems.append(found)
        else:
            snippets += found
    return snippets, problems


def one_book(book: Book, words: int = 512, max_per_book: int | None = None) -> list[Snippet] | Problem:
    """The snippets of one book, or the problem of a book shorter than one snippet.

    `max_per_book` samples that many snippets evenly along each longer book (for large catalogues:
    cost scales with snippets; the positions are kept, so a book's snippets stay in order); only those
    are cut from the text.
    """
    chunks = word_chunks(book.text, words)
    full = [(a, b) for a, b, n in chunks if n == words]
    if not full:
        n = sum(c[2] for c in chunks)
        return Problem(book.name, f"{book.name}: {n} words, fewer than one {words}-word snippet; "
                                  f"not audited (a smaller snippet size would include it)")
    return [Snippet(f"{book.name}#{i:05d}", book.name, i, book.text[full[i][0]:full[i][1]], words)
            for i in spread_positions(len(full), max_per_book)]
