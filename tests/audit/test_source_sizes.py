"""Words per book estimated from sizes: plain text and zips are never read, PDF and EPUB are counted."""
from __future__ import annotations

import tracemalloc
import zipfile

from mia_core.audit.source_sizes import BYTES_PER_WORD, estimated_words
from mia_core.audit.sources import read_books
from mia_core.inputs import datasets

from tests.inputs.test_hostile_files import small_epub, text_pdf
from tests.support.books import words


def test_plain_text_is_estimated_from_its_size_and_pdf_epub_are_counted(tmp_path):
    (tmp_path / "a.txt").write_text(words(300, "a"))
    (tmp_path / "b.pdf").write_bytes(text_pdf("one two three four"))
    (tmp_path / "c.epub").write_bytes(small_epub("five six seven"))
    (tmp_path / "notes.jpg").write_bytes(b"\xff\xd8")
    size = (tmp_path / "a.txt").stat().st_size
    assert estimated_words(tmp_path) == [round(size / BYTES_PER_WORD), 4, 3]
    archive = tmp_path / "books.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("x/a.txt", words(300, "a"))
        out.writestr("b.pdf", text_pdf("one two three four"))
        out.writestr("cover.png", b"png")
    assert estimated_words(archive) == [round(size / BYTES_PER_WORD), 4]
    assert estimated_words([archive, tmp_path / "a.txt"]) == [round(size / BYTES_PER_WORD), 4, round(size / BYTES_PER_WORD)]


def test_the_estimate_is_within_a_tenth_of_the_count_on_the_demo_plays(tmp_path):
    plays = datasets.load("demo-books")
    for row in plays.itertuples():
        (tmp_path / f"{row.id}.txt").write_text(row.text, encoding="utf-8")
    counted = sum(len(book.text.split()) for book in read_books(tmp_path)[0])
    assert abs(sum(estimated_words(tmp_path)) / counted - 1) < 0.1


def test_a_zip_of_large_books_is_estimated_without_inflating_them(tmp_path):
    """The issue's upload: a few MB of zip declaring hundreds of MB of text (here 4 × 49.9 MB): nothing inflated."""
    archive = tmp_path / "big.zip"
    body = (words(2_000, "w") + "\n").encode()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for i in range(4):
            with out.open(f"book{i}.txt", "w") as entry:
                for _ in range(49_900_000 // len(body)):
                    entry.write(body)
    assert archive.stat().st_size < 5_000_000
    declared = [info.file_size for info in zipfile.ZipFile(archive).infolist()]
    tracemalloc.start()
    got = estimated_words(archive)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert got == [round(size / BYTES_PER_WORD) for size in declared]
    assert peak < 2_000_000, f"{peak:,} bytes allocated"
