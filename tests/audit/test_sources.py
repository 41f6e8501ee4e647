"""Books in: every supported source, bad books reported by name while the others go on.
Cutting books into snippets: tests/audit/test_snippets.py."""
from __future__ import annotations

import io
import zipfile

import pandas as pd
import pytest

from mia_core.audit.sources import read_books, read_calibration, write_uploads
from mia_core.inputs.tables import InputError

from tests.support.books import words


def epub_bytes(text: str) -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("T")
    chapter = epub.EpubHtml(title="c1", file_name="c1.xhtml")
    chapter.content = f"<html><body><p>{text}</p></body></html>"
    book.add_item(chapter)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    buffer = io.BytesIO()
    epub.write_epub(buffer, book)
    return buffer.getvalue()


def test_folder_with_bad_books_reports_them_and_reads_the_rest(tmp_path):
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "good.txt").write_text(words(40))
    (folder / "empty.txt").write_text("")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (folder / "broken.epub").write_bytes(b"PK\x03\x04 not an epub")
    (folder / "book.epub").write_bytes(epub_bytes(words(30, "e")))
    (folder / "notes.csv").write_text("ignored")  # not a book type inside a folder
    books, problems = read_books(folder)
    assert sorted(b.name for b in books) == ["book", "good"]
    assert next(b for b in books if b.name == "book").text.split()[:2] == ["e0", "e1"]
    assert sorted(p.book for p in problems) == ["broken", "broken", "empty"]
    messages = sorted(p.message for p in problems)
    assert "broken.epub: not a readable EPUB" in messages[0] and "broken.pdf: not a readable PDF" in messages[1]
    assert "empty.txt: the file is empty" in messages[2]


def test_zip_table_and_calibration_labels(tmp_path):
    archive = tmp_path / "cal.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("members/a.txt", words(20, "a"))
        z.writestr("non_members/b.md", words(20, "b"))
        z.writestr("non_members/c.txt", words(20, "c"))
    books, problems = read_calibration(archive)
    assert {(b.name, b.label) for b in books} == {("a", 1), ("b", 0), ("c", 0)} and not problems

    table = tmp_path / "books.csv"
    pd.DataFrame({"book": ["x", "y", "x"], "text": ["part one", "other", "part two"], "label": [1, 0, 1]}).to_csv(table, index=False)
    books, _ = read_calibration(table)
    assert {b.name: (b.text, b.label) for b in books} == {"x": ("part one\n\npart two", 1), "y": ("other", 0)}

    jsonl = tmp_path / "books.jsonl"
    jsonl.write_text('{"book": "x", "text": "t"}\n{"book": "x", "text": "u"}\n')
    books, _ = read_books(jsonl)
    assert [(b.name, b.text, b.label) for b in books] == [("x", "t\n\nu", None)]


def test_calibration_with_one_class_or_no_labels_is_a_clear_error(tmp_path):
    table = tmp_path / "one.csv"
    pd.DataFrame({"book": ["x", "y"], "text": ["a", "b"], "label": [1, 1]}).to_csv(table, index=False)
    with pytest.raises(InputError, match="only members"):
        read_calibration(table)
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("text")
    with pytest.raises(InputError, match="need labels"):
        read_calibration(folder)
    with pytest.raises(InputError, match="book' and 'text"):
        bad = tmp_path / "bad.csv"
        bad.write_text("title,body\na,b\n")
        read_books(bad)
    with pytest.raises(InputError, match="no such file"):
        read_books(tmp_path / "missing")


def test_demo_books_roles():
    audit, _ = read_books("demo-books")
    calibration, _ = read_calibration("demo-books")
    assert len(audit) == 8 and len(calibration) == 4
    assert {b.label for b in calibration} == {0, 1} and not {b.name for b in audit} & {b.name for b in calibration}


def test_duplicate_names_are_made_unique(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "same.txt").write_text(words(5))
    books, _ = read_books(tmp_path)
    assert [b.name for b in books] == ["same", "same (2)"]


def test_a_book_or_text_called_na_is_kept(tmp_path):
    table = tmp_path / "books.csv"
    table.write_text("book,text\nNA,first\nNA,NA\nb,other\n,orphan\n")
    books, problems = read_books(table)
    assert {b.name: b.text for b in books} == {"NA": "first\n\nNA", "b": "other"}
    assert [p.book for p in problems] == ["(no name)"] and "empty 'book' cell" in problems[0].message


@pytest.mark.parametrize("content", ['"just a string"', "42", "[1, 2]"])
def test_a_json_file_that_is_not_a_table_is_an_input_error_naming_it(tmp_path, content):
    path = tmp_path / "books.json"
    path.write_text(content)
    with pytest.raises(InputError, match="books.json"):
        read_books(path)


def test_uploads_replace_what_was_saved_before(tmp_path):
    folder = tmp_path / "uploads"
    assert write_uploads({"a.txt": b"one", "b.txt": b"two"}, folder) == folder
    assert write_uploads({"b.txt": b"again"}, folder) == folder
    assert [(p.name, p.read_bytes()) for p in folder.iterdir()] == [("b.txt", b"again")]
    assert write_uploads({"sub/books.zip": b"PK"}, folder) == folder / "books.zip"  # a lone zip or table is read itself
    assert [p.name for p in folder.iterdir()] == ["books.zip"]
