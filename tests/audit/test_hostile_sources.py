"""An audit goes on past hostile books (each a named problem), and no uploaded file is dropped silently."""
from __future__ import annotations

import re
import zipfile

import pandas as pd
import pytest

from mia_core.audit import sources
from mia_core.audit.sources import read_books, write_uploads
from mia_core.inputs.tables import InputError

from tests.inputs.test_hostile_files import DEEP, aes_pdf, bomb_epub, small_epub, text_pdf, zipped
from tests.support.books import words

HOSTILE_BYTES = 120_000_000  # over the per-book bound, cheaper to build than the 300 MB


@pytest.fixture(scope="module")
def hostile() -> dict[str, bytes]:
    """One hostile file of each kind, and the reason each must be given."""
    return {"bomb.epub": bomb_epub(HOSTILE_BYTES), "secret.pdf": aes_pdf(),
            "huge.pdf": text_pdf("x").replace(b"xref\n0 5\n", b"xref\n0 99999999\n"),
            "noise.pdf": b"%PDF-1.7\n" + bytes(range(256)) * 20}


REASONS = {"bomb": "unpacks to", "secret": "encrypted PDF not supported", "huge": "not a readable PDF",
           "noise": "not a readable PDF"}


def check(books, problems, good: set[str]) -> None:
    assert {b.name for b in books} == good
    assert {p.book for p in problems} == set(REASONS)
    for p in problems:
        assert REASONS[p.book] in p.message and p.message.startswith(f"{p.book}."), p
        assert not re.search(r"\b\w+(Error|Exception)\b", p.message), p  # what is wrong, not a parser's class name


def test_a_folder_of_hostile_and_good_books_goes_on(tmp_path, hostile):
    for name, data in {**hostile, "good.txt": words(30).encode(), "fine.epub": small_epub(words(20, "e")),
                       "ok.pdf": text_pdf("readable")}.items():
        (tmp_path / name).write_bytes(data)
    books, problems = read_books(tmp_path)
    check(books, problems, {"good", "fine", "ok"})
    assert {b.name: b.text for b in books}["ok"] == "readable"


def test_a_zip_of_hostile_and_good_books_goes_on(tmp_path, hostile):
    path = tmp_path / "books.zip"
    path.write_bytes(zipped({**hostile, "good.txt": words(30).encode()}))
    books, problems = read_books(path)
    check(books, problems, {"good"})
    assert books[0].text == words(30)


def test_mixed_uploads_expand_zips_and_tables_and_name_what_cannot_be_read(tmp_path):
    table = pd.DataFrame({"book": ["d", "e", "d"], "text": ["d one", "e one", "d two"]}).to_csv(index=False)
    uploads = {"a.txt": words(10, "a").encode(),
               "more.zip": zipped({"b.txt": words(10, "b").encode(), "c.epub": small_epub("c text"),
                                   "inner.zip": zipped({"x.txt": b"x"})}),
               "rows.csv": table.encode(), "bad.jsonl": DEEP.encode(), "broken.zip": b"PK\x03\x04 not a zip"}
    source = write_uploads(uploads, tmp_path / "uploads")
    books, problems = read_books(source)  # before: only a.txt, the rest dropped without a word
    assert {b.name: b.text for b in books} == {"a": words(10, "a"), "b": words(10, "b"), "c": "c text",
                                               "d": "d one\n\nd two", "e": "e one"}
    named = {p.book: p.message for p in problems}
    assert set(named) == {"inner", "bad.jsonl", "broken.zip"}, named
    assert "zip inside a zip" in named["inner"] and "nested too deeply" in named["bad.jsonl"]
    assert "not a readable zip" in named["broken.zip"]
    # documents only, or a lone zip or table: read as before
    assert write_uploads({"a.txt": b"one", "b.md": b"two"}, tmp_path / "docs") == tmp_path / "docs"
    assert write_uploads({"rows.csv": table.encode()}, tmp_path / "one") == tmp_path / "one" / "rows.csv"


def test_uploads_with_nothing_readable_are_one_clear_error(tmp_path):
    source = write_uploads({"bad.jsonl": DEEP.encode(), "empty.txt": b" "}, tmp_path / "uploads")
    with pytest.raises(InputError, match="no readable book"):
        read_books(source)


def test_zip_entries_that_are_not_books_are_named(tmp_path):
    """An image or a .docx in a zip of books was skipped without a word; now each is a problem row."""
    path = tmp_path / "books.zip"
    path.write_bytes(zipped({"good.txt": words(30).encode(), "cover.jpg": b"\xff\xd8\xff jpeg",
                             "notes/draft.docx": b"PK docx", "README": b"read me", ".DS_Store": b"\x00",
                             "__MACOSX/._good.txt": b"\x00"}))
    books, problems = read_books(path)
    assert [b.name for b in books] == ["good"]
    named = {p.book: p.message for p in problems}
    assert set(named) == {"cover", "draft", "README"}, named  # hidden and __MACOSX files are nobody's books
    assert named["cover"].startswith("cover.jpg: not a book (.jpg)") and "notes/draft.docx: not a book" in named["draft"]
    assert "without an extension" in named["README"]


def test_a_table_book_over_the_book_text_bound_is_a_problem(tmp_path, monkeypatch):
    """The 50 M-character bound of a book file held for .txt/.pdf/.epub books but not for books made of table rows."""
    monkeypatch.setattr(sources, "MAX_BOOK_TEXT_CHARS", 1_000)
    table = pd.DataFrame({"book": ["long", "long", "short"], "text": ["a " * 300, "b " * 300, "c " * 100]})
    for name in ("rows.csv", "rows.jsonl"):
        path = tmp_path / name
        table.to_csv(path, index=False) if name.endswith(".csv") else table.to_json(path, orient="records", lines=True)
        books, problems = read_books(path)
        assert [b.name for b in books] == ["short"]
        assert [p.book for p in problems] == ["long"] and "1,202 characters of text, over the 1,000" in problems[0].message


class Utf8WithoutFlag(zipfile.ZipInfo):
    """An entry whose name is stored as UTF-8 without the zip's UTF-8 flag, as many zip tools write them."""

    def _encodeFilenameFlags(self):
        return self.filename.encode("utf-8"), self.flag_bits


def test_zip_names_are_read_as_utf8_and_bidi_controls_in_names_are_shown_not_obeyed(tmp_path):
    """A name with U+202E arrived as `ΓÇ«evil` (CP437); once decoded, its override must not reverse tables,
    reports, CSV cells or file names: every book name shows such characters as escapes."""
    path = tmp_path / "books.zip"
    with zipfile.ZipFile(path, "w") as out:
        out.writestr(Utf8WithoutFlag("\u202eevil.txt"), words(30, "e"))
        out.writestr(Utf8WithoutFlag("Brontë – Villette.txt"), words(30, "v"))
        out.writestr(Utf8WithoutFlag("\u2066cover\u2069.jpg"), b"jpeg")
    with zipfile.ZipFile(path) as raw:
        assert "ΓÇ«evil.txt" in raw.namelist()  # what zipfile itself makes of it
    books, problems = read_books(path)
    assert sorted(b.name for b in books) == ["Brontë – Villette", "\\u202eevil"]
    assert {b.name: b.text for b in books}["\\u202eevil"] == words(30, "e")  # the entry read by its stored name
    assert [p.book for p in problems] == ["\\u2066cover\\u2069"]
    table = pd.DataFrame({"book": ["a\u202eb", "plain"], "text": [words(10, "a"), words(10, "p")]})
    table.to_csv(tmp_path / "rows.csv", index=False)
    assert [b.name for b in read_books(tmp_path / "rows.csv")[0]] == ["a\\u202eb", "plain"]
