"""DE-COP's passages and their paraphrases (METHODS-API.md §19): read from a table (ours, or BookTection's columns),
checked by the quality gates, and held per book as the JSON text a run stores and hashes.

A tool cannot make valid paraphrases offline — synonym swaps leave the original identifiable by its fluency — so
paraphrases come from the user's table (default, its provenance recorded) or from an LLM through a chat API; never
from word swaps.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..inputs.tables import InputError, is_missing, read_table
from .normalize import normalize

#: Passages one book may have in a quiz (each costs 24 requests): 200.
MAX_QUIZ_PASSAGES = 200
#: Characters of one passage or paraphrase: 4,000 (the authors' longest passages are ≈ 256 tokens ≈ 1,100 characters).
MAX_QUIZ_PASSAGE_CHARS = 4_000
#: Books in one quiz table: 500 (BookTection has 165).
MAX_QUIZ_BOOKS = 500
#: Quality gates (ours, §19): a paraphrase's length in words over the verbatim's, and the longest span of words it may
#: share with the verbatim (normalised) — one of `SHARED_SPAN_WORDS` words or more fails the gate.
LENGTH_RATIO = (0.8, 1.25)
SHARED_SPAN_WORDS = 8
#: BookTection's columns [code README, CSVs]: the four options and the letter of the verbatim.
BOOKTECTION_OPTIONS = ("Example_A", "Example_B", "Example_C", "Example_D")
OURS = ("passage", "paraphrase_1", "paraphrase_2", "paraphrase_3")
#: The column naming who made a row's paraphrases (`mia paraphrase` writes it).
PROVENANCE_COLUMN = "paraphrased_by"


@dataclass(frozen=True)
class QuizPassage:
    """One passage: the verbatim text and its three paraphrases."""

    verbatim: str
    paraphrases: tuple[str, str, str]

    @property
    def options(self) -> tuple[str, ...]:
        """The four options before ordering: 0 is the verbatim."""
        return (self.verbatim, *self.paraphrases)


@dataclass(frozen=True)
class QuizBook:
    """One book's quiz: title, author (None when the table names none), passages, where the paraphrases came from,
    and the passages the gates set aside (with why)."""

    title: str
    author: str | None
    passages: tuple[QuizPassage, ...]
    provenance: str
    excluded: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        """The text a run stores for this book (its SHA-256 is the manifest's)."""
        return json.dumps({"title": self.title, "author": self.author, "provenance": self.provenance,
                           "passages": [[p.verbatim, *p.paraphrases] for p in self.passages],
                           "excluded": list(self.excluded)}, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "QuizBook":
        data = json.loads(text)
        return cls(data["title"], data["author"], tuple(QuizPassage(p[0], tuple(p[1:4])) for p in data["passages"]),
                   data["provenance"], tuple(data.get("excluded", ())))


def _words(text: str) -> list[str]:
    return normalize(text).split()


def shared_span(a: str, b: str, width: int = SHARED_SPAN_WORDS) -> str | None:
    """The first `width`-word span of `b` (normalised) that also occurs in `a`, or None."""
    wa, wb = _words(a), _words(b)
    grams = {tuple(wa[i:i + width]) for i in range(len(wa) - width + 1)}
    return next((" ".join(wb[i:i + width]) for i in range(len(wb) - width + 1) if tuple(wb[i:i + width]) in grams),
                None)


def gate_problem(passage: QuizPassage) -> str | None:
    """Why a passage fails the quality gates (ours, §19), or None: each paraphrase within the length ratio of the
    verbatim (in words) and sharing no span of `SHARED_SPAN_WORDS` words with it."""
    n = len(_words(passage.verbatim))
    if n == 0:
        return "the passage is empty"
    for k, paraphrase in enumerate(passage.paraphrases, 1):
        ratio = len(_words(paraphrase)) / n
        if not LENGTH_RATIO[0] <= ratio <= LENGTH_RATIO[1]:
            return f"paraphrase {k} is {ratio:.2f} times the passage's length (the gate: {LENGTH_RATIO[0]}–" \
                   f"{LENGTH_RATIO[1]})"
        span = shared_span(passage.verbatim, paraphrase)
        if span is not None:
            return f"paraphrase {k} repeats {SHARED_SPAN_WORDS} words of the passage ({span!r})"
    return None


def gated_book(title: str, author: str | None, passages: list[QuizPassage], provenance: str) -> QuizBook:
    """A book of the passages that pass the gates; the others are listed in `excluded` with their reason."""
    kept, excluded = [], []
    for n, passage in enumerate(passages, 1):
        problem = gate_problem(passage)
        if problem is None:
            kept.append(passage)
        else:
            excluded.append(f"passage {n}: {problem}")
    return QuizBook(title, author, tuple(kept), provenance, tuple(excluded))


def _cell(path: Path, row: int, column: str, value) -> str:
    if is_missing(value):
        raise InputError(f"{path}: row {row} has no {column}")
    text = str(value)
    if len(text) > MAX_QUIZ_PASSAGE_CHARS:
        raise InputError(f"{path}: row {row}: {column} has {len(text):,} characters, over the "
                         f"{MAX_QUIZ_PASSAGE_CHARS:,} a quiz passage may have")
    return text


def _row_passage(path: Path, row: int, record: dict, booktection: bool) -> QuizPassage:
    if not booktection:
        texts = [_cell(path, row, c, record.get(c)) for c in OURS]
        return QuizPassage(texts[0], (texts[1], texts[2], texts[3]))
    options = [_cell(path, row, c, record.get(c)) for c in BOOKTECTION_OPTIONS]
    if is_missing(record.get("Answer")):
        raise InputError(f"{path}: row {row} has no Answer (the letter of the verbatim passage)")
    answer = str(record.get("Answer", "")).strip().upper()
    if answer not in ("A", "B", "C", "D"):
        raise InputError(f"{path}: row {row}: Answer is {record.get('Answer')!r}, not one of A, B, C, D (the letter "
                         "of the verbatim passage)")
    verbatim = options.pop("ABCD".index(answer))
    return QuizPassage(verbatim, (options[0], options[1], options[2]))


def read_quiz_books(path: str | Path, *, provenance: str | None) -> list[QuizBook]:
    """The books of a quiz table, passages in order, each through the gates.

    Columns: `book`, optional `author`, and `passage`, `paraphrase_1`…`paraphrase_3` (ours), or BookTection's `ID`
    (the book), `Example_A`…`Example_D` and `Answer` (the verbatim's letter; never assumed to be A). Who made the
    paraphrases is `provenance`, else the table's `paraphrased_by` column (one value for the whole table)."""
    path = Path(path)
    table = read_table(path, text_column="book", str_columns=("ID", "author", PROVENANCE_COLUMN, *OURS,
                                                              *BOOKTECTION_OPTIONS))
    provenance = provenance or _table_provenance(path, table)
    booktection = all(c in table.columns for c in (*BOOKTECTION_OPTIONS, "Answer"))
    book_column = "ID" if booktection and "book" not in table.columns else "book"
    needed = [book_column] + ([] if booktection else list(OURS))
    absent = [c for c in needed if c not in table.columns]
    if absent:
        raise InputError(f"{path} has no column {', '.join(repr(c) for c in absent)}: a quiz table has book, "
                         "passage, paraphrase_1, paraphrase_2, paraphrase_3 (optionally author), or BookTection's "
                         "ID, Example_A…Example_D and Answer")
    books: dict[str, tuple[str | None, list[QuizPassage]]] = {}
    for row, record in enumerate(table.to_dict("records"), 1):
        title = _cell(path, row, book_column, record.get(book_column)).strip()
        author = None if is_missing(record.get("author")) else str(record["author"]).strip()
        entry = books.setdefault(title, (author, []))
        if len(entry[1]) >= MAX_QUIZ_PASSAGES:
            raise InputError(f"{path}: book {title!r} has more than the {MAX_QUIZ_PASSAGES} passages a quiz may have")
        entry[1].append(_row_passage(path, row, record, booktection))
        if len(books) > MAX_QUIZ_BOOKS:
            raise InputError(f"{path} has more than the {MAX_QUIZ_BOOKS} books a quiz table may have")
    if not books:
        raise InputError(f"{path} has no passages")
    return [gated_book(title, author, passages, provenance) for title, (author, passages) in books.items()]


def _table_provenance(path: Path, table: pd.DataFrame) -> str:
    """The one value of the table's `paraphrased_by` column; an InputError when there is none, or more than one."""
    values = set(table[PROVENANCE_COLUMN].dropna().astype(str)) if PROVENANCE_COLUMN in table.columns else set()
    if len(values) != 1:
        raise InputError(f"{path}: say who made the paraphrases (--paraphrases-from), since its "
                         f"'{PROVENANCE_COLUMN}' column {'is absent or empty' if not values else 'names several'}")
    return values.pop()


def quiz_table(books: list[QuizBook]) -> pd.DataFrame:
    """Books back as a table of our columns (to write paraphrases an API made, for the user to check and reuse)."""
    return pd.DataFrame([[b.title, b.author, p.verbatim, *p.paraphrases] for b in books for p in b.passages],
                        columns=["book", "author", *OURS])

