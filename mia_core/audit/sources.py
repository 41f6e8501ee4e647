"""Books in: files (.txt/.md/.pdf/.epub), folders and zips of them, tables with `book`/`text` columns, demo sets,
and several uploaded files of those kinds at once.

A book that cannot be read becomes a `Problem` (named, with the reason) and the others go on; only a
source with no usable book at all is an error. Calibration sets also carry a member label per book.
Sizes are bounded by `inputs.limits` (zips by their declared sizes before anything is inflated).
"""
from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..inputs import datasets, limits
from ..inputs.documents import SUFFIXES as DOCUMENT_SUFFIXES
from ..inputs.documents import DocumentError, document_text
from ..inputs.limits import MAX_BOOK_BYTES, MAX_BOOK_TEXT_CHARS, MAX_SOURCE_BYTES, ZIP_ERRORS, TooLarge
from ..inputs.tables import TABLE_SUFFIXES, InputError, read_table
from ..names import shown_name

#: Folder names that label the books inside them in a calibration folder or zip.
LABEL_FOLDERS = {"members": 1, "member": 1, "non_members": 0, "non-members": 0, "nonmembers": 0, "non_member": 0}
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


@dataclass(frozen=True)
class AuditInputs:
    """Everything an audit reads: the books to audit, the calibration books, and (book, role, message) problems."""

    books: list[Book]
    calibration: list[Book]
    problems: list[tuple[str, str, str]]


#: A file, folder, table, zip or demo set name, or several uploaded files (see `write_uploads`).
Source = str | Path | list[Path]


def read_audit_inputs(books: Source, calibration: Source) -> AuditInputs:
    """Both sets of books, with every unreadable book named as a problem (the one reader of the page, CLI and jobs)."""
    cal_books, cal_problems = read_calibration(calibration)
    audit_books, audit_problems = read_books(books)
    return AuditInputs(audit_books, cal_books, problem_rows(cal_problems, "calibration") + problem_rows(audit_problems, "audit"))


def problem_rows(problems: list[Problem | tuple], role: str) -> list[tuple[str, str, str]]:
    """(book, role, message) rows as the results store keeps them; rows already in that form pass through."""
    return [(p.book, role, p.message) if isinstance(p, Problem) else tuple(p) for p in problems]


def read_books(source: Source) -> tuple[list[Book], list[Problem]]:
    """Books to audit from a file, folder, zip, table, several uploads, or the audit half of a demo set."""
    books, problems = _read_source(source, role="audit")
    if not books:
        raise InputError(f"{_shown(source)}: no readable book" + (f" ({problems[0].message})" if problems else ""))
    return books, problems


def read_calibration(source: Source) -> tuple[list[Book], list[Problem]]:
    """Known member (label 1) and known non-member (label 0) books; both classes are required.

    A table needs a `label` column (one label per book); a folder or zip needs `members/` and
    `non_members/` sub-folders; `demo-books` gives its calibration plays.
    """
    books, problems = _read_source(source, role="calibration")
    unlabelled = [b.name for b in books if b.label is None]
    if unlabelled:
        raise InputError(f"{_shown(source)}: calibration books need labels (1 = member, 0 = non-member); none for "
                         f"{', '.join(unlabelled[:3])}. Use a table with a 'label' column or members/ and non_members/ folders")
    classes = {b.label for b in books}
    if classes != {0, 1}:
        have = "no book" if not classes else f"only {'members' if classes == {1} else 'non-members'}"
        raise InputError(f"{_shown(source)}: the calibration set has {have}; it needs known member and known non-member books")
    return books, problems


def _shown(source: Source) -> str:
    """A source as named in messages: several uploads by their file names."""
    return f"the uploads ({', '.join(p.name for p in source)})" if isinstance(source, list) else str(source)


def _read_source(source: Source, *, role: str) -> tuple[list[Book], list[Problem]]:
    """Dispatch on what `source` is; books get unique names; the text kept is bounded by MAX_SOURCE_BYTES."""
    if isinstance(source, list):
        return _unique(*_read_several(source, role))
    if str(source) in DEMO_SETS and not Path(source).exists():
        return _demo_books(str(source), role), []
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder (or built-in set: {', '.join(DEMO_SETS)})")
    return _unique(*_read_path(path))


def _read_several(paths: list[Path], role: str) -> tuple[list[Book], list[Problem]]:
    """Each file as its own source; one that cannot be read at all (a bad zip or table) is a problem named by its file."""
    books, problems, total = [], [], 0
    for path in paths:
        try:
            found, trouble = _read_source(path, role=role)
        except InputError as err:
            problems.append(Problem(path.name, str(err).replace(str(path), path.name)))
            continue
        books += found
        problems += trouble
        total = _check_total(total, found, paths)
    return books, problems


def _check_total(total: int, books: list[Book], source: Source) -> int:
    """`total` plus the text of `books`, refused over MAX_SOURCE_BYTES (characters read, whatever the files claimed)."""
    total += sum(len(b.text) for b in books)
    if total > MAX_SOURCE_BYTES:
        raise InputError(f"{_shown(source)}: more than {MAX_SOURCE_BYTES / 1e9:.0f} GB of text in all, the limit for one source")
    return total


def _read_path(path: Path) -> tuple[list[Book], list[Problem]]:
    """The books of one file, folder, zip or table."""
    if path.is_dir():
        items = _folder_items(path)
    elif path.suffix.lower() == ".zip":
        items = _zip_items(path)
    elif path.suffix.lower() in TABLE_SUFFIXES:
        return _table_books(path)
    else:
        items = [(path.name, None, _file_reader(path, path.name))]
    single_file = path.is_file() and path.suffix.lower() != ".zip"
    books, problems, total = [], [], 0
    for name, label, read in items:
        try:
            text = document_text(name, read(), max_bytes=MAX_BOOK_BYTES)
            books.append(Book(PurePosixPath(name).stem, text, str(path) if single_file else f"{path}/{name}", label))
            total = _check_total(total, books[-1:], path)
        except (DocumentError, OSError) as err:
            problems.append(Problem(PurePosixPath(name).stem, str(err)))
        except ZIP_ERRORS as err:  # InputError from _check_total is not one of these: it stops the source
            if isinstance(err, InputError):
                raise
            problems.append(Problem(PurePosixPath(name).stem, f"{name}: not readable from the zip (damaged or in a "
                                                              "compression this reader lacks); unzip it and add the file"))
    return books, problems


def _folder_items(path: Path) -> list:
    """(name relative to the folder, label from a members/non_members folder, reader) for each document."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES)
    if not files:
        raise InputError(f"{path}: no {', '.join(DOCUMENT_SUFFIXES)} files in this folder")
    total = sum(p.stat().st_size for p in files)
    if total > MAX_SOURCE_BYTES:
        raise InputError(f"{path}: {total / 1e9:.1f} GB of books is over the {MAX_SOURCE_BYTES / 1e9:.0f} GB limit")
    return [(p.relative_to(path).as_posix(), _label_of(p.relative_to(path).parts), _file_reader(p, p.relative_to(path).as_posix()))
            for p in files]


def _file_reader(path: Path, name: str):
    """Read a book file, refused by its size before its bytes are read."""
    def read() -> bytes:
        size = path.stat().st_size
        if size > MAX_BOOK_BYTES:
            raise DocumentError(f"{name}: {size / 1e6:.1f} MB is over the {MAX_BOOK_BYTES / 1e6:.0f} MB limit for one book")
        return path.read_bytes()
    return read


def _zip_items(path: Path) -> list:
    """Like `_folder_items`, for the documents inside a zip (entries and sizes checked before reading).

    A zip inside the zip is named as a problem, never opened (no nesting of bombs); so is every other entry that is
    not a book (an image, a .docx), so nothing in the zip is left out without a word. Hidden files (`.DS_Store`) and
    macOS's `__MACOSX` folder are not books anyone put there: passed over.
    """
    try:
        archive = limits.open_zip(path)
    except TooLarge as err:
        raise InputError(f"{path}: {err}") from None
    except ZIP_ERRORS:
        raise InputError(f"{path}: not a readable zip file") from None
    _utf8_names(archive)
    entries = sorted((i for i in archive.infolist() if not i.is_dir() and "__MACOSX" not in i.filename
                      and not PurePosixPath(i.filename).name.startswith(".")), key=lambda i: i.filename)
    infos = [i for i in entries if PurePosixPath(i.filename).suffix.lower() in DOCUMENT_SUFFIXES]
    nested = [i for i in entries if PurePosixPath(i.filename).suffix.lower() == ".zip"]
    others = [i for i in entries if PurePosixPath(i.filename).suffix.lower() not in (*DOCUMENT_SUFFIXES, ".zip")]
    if not infos and not nested:
        raise InputError(f"{path}: no {', '.join(DOCUMENT_SUFFIXES)} files in this zip")
    try:
        limits.check_declared(infos, MAX_SOURCE_BYTES, "one source")
    except TooLarge as err:
        raise InputError(f"{path}: {err}") from None
    return ([(i.filename, _label_of(PurePosixPath(i.filename).parts), _zip_reader(archive, i)) for i in infos]
            + [(i.filename, None, _nested_zip(i.filename)) for i in nested]
            + [(i.filename, None, _not_a_book(i.filename)) for i in others])


def _utf8_names(archive: zipfile.ZipFile) -> None:
    """Entry names stored as UTF-8 without the zip's UTF-8 flag (many zip tools) read as UTF-8, not as the CP437
    the format assumes (a name holding U+202E arrived as `ΓÇ«evil`); reading an entry still uses its stored name."""
    for info in archive.infolist():
        if not info.flag_bits & 0x800:
            try:
                info.filename = info.filename.encode("cp437").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):  # CP437 indeed (or not UTF-8): as stored
                continue


def _zip_reader(archive: zipfile.ZipFile, info: zipfile.ZipInfo):
    def read() -> bytes:
        try:
            return limits.read_capped(archive, info, MAX_BOOK_BYTES)
        except TooLarge as err:
            raise DocumentError(f"{info.filename}: {err} for one book") from None
    return read


def _nested_zip(name: str):
    def read() -> bytes:
        raise DocumentError(f"{name}: a zip inside a zip is not read; unzip it and add its books")
    return read


def _not_a_book(name: str):
    def read() -> bytes:
        kind = PurePosixPath(name).suffix or "a file without an extension"
        raise DocumentError(f"{name}: not a book ({kind}); books are {', '.join(DOCUMENT_SUFFIXES)} files")
    return read


def _label_of(parts: tuple[str, ...]) -> int | None:
    """1/0 when a parent folder is called members/non_members (any depth), else None."""
    for part in parts[:-1]:
        if part.lower() in LABEL_FOLDERS:
            return LABEL_FOLDERS[part.lower()]
    return None


def _table_books(path: Path) -> tuple[list[Book], list[Problem]]:
    """Rows grouped by `book` in file order, their `text` joined by blank lines; `label` if present."""
    df = read_table(path, str_columns=("book",), max_bytes=MAX_SOURCE_BYTES)
    missing = [c for c in ("book", "text") if c not in df.columns]
    if missing:
        raise InputError(f"{path}: needs columns 'book' and 'text' (missing {', '.join(missing)}; "
                         f"columns: {', '.join(map(str, df.columns[:10]))})")
    books, problems = [], []
    for name, rows in df.groupby(df["book"].astype(str), sort=False):
        text = "\n\n".join(str(t) for t in rows["text"] if isinstance(t, str) and t.strip())
        labels = set(rows["label"].dropna().tolist()) if "label" in rows else set()
        if not name.strip():
            problems.append(Problem("(no name)", f"{path}: {len(rows)} row(s) with an empty 'book' cell; name every book"))
        elif len(labels) > 1:
            problems.append(Problem(name, f"{path}: book {name!r} has rows with different labels {sorted(labels)}"))
        elif labels and not labels <= {0, 1, "0", "1"}:
            problems.append(Problem(name, f"{path}: book {name!r} has label {labels.pop()!r}; labels must be 0 or 1"))
        elif not text:
            problems.append(Problem(name, f"{path}: book {name!r} has no text"))
        elif len(text) > MAX_BOOK_TEXT_CHARS:  # the bound of a book file holds for a book made of rows too
            problems.append(Problem(name, f"{path}: book {name!r} has {len(text):,} characters of text, over the "
                                          f"{MAX_BOOK_TEXT_CHARS:,} allowed for one book"))
        else:
            books.append(Book(name, text, str(path), int(labels.pop()) if labels else None))
    return books, problems


def _demo_books(name: str, role: str) -> list[Book]:
    """The plays of a demo set with the given role (calibration or audit), labels kept."""
    df = datasets.load(name)
    df = df[df["role"] == role]
    return [Book(str(r.id), str(r.text), name, int(r.label)) for r in df.itertuples()]


def _unique(books: list[Book], problems: list[Problem]) -> tuple[list[Book], list[Problem]]:
    """Make book names unique (`name`, `name (2)`, …) in order, so ids never collide, with their bidi and control
    characters shown as escapes (`names.shown_name`), as every name a user's file gives."""
    seen: dict[str, int] = {}
    out = []
    for book in books:
        base = shown_name(book.name)
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base} ({seen[base]})"
        out.append(Book(name, book.text, book.source, book.label))
    return out, [Problem(shown_name(p.book), p.message) for p in problems]


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
