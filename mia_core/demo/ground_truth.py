"""Which demo plays the demo-known adapter was trained on: the ground truth a Book audit of the demo can be read against.

`mia demo build` trains the adapter on every member text of the manifest (`build.member_texts`), so a
`demo-books` play with label 1 was in its training and one with label 0 was held out. A run's books get
this truth only when every audited book is a demo play whose snippets are that play's own text (never an
upload that merely borrows a play's name).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..inputs import datasets

#: The demo set whose plays the Book audit page offers as books.
DEMO_BOOKS = "demo-books"


def adapter_training_plays() -> dict[str, tuple[int, str]]:
    """Play id → (1 if in the demo-known adapter's training, else 0; the play's text as the demo books hold it)."""
    plays = datasets.load(DEMO_BOOKS)
    return {str(r.id): (int(r.label), str(r.text)) for r in plays.itertuples()}


def demo_book_truth(books: Sequence[str], read_texts: Callable[[list[str]], Mapping[str, Sequence[str]]],
                    plays: Mapping[str, tuple[int, str]] | None = None) -> dict[str, int] | None:
    """Book → 1 (trained on) or 0 (held out) when every book is a demo play and each snippet is from its text; else None.

    books : the run's audited book names.
    read_texts : books → their audited snippets' texts; called only when every name is a demo play's, so a
        catalogue of uploads is never read for this.
    plays : `adapter_training_plays()` (read when not given).
    """
    names = sorted(set(books))
    plays = adapter_training_plays() if plays is None else plays
    if not names or not set(names) <= set(plays):
        return None
    texts = read_texts(names)
    for book in names:
        found = texts.get(book, ())
        if not len(found) or any(text not in plays[book][1] for text in found):
            return None
    return {book: plays[book][0] for book in names}
