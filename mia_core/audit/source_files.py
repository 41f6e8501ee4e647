"""The book files of a folder or zip, each with a reader that reads it only when called (one book at a time).

A folder or zip is listed, and its declared sizes checked, before any book is read; each book's bytes are read
by its reader, refused by size before they are (a zip entry through a capped stream). A zip inside the zip, and
every other entry that is not a book, get a reader that raises the problem, so nothing is left out without a word.
"""
from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable

from ..inputs import limits
from ..inputs.documents import SUFFIXES as DOCUMENT_SUFFIXES
from ..inputs.documents import DocumentError
from ..inputs.limits import MAX_BOOK_BYTES, MAX_SOURCE_BYTES, ZIP_ERRORS, TooLarge
from ..inputs.tables import InputError

#: Folder names that label the books inside them in a calibration folder or zip.
LABEL_FOLDERS = {"members": 1, "member": 1, "non_members": 0, "non-members": 0, "nonmembers": 0, "non_member": 0}
#: (name inside the source, label from a members/non_members folder or None, the reader of its bytes).
Item = tuple[str, int | None, Callable[[], bytes]]


def folder_items(path: Path) -> list[Item]:
    """(name relative to the folder, label from a members/non_members folder, reader) for each document."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES)
    if not files:
        raise InputError(f"{path}: no {', '.join(DOCUMENT_SUFFIXES)} files in this folder")
    total = sum(p.stat().st_size for p in files)
    if total > MAX_SOURCE_BYTES:
        raise InputError(f"{path}: {total / 1e9:.1f} GB of books is over the {MAX_SOURCE_BYTES / 1e9:.0f} GB limit")
    return [(p.relative_to(path).as_posix(), _label_of(p.relative_to(path).parts), file_reader(p, p.relative_to(path).as_posix()))
            for p in files]


def file_reader(path: Path, name: str):
    """Read a book file, refused by its size before its bytes are read."""
    def read() -> bytes:
        size = path.stat().st_size
        if size > MAX_BOOK_BYTES:
            raise DocumentError(f"{name}: {size / 1e6:.1f} MB is over the {MAX_BOOK_BYTES / 1e6:.0f} MB limit for one book")
        return path.read_bytes()
    return read


def zip_items(path: Path) -> list[Item]:
    """Like `folder_items`, for the documents inside a zip (entries and sizes checked before reading).

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
