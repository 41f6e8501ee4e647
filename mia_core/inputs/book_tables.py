"""A table of books (columns `book`, `text`, optional `label`) read into its books with the book bound applied while
it is read.

Rows are grouped by `book` in order of first appearance and their non-blank `text` cells joined by blank lines; a
.csv/.tsv/.jsonl file is read a part of its rows at a time (`table_parts`), a .json file whole (one JSON value). A
book's text is held until its joined length passes `max_chars` and then dropped, its length still counted: a
400 M-character book costs the bound, not itself. Every book is given once the last row is read (any row may add to
any book), its labels typed as pandas types the whole column (`table_parts.typed_whole`), missing ones left out.
What a book's name, labels and length make of it (a book, or a problem) is the caller's (`audit.sources`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Iterator

from .table_parts import STREAMED_SUFFIXES, Part, TableParts, typed_whole, value_key
from .tables import InputError, read_table

COLUMNS = ("book", "text", "label")


class TableBook:
    """One book of a table: its name, rows, label cells as read (`raw_labels`, by `value_key`; `labels`: distinct,
    typed and sorted, once the table is read), count and joined length of its non-blank texts, and those texts, kept in
    blocks of `JOIN_ROWS` rows (one string a block, not a row) until the joined length passes the bound."""

    JOIN_ROWS = 256

    def __init__(self, name: str, max_chars: int) -> None:
        self.name, self.max_chars = name, max_chars
        self.rows, self.texts, self.chars = 0, 0, 0
        self.raw_labels: dict[Hashable, Any] = {}
        self.labels: list[Any] = []
        self.blocks: list[str] | None = [] if name.strip() else None  # a book without a name is never audited
        self.pending: list[str] = []

    def add(self, text: Any, label: Any) -> None:
        """One more row: its label cell, and its text if that is a non-blank string."""
        self.rows += 1
        self.raw_labels.setdefault(value_key(label), label)
        if not (isinstance(text, str) and text.strip()):
            return
        self.chars += len(text) + (2 if self.texts else 0)
        self.texts += 1
        if self.blocks is None:
            return
        if self.chars > self.max_chars:  # over the bound: the book will be refused, its text is not kept
            self.blocks, self.pending = None, []
            return
        self.pending.append(text)
        if len(self.pending) >= self.JOIN_ROWS:
            self.blocks.append("\n\n".join(self.pending))
            self.pending = []

    def text(self) -> str:
        """The texts joined by blank lines ("" once the book passed the bound)."""
        if self.blocks is None:
            return ""
        return "\n\n".join(self.blocks + (["\n\n".join(self.pending)] if self.pending else []))


def read_book_table(path: Path, *, max_chars: int, max_bytes: int) -> Iterator[TableBook]:
    """The books of a table file in order of first appearance, each text held up to `max_chars` characters; an
    InputError naming the file when it cannot be read or lacks a `book` or `text` column (raised before any book)."""
    parts, columns, typed = _rows(path, max_bytes)
    books: dict[str, TableBook] = {}
    for part in parts:
        names, texts = part.get("book"), part.get("text")
        if names is None or texts is None:
            continue  # a column is missing: refused below, once the columns are known
        for name, text, label in zip(map(_name, names), texts, part.get("label") or [math.nan] * len(names)):
            book = books.get(name)
            if book is None:
                book = books[name] = TableBook(name, max_chars)
            book.add(text, label)
        del part, names, texts
    missing = [c for c in ("book", "text") if c not in columns()]
    if missing:
        raise InputError(f"{path}: needs columns 'book' and 'text' (missing {', '.join(missing)}; "
                         f"columns: {', '.join(map(str, columns()[:10]))})")
    has_labels = "label" in columns()
    label_of = typed([v for book in books.values() for v in book.raw_labels.values()]) if has_labels else {}
    for name in list(books):
        book = books.pop(name)
        book.labels = _distinct(label_of[k] for k in book.raw_labels if has_labels and not _missing(label_of[k]))
        yield book


def _rows(path: Path, max_bytes: int) -> tuple[Iterable[Part], Callable[[], list], Callable[[Iterable], dict]]:
    """(the parts of a table's rows, its columns once they are read, how its label cells type as the whole table's)."""
    if path.suffix.lower() in STREAMED_SUFFIXES:
        table = TableParts(path, COLUMNS, max_bytes=max_bytes)
        return table, lambda: table.columns, lambda values: typed_whole(table.suffix, values)
    df = read_table(path, str_columns=("book",), max_bytes=max_bytes)  # .json: typed whole already
    return [{c: df[c].tolist() for c in COLUMNS if c in df.columns}], lambda: list(df.columns), \
        lambda values: {value_key(v): v for v in values}


def _name(value: Any) -> str:
    """A `book` cell as a name: a string as it is, a number or boolean as written, a missing cell as ""."""
    if isinstance(value, str):
        return value
    return "" if _missing(value) else str(value)


def _distinct(values: Iterable[Any]) -> list[Any]:
    """The values once each, merged as a set merges them (1, 1.0 and True are one; a JSON list or object, which has
    no hash, by its repr), in order (values of different kinds by their repr)."""
    distinct: dict[Hashable, Any] = {}
    for value in values:
        distinct.setdefault(value if isinstance(value, Hashable) else repr(value), value)
    try:
        return sorted(distinct.values())
    except TypeError:
        return sorted(distinct.values(), key=repr)


def _missing(value: Any) -> bool:
    """A cell pandas reads as missing (NaN, None)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
