"""A book table read a part of its rows at a time (`book_tables`, issue 45, item 10) groups the rows a table read
whole groups: books in order of first appearance, labels typed as pandas types the whole column, the bound applied
while reading."""
from __future__ import annotations

import json

import pytest

from mia_core.audit.sources import read_books
from mia_core.inputs import book_tables, table_parts
from mia_core.inputs.book_tables import read_book_table


@pytest.fixture
def tiny_parts(monkeypatch):
    """Parts of two rows, texts joined two at a time: every path through parts and blocks is taken."""
    monkeypatch.setattr(table_parts, "PART_ROWS", 2)
    monkeypatch.setattr(table_parts, "FIRST_CSV_ROWS", 1)
    monkeypatch.setattr(book_tables.TableBook, "JOIN_ROWS", 2)


def test_rows_group_into_books_across_parts(tmp_path, tiny_parts):
    path = tmp_path / "books.csv"
    path.write_text('book,text,label\nx,"one\ntwo",1\ny,y1,\nx,three,1.0\nz,,0\nx,four,1\ny,y2,\n')
    books = list(read_book_table(path, max_chars=100, max_bytes=10**6))
    assert [(b.name, b.text(), b.labels, b.rows) for b in books] == [
        ("x", "one\ntwo\n\nthree\n\nfour", [1.0], 3), ("y", "y1\n\ny2", [], 2), ("z", "", [0.0], 1)]


def test_labels_read_as_a_whole_column_reads_them(tmp_path, tiny_parts):
    path = tmp_path / "books.csv"
    path.write_text("book,text,label\na,t,1\na,u,0\nb,t,1\nb,u,\n")  # a gap makes the column float, as read whole
    _, problems = read_books(path)
    assert [p.message.split(": ", 1)[1] for p in problems] == ["book 'a' has rows with different labels [0.0, 1.0]"]


def test_odd_json_labels_are_problems_not_crashes(tmp_path, tiny_parts):
    """A list label, or labels of two kinds, raised TypeError (unhashable, unorderable) when the table was read whole."""
    path = tmp_path / "books.jsonl"
    rows = [("a", [1]), ("b", 1), ("b", "x"), ("c", 1)]
    path.write_text("".join(json.dumps({"book": b, "text": "t", "label": lab}) + "\n" for b, lab in rows))
    books, problems = read_books(path)
    assert [(b.name, b.label) for b in books] == [("c", 1)]
    assert [p.message.split(": ", 1)[1] for p in problems] == [
        "book 'a' has label [1]; labels must be 0 or 1", "book 'b' has rows with different labels ['x', 1]"]


def test_a_book_over_the_bound_keeps_its_length_not_its_text(tmp_path, tiny_parts):
    path = tmp_path / "books.jsonl"
    path.write_text("".join(json.dumps({"book": "long", "text": "x" * 40}) + "\n" for _ in range(10)))
    book = next(read_book_table(path, max_chars=100, max_bytes=10**6))
    assert (book.chars, book.texts, book.blocks, book.text()) == (10 * 40 + 9 * 2, 10, None, "")
