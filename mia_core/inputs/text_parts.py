"""Texts to score given a part at a time, so scoring a large input holds one part's rows, not the input's.

A .csv/.tsv/.jsonl input is read twice, a part of its rows at a time (`table_parts`): once now, to refuse it as
`tables.read_texts` would (no rows, no text column, the rows of empty texts) before any model is loaded, and again
while it is scored. Every part is a frame of `id` and `text` as `read_texts` gives them. Other inputs (documents, a
folder, a .json file, a built-in set) are read whole, as before, and cut into parts.

In JSONL a column's type comes from all its values when read whole: ids `1` and `2.5` are "1.0" and "2.5", as is an
id `1` in a column that also has a missing id. The first pass notes each column's kinds of values so the parts write
them so too (`_float_column`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from .table_parts import STREAMED_SUFFIXES, TableParts
from .tables import InputError, is_missing, missing_texts, no_text_column, read_texts, scalar

#: read(rows, chars): the frames of the texts in order, parts of at most `rows` rows and about `chars` characters
#: (None: no bound).
Reader = Callable[[int | None, int | None], Iterator[pd.DataFrame]]


class TextParts:
    """`n` texts of `chars` characters in all, checked, given as frames of `id` and `text` a part at a time."""

    def __init__(self, n: int, chars: int, read: Reader) -> None:
        self.n, self.chars, self._read = n, chars, read

    def parts(self, rows: int | None = None, chars: int | None = None) -> Iterator[pd.DataFrame]:
        """Frames of `id` and `text` in order, each at most `rows` rows and about `chars` characters (None: all)."""
        return self._read(rows, chars)

    def count(self, rows: int, chars: int) -> int:
        """About how many parts of at most `rows` rows and `chars` characters the texts make (at least 1)."""
        return max(1, math.ceil(self.n / rows), math.ceil(self.chars / chars))

    def whole(self) -> pd.DataFrame:
        """All the texts in one frame."""
        frames = list(self.parts())
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def texts(self) -> Iterator[str]:
        """Every text in order, read a part at a time."""
        for part in self.parts():
            yield from part["text"].tolist()


def text_parts(path: str | Path, *, text_column: str = "text") -> TextParts:
    """The texts of an input file or folder, refused now as `read_texts` refuses them, given a part at a time."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() in STREAMED_SUFFIXES:
        return _streamed(path, text_column)
    return frame_parts(read_texts(path, text_column=text_column))


def frame_parts(frame: pd.DataFrame) -> TextParts:
    """Texts already read (a frame with `id` and `text`), given a part at a time."""
    frame = frame[["id", "text"]].reset_index(drop=True)
    lengths = frame["text"].str.len().to_numpy(dtype=np.int64)

    def read(rows: int | None, chars: int | None) -> Iterator[pd.DataFrame]:
        start = 0
        while start < len(frame):
            end = _part_end(lengths, start, rows, chars)
            yield frame.iloc[start:end].reset_index(drop=True)
            start = end

    return TextParts(len(frame), int(lengths.sum()), read)


def _part_end(lengths: np.ndarray, start: int, rows: int | None, chars: int | None) -> int:
    """The end of the part from `start`: at most `rows` texts, up to `chars` characters, at least one text."""
    end = len(lengths) if rows is None else min(len(lengths), start + rows)
    if chars is not None:
        within = np.searchsorted(np.cumsum(lengths[start:end]), chars, side="right")
        end = start + max(1, int(within))
    return end


def _streamed(path: Path, text_column: str) -> TextParts:
    """A table's texts, checked in one pass (the messages of `read_texts`), then read again part by part."""
    table = TableParts(path, (text_column, "id"), text_column=text_column)
    chars, bad = 0, []
    kinds: dict[str, set[str]] = {text_column: set(), "id": set()}
    for part in table:
        for column, values in part.items() if table.suffix == ".jsonl" else ():
            kinds[column].update(map(_kind, values))
        first = table.n - len(next(iter(part.values()), []))
        for i, value in enumerate(map(scalar, part.get(text_column, ())), first + 1):
            if is_missing(value):
                bad.append(i)
            else:
                chars += len(value) if isinstance(value, str) else 1
    n = table.n
    if n == 0:
        raise InputError(f"{path} has no rows")
    if text_column not in table.columns:
        raise no_text_column(path, text_column, table.columns)
    if bad:
        raise missing_texts(path, text_column, bad)
    as_float = {c: table.suffix == ".jsonl" and _float_column(k) for c, k in kinds.items()}

    def read(rows: int | None, size: int | None) -> Iterator[pd.DataFrame]:
        first = 0
        for part in TableParts(path, (text_column, "id"), text_column=text_column, rows=rows or n, chars=size or math.inf):
            texts = [_written(v, as_float[text_column]) for v in part[text_column]]
            ids = part.get("id") or [None] * len(texts)
            ids = [str(first + i + 1) if is_missing(scalar(v)) else _written(v, as_float["id"]) for i, v in enumerate(ids)]
            yield pd.DataFrame({"id": ids, "text": texts})
            first += len(texts)

    return TextParts(n, chars, read)


def _kind(value: Any) -> str:
    """What kind of JSON value a cell holds, as pandas' typing of a column reads it."""
    value = scalar(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "missing"
    if type(value) is int and not -2**63 <= value < 2**64:
        return "other"  # no int64 or uint64 holds it: pandas keeps the column's Python objects
    return {bool: "bool", int: "int", float: "float"}.get(type(value), "other")


def _float_column(kinds: set[str]) -> bool:
    """Whether pandas makes a JSONL column of these kinds of values float64 (numbers with a float or a gap)."""
    return kinds <= {"int", "float", "missing"} and bool(kinds & {"float", "missing"}) and bool(kinds & {"int", "float"})


def _written(value: Any, as_float: bool) -> str:
    """A cell as `read_texts` writes it: a string as it is, else as its column's type prints it."""
    value = scalar(value)
    if isinstance(value, str):
        return value
    return str(float(value)) if as_float and type(value) in (int, float) else str(value)
