"""Read the user's input files for `mia score` / `mia eval`, rejecting bad input with one clear line.

Accepted: `.txt`/`.md`/`.pdf`/`.epub` (the whole document is one text, extracted as the dashboard
does, `documents.document_text`), a directory of such files (one text per file, sorted by name),
`.csv`, `.tsv`, `.jsonl` (one object per line) and `.json` (a list of objects or strings, an
object of columns, or an object of records). Every problem raises
`InputError` whose single-line message names the file; row numbers in messages count from 1.
"""
from __future__ import annotations

import codecs
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .documents import DocumentError, document_text
from .limits import MAX_BOOK_BYTES, MAX_INPUT_BYTES

TEXT_SUFFIXES = (".txt", ".md")
DOCUMENT_SUFFIXES = (".pdf", ".epub")
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")
SUPPORTED = TEXT_SUFFIXES + DOCUMENT_SUFFIXES + TABLE_SUFFIXES
BINARY_SIGNATURES = (b"%PDF", b"\x89PNG", b"PK\x03\x04", b"\x1f\x8b", b"GIF8", b"\xff\xd8\xff",
                     b"\xd0\xcf\x11\xe0", b"BZh", b"7z\xbc\xaf", b"\x7fELF", b"\xfd7zXZ")


class InputError(ValueError):
    """A user input file that cannot be used; the message names the file and fits on one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).splitlines()))


def shown(values: list[Any], limit: int) -> str:
    """Comma-join the first `limit` values, noting how many more there are, to keep messages short."""
    more = f" (+{len(values) - limit} more)" if len(values) > limit else ""
    return ", ".join(str(v) for v in values[:limit]) + more


def scalar(value: Any) -> Any:
    """Unwrap numpy scalars so messages show `2`, not `np.int64(2)`."""
    return value.item() if isinstance(value, np.generic) else value


def check_size(path: Path, max_bytes: int | None = None) -> int:
    """A file's size, refused over `max_bytes` (default `MAX_INPUT_BYTES`) or at zero."""
    max_bytes = MAX_INPUT_BYTES if max_bytes is None else max_bytes
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(f"{path} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB input limit")
    if size == 0:
        raise InputError(f"{path} is empty")
    return size


def check_head(path: Path, head: bytes) -> None:
    """Refuse a file whose first bytes (8 KB are read) say UTF-16 or binary."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path} looks binary (UTF-16 text?); save it as UTF-8")
    if b"\x00" in head[:8192] or head.startswith(BINARY_SIGNATURES):
        raise InputError(f"{path} looks binary, not text; expected {', '.join(SUPPORTED)} text")


def utf8_error(path: Path, byte: int, offset: int) -> InputError:
    """The refusal of a file that is not UTF-8: the first bad byte and its offset in the file."""
    return InputError(f"{path} is not valid UTF-8 (byte 0x{byte:02x} at offset {offset}); save it as UTF-8")


def blank_error(path: Path) -> InputError:
    """The refusal of a file of whitespace only."""
    return InputError(f"{path} is empty (only whitespace)")


def _read_text_file(path: Path, max_bytes: int | None = None) -> str:
    """Return a file's text after the size (default `MAX_INPUT_BYTES`), emptiness, binary and UTF-8 checks."""
    check_size(path, max_bytes)
    data = path.read_bytes()
    check_head(path, data[:8192])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)  # utf-8-sig counts after the BOM
        raise utf8_error(path, data[start], start) from None
    if not text.strip():
        raise blank_error(path)
    return text


def _read_document(path: Path) -> str:
    """A .txt/.md file's text, or a .pdf/.epub document's text (one book's bounds), as an InputError when unusable."""
    if path.suffix.lower() in TEXT_SUFFIXES:
        return _read_text_file(path)
    size = path.stat().st_size
    if size > MAX_BOOK_BYTES:
        raise InputError(f"{path} is {size / 1e6:.1f} MB, over the {MAX_BOOK_BYTES / 1e6:.0f} MB limit for a document")
    try:
        return document_text(str(path), path.read_bytes(), max_bytes=MAX_BOOK_BYTES)
    except DocumentError as err:
        raise InputError(str(err)) from None


def _read_dir(path: Path) -> pd.DataFrame:
    """One text per .txt/.md/.pdf/.epub file directly inside `path`, sorted by name, id = file name."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES + DOCUMENT_SUFFIXES)
    if not files:
        raise InputError(f"{path} is a directory with no .txt, .md, .pdf or .epub files")
    total = sum(p.stat().st_size for p in files)
    if total > MAX_INPUT_BYTES:
        raise InputError(f"{path} holds {total / 1e6:.1f} MB of documents, over the {MAX_INPUT_BYTES / 1e6:.0f} MB limit")
    return pd.DataFrame({"id": [p.name for p in files], "text": [_read_document(p) for p in files]})


def _read_csv(path: Path, content: str, sep: str, str_columns: tuple[str, ...]) -> pd.DataFrame:
    """Parse CSV/TSV; `str_columns` (text, id…) are read as str so a literal "NA" stays a text."""
    try:
        df = pd.read_csv(io.StringIO(content), sep=sep)
        keep = [c for c in dict.fromkeys(str_columns) if c in df.columns]
        if keep:
            raw = pd.read_csv(io.StringIO(content), sep=sep, usecols=keep, dtype=str, keep_default_na=False)
            if len(raw) != len(df):
                raise ValueError("rows could not be matched up; check the quoting")
            for c in keep:
                df[c] = raw[c]
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise csv_error(path, sep, e) from None
    return df


def csv_error(path: Path, sep: str, err: Exception) -> InputError:
    """The refusal of a file pandas could not parse as CSV (TSV with a tab separator)."""
    return InputError(f"{path} is not a valid {'TSV' if sep == chr(9) else 'CSV'} file: {err}")


def json_row(path: Path, lineno: int, line: str, text_column: str) -> dict[str, Any] | None:
    """One JSONL line as a row (a string is the text column's), None for a blank line; errors name the line."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{path} line {lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise InputError(f"{path} line {lineno}: JSON nested too deeply") from None
    if isinstance(obj, str):
        obj = {text_column: obj}
    if not isinstance(obj, dict):
        raise InputError(f"{path} line {lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _read_jsonl(path: Path, content: str, text_column: str) -> pd.DataFrame:
    """Parse one JSON object (or string) per non-blank line, reporting the line of any error."""
    rows = (json_row(path, lineno, line, text_column) for lineno, line in enumerate(content.splitlines(), 1))
    return pd.DataFrame.from_records([row for row in rows if row is not None])


def _read_json(path: Path, content: str, text_column: str) -> pd.DataFrame:
    """Parse a JSON list of objects/strings, an object of columns, or an object of keyed records."""
    try:
        obj = json.loads(content)
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    if isinstance(obj, dict) and len(obj) == 1 and isinstance(next(iter(obj.values())), list):
        inner = next(iter(obj.values()))
        if inner and all(isinstance(r, dict) for r in inner):
            obj = inner  # {"data": [{...}, ...]}
    if isinstance(obj, list):
        if all(isinstance(r, dict) for r in obj):
            return pd.DataFrame.from_records(obj)
        if all(isinstance(r, str) for r in obj):
            return pd.DataFrame({text_column: obj})
        raise InputError(f"{path}: expected a JSON list of objects or of strings")
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        return pd.DataFrame([{"id": k, **v} for k, v in obj.items()])
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        lengths = {k: len(v) for k, v in obj.items()}
        if len(set(lengths.values())) > 1:
            raise InputError(f"{path}: JSON columns have different lengths ({shown(list(lengths.items()), 5)})")
        return pd.DataFrame(obj)
    raise InputError(f"{path}: expected a JSON list of records, an object of lists, or an object of records")


def _load(path: Path, text_column: str) -> pd.DataFrame:
    """Dispatch on the suffix to a parser; returns the raw table."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        return _read_dir(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise InputError(f"{path}: unsupported file type '{suffix or '(none)'}' "
                         f"(supported: {', '.join(SUPPORTED)}, or a directory of .txt/.md/.pdf/.epub files)")
    if suffix in TEXT_SUFFIXES + DOCUMENT_SUFFIXES:
        return pd.DataFrame({"id": [path.name], "text": [_read_document(path)]})
    return read_table(path, text_column=text_column)


def read_table(path: Path, *, text_column: str = "text", str_columns: tuple[str, ...] = ("id",),
               max_bytes: int | None = None) -> pd.DataFrame:
    """A .csv/.tsv/.jsonl/.json file as a raw table (also for book tables); every problem is an InputError naming it."""
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"{path}: not a table (supported: {', '.join(TABLE_SUFFIXES)})")
    content = _read_text_file(path, max_bytes)
    if suffix in (".csv", ".tsv"):
        return _read_csv(path, content, "\t" if suffix == ".tsv" else ",", (text_column, *str_columns))
    reader = _read_jsonl if suffix == ".jsonl" else _read_json
    return reader(path, content, text_column)


def is_missing(value: Any) -> bool:
    """True for None/NaN/empty-or-whitespace strings and non-scalar values: nothing to score."""
    if value is None or value is pd.NA or isinstance(value, (list, dict)):
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def no_text_column(path: Path, text_column: str, columns: list) -> InputError:
    """The refusal of a table without the text column, naming the columns it has."""
    cols = [repr(str(c)) for c in columns]
    return InputError(f"{path} has no text column '{text_column}' (columns: {shown(cols, 20)}); "
                      "choose one with --text-column")


def missing_texts(path: Path, source: str, bad: list[int]) -> InputError:
    """The refusal of a table with empty or missing texts, naming the first rows (counted from 1)."""
    return InputError(f"{path}: empty or missing text in column '{source}' at row(s) {shown(bad, 5)}")


def read_texts(path: str | Path, *, text_column: str = "text") -> pd.DataFrame:
    """Read texts to score: columns `id` and `text` (str) first, then the file's other columns."""
    path = Path(path)
    df = _load(path, text_column)
    if len(df) == 0:
        raise InputError(f"{path} has no rows")
    source = text_column if path.is_file() and path.suffix.lower() in TABLE_SUFFIXES else "text"
    if source not in df.columns:
        raise no_text_column(path, text_column, list(df.columns))
    values = [scalar(v) for v in df[source].tolist()]
    bad = [i + 1 for i, v in enumerate(values) if is_missing(v)]
    if bad:
        raise missing_texts(path, source, bad)
    df = df.reset_index(drop=True)
    df["text"] = [v if isinstance(v, str) else str(v) for v in values]
    if "id" in df.columns:
        ids = [scalar(v) for v in df["id"].tolist()]
        df["id"] = [str(i + 1) if is_missing(v) else str(v) for i, v in enumerate(ids)]
    else:
        df["id"] = [str(i + 1) for i in range(len(df))]
    return df[["id", "text"] + [c for c in df.columns if c not in ("id", "text")]]


def _label(value: Any) -> int | None:
    """Map 0/1 numbers, bools and "0"/"1" strings to 0/1; anything else is None (invalid)."""
    value = scalar(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    return None


def read_labelled(path: str | Path, *, text_column: str = "text", label_column: str = "label") -> pd.DataFrame:
    """Read texts with 0/1 membership labels (1 = member) for `mia eval`; both classes required."""
    df = read_texts(path, text_column=text_column)
    if label_column not in df.columns:
        cols = [repr(str(c)) for c in df.columns]
        raise InputError(f"{path} has no label column '{label_column}' (columns: {shown(cols, 20)}); "
                         "choose one with --label-column")
    raw = df[label_column].tolist()
    labels = [_label(v) for v in raw]
    bad = [f"row {i + 1}: {scalar(v)!r:.40}" for i, (v, lab) in enumerate(zip(raw, labels)) if lab is None]
    if bad:
        raise InputError(f"{path}: labels in column '{label_column}' must be 0 or 1 (1 = member); "
                         f"got {shown(bad, 3)}")
    classes = set(labels)
    if len(classes) < 2:
        raise InputError(f"only one class (label {classes.pop()}) in {path}: "
                         "evaluation needs members and non-members")
    df["label"] = np.asarray(labels, dtype=np.int64)
    return df
