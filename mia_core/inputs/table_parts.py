"""A .csv/.tsv/.jsonl table read a part of its rows at a time, so reading a large table costs a part, not the table.

The file passes a table's checks first (`tables.check_size`, `check_head`, then one pass over its bytes for UTF-8
and whitespace, a block at a time), so parsing meets no encoding error and a bad file is refused before any row is
used. CSV/TSV rows then come from pandas' own parser a part at a time, every cell as a string (as `read_table` reads
its text columns: a quoted line break stays in its cell); JSONL rows line by line (`tables.json_row`, numbered as
`str.splitlines` numbers them). A part holds only the columns asked for, `{column: values}`, a cell its row lacks as
NaN (as pandas fills it) or, in CSV, as "" (as pandas fills a text column).

pandas gives a column read whole one type from all its values (`1` beside an empty cell is 1.0, `1` beside `x` is
"1"); a part cannot see them all, so `typed_whole` types a column's distinct values as the whole read would.
"""
from __future__ import annotations

import codecs
import csv
import io
import math
from pathlib import Path
from typing import Any, Hashable, Iterable, Iterator, Sequence

import pandas as pd

from .tables import InputError, blank_error, check_head, check_size, csv_error, json_row, utf8_error

#: The table files read a part at a time (a .json file is one JSON value: it is read whole).
STREAMED_SUFFIXES = (".csv", ".tsv", ".jsonl")
#: Rows and characters a part holds at most (a CSV part is sized from the rows before it, so about).
PART_ROWS = 1 << 14
PART_CHARS = 1 << 22
#: Rows of a table's first CSV part; later parts grow to the budgets by doubling.
FIRST_CSV_ROWS = 64
#: Bytes checked at a time.
BLOCK_BYTES = 1 << 20
Part = dict[str, list]


def check_table_file(path: Path, max_bytes: int | None = None) -> None:
    """Refuse a file as `tables.read_table` would before parsing (size, binary, UTF-8, blank), reading a block at a
    time; the UTF-8 error names the first bad byte and its offset in the file."""
    check_size(path, max_bytes)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, blank = 0, True
    with path.open("rb") as raw:
        block = raw.read(BLOCK_BYTES)
        check_head(path, block)
        while block:
            pending = len(decoder.getstate()[0])  # bytes of a character cut at the last block's end
            try:
                text = decoder.decode(block)
            except UnicodeDecodeError as e:
                start = offset - pending + e.start
                raise utf8_error(path, e.object[e.start], start) from None
            if blank:
                text = text[1:] if offset == 0 and text.startswith("\ufeff") else text
                blank = not text.strip()
            offset += len(block)
            block = raw.read(BLOCK_BYTES)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise utf8_error(path, e.object[e.start], offset - len(e.object) + e.start) from None
    if blank:
        raise blank_error(path)


class TableParts:
    """The rows of one .csv/.tsv/.jsonl file a part at a time (at most `rows` rows and about `chars` characters, by
    default `PART_ROWS` and `PART_CHARS`): iterating yields `{column: values}` for the columns of `wanted` (in JSONL
    every wanted column, NaN where no row has it); `columns` then names all the file's columns, in order, and `n` counts
    the rows read (both complete once the iteration ended). The file is checked when this is made."""

    def __init__(self, path: Path, wanted: Sequence[str], *, text_column: str = "text", max_bytes: int | None = None,
                 rows: int | None = None, chars: int | None = None) -> None:
        self.path, self.wanted, self.text_column = path, list(dict.fromkeys(wanted)), text_column
        self.rows, self.chars = max(1, rows or PART_ROWS), max(1, chars or PART_CHARS)
        self.suffix = path.suffix.lower()
        if self.suffix not in STREAMED_SUFFIXES:
            raise InputError(f"{path}: not a table read in parts (supported: {', '.join(STREAMED_SUFFIXES)})")
        check_table_file(path, max_bytes)
        self.columns: list[Hashable] = []
        self.n = 0

    def __iter__(self) -> Iterator[Part]:
        self.n = 0
        with self.path.open(encoding="utf-8-sig", newline="") as handle:  # newline="": line ends kept as written
            yield from (self._jsonl_parts(handle) if self.suffix == ".jsonl" else self._csv_parts(handle))

    def _csv_parts(self, handle) -> Iterator[Part]:
        """CSV/TSV rows through pandas' parser, every cell as a string, each part sized from the last one's
        characters (at most twice its rows)."""
        sep = "\t" if self.suffix == ".tsv" else ","
        want = FIRST_CSV_ROWS
        try:
            reader = pd.read_csv(handle, sep=sep, dtype=str, keep_default_na=False, iterator=True)
            while True:
                try:
                    chunk = reader.get_chunk(min(want, self.rows))
                except StopIteration:
                    return
                self.columns, self.n = list(chunk.columns), self.n + len(chunk)
                if len(chunk):
                    chars = max(1, int(sum(chunk[c].str.len().sum() for c in chunk.columns)))
                    want = max(1, min(2 * len(chunk), len(chunk) * self.chars // chars))
                    yield {c: chunk[c].tolist() for c in self.wanted if c in chunk.columns}
                del chunk
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
            raise csv_error(self.path, sep, e) from None

    def _jsonl_parts(self, handle) -> Iterator[Part]:
        """JSONL rows, one JSON object per line; only the wanted columns' values are kept."""
        seen: dict[Hashable, None] = {}
        part: Part = {c: [] for c in self.wanted}
        n, size, lineno = 0, 0, 0
        for physical in handle:
            for line in physical.splitlines():  # the lines of `str.splitlines`, as a table read whole counts them
                lineno += 1
                row = json_row(self.path, lineno, line, self.text_column)
                if row is None:
                    continue
                seen.update(dict.fromkeys(row))
                for c in self.wanted:
                    part[c].append(row.get(c, math.nan))
                n, size, self.n = n + 1, size + len(line), self.n + 1
                if n >= self.rows or size >= self.chars:
                    self.columns = list(seen)
                    yield part
                    part, n, size = {c: [] for c in self.wanted}, 0, 0
        self.columns = list(seen)
        if n:
            yield part


def value_key(value: Any) -> Hashable:
    """A key that keeps apart values a set would merge (1, 1.0 and True), for `typed_whole`."""
    return value if isinstance(value, str) else (type(value).__name__, repr(value))


def typed_whole(suffix: str, values: Iterable[Any]) -> dict[Hashable, Any]:
    """Each distinct value of one column (by `value_key`) as pandas types it when the table is read whole: CSV
    cells (strings, "" for an empty one) by pandas' CSV parser, JSON values by `DataFrame.from_records`."""
    distinct = {value_key(v): v for v in values}
    if not distinct:
        return {}
    if suffix == ".jsonl":
        typed = pd.DataFrame.from_records([{"v": v} for v in distinct.values()])["v"].tolist()
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")  # quoted: read back as written
        writer.writerows([["v"], *([v] for v in distinct.values())])
        typed = pd.read_csv(io.StringIO(buffer.getvalue()))["v"].tolist()
    return dict(zip(distinct, typed))
