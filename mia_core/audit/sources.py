"""Books in: files (.txt/.md/.pdf/.epub), folders and zips of them, tables with `book`/`text` columns, demo sets,
and several uploaded files of those kinds at once.

A source is opened (`open_books`: the path, a folder's or zip's listing and declared sizes checked) and then
read one book at a time each time it is iterated, so an audit holds one book's text, never the whole source's
(a 2 GB source of books is the bound). A book that cannot be read becomes a `Problem` (named, with the reason)
and the others go on; only a source with no usable book at all is an error, raised when its reading ends.
Calibration sets also carry a member label per book. Sizes are bounded by `inputs.limits` (zips by their
declared sizes before anything is inflated). A table is read a part of its rows at a time and its books are given once
all its rows are read (a later row may add to any book), so its books' texts are held together, each only up to the
book bound (`inputs.book_tables`).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Hashable, Iterable, Iterator

from ..inputs import datasets
from ..inputs.documents import SUFFIXES as DOCUMENT_SUFFIXES
from ..inputs.documents import DocumentError, document_text
from ..inputs.limits import MAX_BOOK_BYTES, MAX_BOOK_TEXT_CHARS, MAX_SOURCE_BYTES, ZIP_ERRORS
from ..inputs.book_tables import read_book_table
from ..inputs.tables import TABLE_SUFFIXES, InputError
from ..names import shown_name
from .source_files import Item, file_reader, folder_items, zip_items

DEMO_SETS = ("demo-books",)


@dataclass(frozen=True)
class Book:
    """One book: a unique name in its set, its text, where it came from, and its label (calibration only)."""

    name: str
    text: str
    source: str
    label: int | None = None


@dataclass(frozen=True)
class Problem:
    """A book that was not audited, and why (shown in reports, never silently dropped)."""

    book: str
    message: str


#: A file, folder, table, zip or demo set name, or several uploaded files (see `write_uploads`).
Source = str | Path | list[Path]
#: What reading a source gives, in order: its books and the problems of the books that could not be read.
Reading = Iterator["Book | Problem"]


class BookStream:
    """The books and problems of one opened source, read one book at a time each time it is iterated.

    What only reading can find is raised as an `InputError` when the iteration ends, as `read_books` and
    `read_calibration` raise it: no readable book to audit, calibration books without labels or of one class.
    """

    def __init__(self, source: Source, role: str, read: Callable[[], Reading]) -> None:
        self.source, self.role, self._read = source, role, read

    def __iter__(self) -> Reading:
        found, labels, unlabelled, first_problem = 0, set(), [], None
        for item in _unique(self._read()):
            if isinstance(item, Problem):
                first_problem = first_problem or item
            else:
                found += 1
                labels.add(item.label)
                if item.label is None and len(unlabelled) < 3:
                    unlabelled.append(item.name)
            yield item
            del item  # not held while the next book is read
        if self.role == "audit" and not found:
            why = f" ({first_problem.message})" if first_problem else ""
            raise InputError(f"{_shown(self.source)}: no readable book{why}")
        if self.role == "calibration":
            _check_labels(self.source, labels - {None}, unlabelled)


@dataclass(frozen=True)
class AuditInputs:
    """What an audit reads: the books to audit, the calibration books (each a list, or a `BookStream` read when
    the run is planned), and (book, role, message) rows of problems found before (a stream yields its own)."""

    books: Iterable[Book | Problem]
    calibration: Iterable[Book | Problem]
    problems: list[tuple[str, str, str]]


def read_audit_inputs(books: Source, calibration: Source) -> AuditInputs:
    """Both sets of books, opened (bad paths refused now) and read one book at a time when the run is planned
    (the one reader of the page, CLI and jobs)."""
    calibration_books = open_books(calibration, role="calibration")  # checked first, as it is read first
    return AuditInputs(open_books(books, role="audit"), calibration_books, [])


def problem_rows(problems: list[Problem | tuple], role: str) -> list[tuple[str, str, str]]:
    """(book, role, message) rows as the results store keeps them; rows already in that form pass through."""
    return [(p.book, role, p.message) if isinstance(p, Problem) else tuple(p) for p in problems]


def read_books(source: Source) -> tuple[list[Book], list[Problem]]:
    """Books to audit from a file, folder, zip, table, several uploads, or the audit half of a demo set."""
    return _partition(open_books(source, role="audit"))


def read_calibration(source: Source) -> tuple[list[Book], list[Problem]]:
    """Known member (label 1) and known non-member (label 0) books; both classes are required.

    A table needs a `label` column (one label per book); a folder or zip needs `members/` and
    `non_members/` sub-folders; `demo-books` gives its calibration plays.
    """
    return _partition(open_books(source, role="calibration"))


def _partition(items: Iterable[Book | Problem]) -> tuple[list[Book], list[Problem]]:
    """(books, problems) of a reading, each in order."""
    books, problems = [], []
    for item in items:
        (problems if isinstance(item, Problem) else books).append(item)
    return books, problems


def _check_labels(source: Source, classes: set, unlabelled: list[str]) -> None:
    """Refuse a calibration set with unlabelled books, or without both known members and known non-members."""
    if unlabelled:
        raise InputError(f"{_shown(source)}: calibration books need labels (1 = member, 0 = non-member); none for "
                         f"{', '.join(unlabelled)}. Use a table with a 'label' column or members/ and non_members/ folders")
    if classes != {0, 1}:
        have = "no book" if not classes else f"only {'members' if classes == {1} else 'non-members'}"
        raise InputError(f"{_shown(source)}: the calibration set has {have}; it needs known member and known non-member books")


def _shown(source: Source) -> str:
    """A source as named in messages: several uploads by their file names."""
    return f"the uploads ({', '.join(p.name for p in source)})" if isinstance(source, list) else str(source)


def is_demo_set(source: Source) -> bool:
    """Whether `source` names a built-in set (a file or folder of that name here wins)."""
    return not isinstance(source, list) and str(source) in DEMO_SETS and not Path(source).exists()


def source_name(source: str | Path) -> str:
    """How a command line names `source` again: a built-in set by its name, a path made absolute (so the repeat
    command works from any folder)."""
    if is_demo_set(source):
        return str(source)
    return str(Path(source).resolve())


def open_books(source: Source, *, role: str) -> BookStream:
    """`source` opened for reading (a missing path, an empty folder, a bad or oversized zip refused now)."""
    return BookStream(source, role, _opened(source, role))


def _opened(source: Source, role: str) -> Callable[[], Reading]:
    """What reads `source` when called, after the checks that need no book read."""
    if isinstance(source, list):
        return lambda: _read_several(source, role)
    if is_demo_set(source):
        return lambda: iter(_demo_books(str(source), role))
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder (or built-in set: {', '.join(DEMO_SETS)})")
    return _open_path(path)


def _read_several(paths: list[Path], role: str) -> Reading:
    """Each file as its own source; one that cannot be opened or read at all (a bad zip or table) is a problem named
    by its file. The text of all of them together is bounded by MAX_SOURCE_BYTES."""
    total = 0
    for path in paths:
        try:
            reading = _unique(_opened(path, role)())  # each file's names unique, then all of them (`BookStream`)
            first = next(reading, None)  # a table or zip that cannot be read at all fails on its first item
        except InputError as err:
            yield Problem(path.name, str(err).replace(str(path), path.name))
            continue
        if first is None:
            continue
        total = _add_text(total, first, paths)
        yield first
        del first
        for item in reading:
            total = _add_text(total, item, paths)
            yield item
            del item


def _add_text(total: int, item: Book | Problem, source: Source) -> int:
    """`total` plus the text of `item`, refused over MAX_SOURCE_BYTES (characters read, whatever the files claimed)."""
    total += len(item.text) if isinstance(item, Book) else 0
    if total > MAX_SOURCE_BYTES:
        raise InputError(f"{_shown(source)}: more than {MAX_SOURCE_BYTES / 1e9:.0f} GB of text in all, the limit for "
                         "one source")
    return total


def _open_path(path: Path) -> Callable[[], Reading]:
    """The reading of one file, folder, zip or table (a folder or zip listed and checked now)."""
    if path.suffix.lower() in TABLE_SUFFIXES and not path.is_dir():
        return lambda: _table_books(path)
    if path.is_dir():
        items = folder_items(path)
    elif path.suffix.lower() == ".zip":
        items = zip_items(path)
    else:
        items = [(path.name, None, file_reader(path, path.name))]
    single_file = path.is_file() and path.suffix.lower() != ".zip"
    return lambda: _read_items(path, items, single_file)


def _read_items(path: Path, items: list[Item], single_file: bool) -> Reading:
    """Each item's book, read when reached, or the problem of reading it."""
    total = 0
    for name, label, read in items:
        stem = PurePosixPath(name).stem
        try:
            text = document_text(name, read(), max_bytes=MAX_BOOK_BYTES)
        except (DocumentError, OSError) as err:
            yield Problem(stem, str(err))
            continue
        except ZIP_ERRORS:
            yield Problem(stem, f"{name}: not readable from the zip (damaged or in a compression this reader lacks); "
                                "unzip it and add the file")
            continue
        book = Book(stem, text, str(path) if single_file else f"{path}/{name}", label)
        total = _add_text(total, book, path)
        del text
        yield book
        del book  # not held while the next book is read


def _table_books(path: Path) -> Reading:
    """Rows grouped by `book` in file order, their `text` joined by blank lines; `label` if present (each book's
    problems in the books' order once the table is read; each book's text held up to the bound: `book_tables`)."""
    for book in read_book_table(path, max_chars=MAX_BOOK_TEXT_CHARS, max_bytes=MAX_SOURCE_BYTES):
        name, labels = book.name, book.labels
        if not name.strip():
            yield Problem("(no name)", f"{path}: {book.rows} row(s) with an empty 'book' cell; name every book")
        elif len(labels) > 1:
            yield Problem(name, f"{path}: book {name!r} has rows with different labels {labels}")
        elif labels and not (isinstance(labels[0], Hashable) and labels[0] in {0, 1, "0", "1"}):
            yield Problem(name, f"{path}: book {name!r} has label {labels[0]!r}; labels must be 0 or 1")
        elif not book.texts:
            yield Problem(name, f"{path}: book {name!r} has no text")
        elif book.chars > MAX_BOOK_TEXT_CHARS:  # the bound of a book file holds for a book made of rows too
            yield Problem(name, f"{path}: book {name!r} has {book.chars:,} characters of text, over the "
                                f"{MAX_BOOK_TEXT_CHARS:,} allowed for one book")
        else:
            yield Book(name, book.text(), str(path), int(labels[0]) if labels else None)
        del book  # not held while the next book is joined


def _demo_books(name: str, role: str) -> list[Book]:
    """The plays of a demo set with the given role (calibration or audit), labels kept."""
    df = datasets.load(name)
    df = df[df["role"] == role]
    return [Book(str(r.id), str(r.text), name, int(r.label)) for r in df.itertuples()]


def _unique(items: Iterable[Book | Problem]) -> Reading:
    """Make book names unique (`name`, `name (2)`, …) in order, so ids never collide, with their bidi and control
    characters shown as escapes (`names.shown_name`), as every name a user's file gives (problems' names too)."""
    seen: dict[str, int] = {}
    for item in items:
        if isinstance(item, Problem):
            yield Problem(shown_name(item.book), item.message)
            continue
        base = shown_name(item.name)
        seen[base] = seen.get(base, 0) + 1
        book = Book(base if seen[base] == 1 else f"{base} ({seen[base]})", item.text, item.source, item.label)
        del item
        yield book
        del book  # not held while the next book is read


def write_uploads(files: dict[str, bytes], folder: Path) -> Source:
    """Make `folder` hold exactly `files` (a removed upload is not read again); returns what to read.

    A lone zip or table is read itself; documents only, the folder; a mix with zips or tables, the list of
    saved files, each read as its own source, so no upload is dropped.
    """
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    saved = []
    for name, data in files.items():
        saved.append(folder / Path(name).name)
        saved[-1].write_bytes(data)
    if len(saved) == 1 and saved[0].suffix.lower() in (".zip", *TABLE_SUFFIXES):
        return saved[0]
    if all(p.suffix.lower() in DOCUMENT_SUFFIXES for p in saved):
        return folder
    return sorted(set(saved))
