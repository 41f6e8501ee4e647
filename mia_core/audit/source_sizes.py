"""Words per book of a source, estimated from sizes, so an audit's cost is shown without reading its books.

The Book audit page shows the cost of a run before it starts, on every rerun. Reading the books for it took a 4.8 MB
zip of 40 books of 50 MB each to 4.2 GB of memory and ~29 CPU-seconds per rerun. Plain text needs no reading: its
size says its words, at `BYTES_PER_WORD`. A table (many books in rows) counts as one lump of its size; a PDF or an
EPUB has no size that tells its text, so its text is read (bounded like any book, and once: callers cache by the
files' path, size and modification time). Files, folders, zips and lists of uploads are walked as `audit.sources`
reads them; what it would refuse is passed over here (the run names it).
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from ..inputs import limits
from ..inputs.documents import SUFFIXES as DOCUMENT_SUFFIXES
from ..inputs.documents import DocumentError, document_text
from ..inputs.limits import MAX_BOOK_BYTES, ZIP_ERRORS, TooLarge
from ..inputs.tables import TABLE_SUFFIXES
from .sources import Source

#: UTF-8 bytes per word of English prose, spaces and punctuation included: 5.6 in the demo plays, 6.2 in the demo
#: Wikipedia paragraphs.
BYTES_PER_WORD = 5.9
#: Formats whose size is their text's (UTF-8 bytes).
PLAIN_SUFFIXES = (".txt", ".md", *TABLE_SUFFIXES)
_WORDS = re.compile(r"\S+")


def estimated_words(source: Source) -> list[int]:
    """Words per book of `source` (a file, folder, zip or list of them), from sizes where the size tells."""
    paths = source if isinstance(source, list) else [Path(source)]
    words: list[int] = []
    for path in paths:
        if path.is_dir():
            words += [_file_words(p) for p in sorted(path.rglob("*")) if p.is_file()
                      and p.suffix.lower() in DOCUMENT_SUFFIXES]
        elif path.suffix.lower() == ".zip":
            words += _zip_words(path)
        elif path.is_file():
            words.append(_file_words(path))
    return [n for n in words if n > 0]


def _size_words(size: int) -> int:
    return round(size / BYTES_PER_WORD)


def _file_words(path: Path) -> int:
    """A file's words: from its size, or counted in its text for a PDF or EPUB (0 when it cannot be read)."""
    size = path.stat().st_size
    if path.suffix.lower() in PLAIN_SUFFIXES:
        return _size_words(size)
    if size > MAX_BOOK_BYTES:
        return 0
    return _counted(path.name, path.read_bytes())


def _zip_words(path: Path) -> list[int]:
    """The words of each book inside a zip: from the sizes its directory declares, read only for PDF/EPUB entries."""
    try:
        archive = limits.open_zip(path)
    except (TooLarge, *ZIP_ERRORS):
        return []
    words = []
    with archive:
        for info in archive.infolist():
            suffix = PurePosixPath(info.filename).suffix.lower()
            if info.is_dir() or suffix not in DOCUMENT_SUFFIXES:
                continue
            if suffix in PLAIN_SUFFIXES:
                words.append(_size_words(min(info.file_size, MAX_BOOK_BYTES)))
                continue
            try:
                words.append(_counted(info.filename, limits.read_capped(archive, info, MAX_BOOK_BYTES)))
            except (TooLarge, *ZIP_ERRORS):
                continue
    return words


def _counted(name: str, data: bytes) -> int:
    """Words of a PDF's or EPUB's text, counted without splitting it into a list (0 when it cannot be read)."""
    try:
        text = document_text(name, data, max_bytes=MAX_BOOK_BYTES)
    except DocumentError:
        return 0
    return sum(1 for _ in _WORDS.finditer(text))

