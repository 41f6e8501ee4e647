"""CSV cells a spreadsheet would run as a formula, neutralised: every CSV written from user text goes through here.

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel, LibreOffice and Google
Sheets as a formula (OWASP "CSV injection"), so a book named `=HYPERLINK(…)` would become a live link in an
auditor's spreadsheet. Such string cells (and column names) get a leading `'`, which spreadsheets show as text.
Numbers are never touched: a score of −1.2 stays the number −1.2.

A carriage return *inside* a cell is the other way in: with `\n` ending rows, Python's CSV writer quotes a cell with
`\n` but not one with a bare `\r`, and readers that take `\r` as a row end split `x\r=1+1` into a new row that starts
with a live `=1+1`. Rows therefore end in `\r\n` (RFC 4180), which makes the writer quote every cell holding either.
"""
from __future__ import annotations

import os
from typing import IO

import pandas as pd
from pandas.api.types import is_object_dtype, is_string_dtype

#: First characters that make a spreadsheet cell a formula (OWASP: = + - @, tab, carriage return).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Row end (RFC 4180): the CSV writer quotes any cell holding one of its characters, so `\r` and `\n` both.
ROW_END = "\r\n"


def safe_cell(value):
    """`'` + value for a string that starts a formula; anything else as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` with formula-starting string cells and column names neutralised; numbers as they are."""
    out = frame.copy()
    for i, dtype in enumerate(out.dtypes):  # by position: column names may repeat
        if is_object_dtype(dtype) or is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
            out.isetitem(i, out.iloc[:, i].astype(object).map(safe_cell))  # text columns only: numbers, dates as they are
    out.columns = [safe_cell(c) for c in out.columns]
    return out


def to_csv_safe(frame: pd.DataFrame, path_or_buf: str | os.PathLike | IO[str] | None = None, **kwargs) -> str | None:
    """`frame.to_csv(path_or_buf, index=False, **kwargs)` after `safe_frame`, rows ending in ROW_END so every cell with
    a line break is quoted: the CSV text when no path is given."""
    return safe_frame(frame).to_csv(path_or_buf, index=False, lineterminator=ROW_END, **kwargs)
