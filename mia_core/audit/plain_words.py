"""Each audited book in one plain-language paragraph: what was measured, what it shows, what it cannot show.

For readers of a report who are not statisticians (copyright counsel, editors): the numbers of the books table in
sentences, with the limit that matters most for that book's verdict said beside it, not pages later.
"""
from __future__ import annotations

import html

import pandas as pd

from ..methods import get_method
from .books import VERDICT_SHORT
from .calibration import Calibration
from .jobs import AuditResult

#: Books described in plain words in a report (a catalogue's others are in the table and books.csv).
PARAGRAPHS = 200

#: What each verdict cannot show (or why there is none), in a sentence; {tpr} is the calibration's TPR.
CANNOT = {
    "evidence": "It cannot show that this very book was trained on rather than quotations, summaries or "
                "near-duplicates of it, nor how often the model saw it; it is statistical evidence, not a record.",
    "weak": "The share of the book seen may still be zero (its interval reaches 0): more snippets, or more "
            "calibration books, would tell.",
    "inconclusive": "It cannot decide either way: the hits say the book scores above unseen books, the test of all "
                    "its snippet scores does not reach significance with these counts; its verdict says about how "
                    "many more snippets, or known non-member calibration snippets, would decide.",
    "none": "It cannot show that the book was unseen: at this threshold the method finds only {tpr} of the known "
            "members' snippets, and a book seen once may leave no trace.",
    "uninformative": "The method does not separate the calibration books, so these numbers carry no evidence either "
                     "way.",
    "weak_calibration": "The calibration's false-positive rate is not pinned down (too few known non-member "
                        "snippets), so no verdict rests on it; see the calibration section for what would fix it.",
    "too_few": "With this book's and the calibration's snippet counts the book test cannot reach significance after "
               "the correction for the number of books; longer books (or smaller snippets) and more calibration "
               "books would.",
}


def book_paragraph(row, key: str, cal: Calibration, *, snippet_words: int, method: str, model: str) -> str:
    """One book (a row of an `analyse_books` table, its verdict key) in three plain sentences, as text."""
    hits = round(row.rate * row.n_snippets)
    measured = (f"{row.n_snippets:,} snippets of {snippet_words} words, each scored with {method} under {model}; "
                f"{hits:,} of them ({row.rate:.0%}, interval {row.rate_lo:.0%}–{row.rate_hi:.0%} over "
                f"{row.n_effective:.1f} effective snippets) scored at or above a threshold that flags {cal.fpr:.1%} of "
                f"the known non-member snippets and {cal.tpr:.1%} of the known member snippets.")
    shows = {
        "evidence": f"Its scores sit above those of books the model never saw (adjusted p {row.p_adj:.2g}), and the "
                    f"estimated share of the book seen in training is {row.prevalence:.0%} ({row.prevalence_lo:.0%}–"
                    f"{row.prevalence_hi:.0%}): evidence consistent with training on this book.",
        "weak": f"Its scores sit above those of unseen books (adjusted p {row.p_adj:.2g}), but the estimated share "
                f"seen, {_pct(row.prevalence)} ({_pct(row.prevalence_lo)}–{_pct(row.prevalence_hi)}), may be none.",
        "inconclusive": f"Its share of flagged snippets sits above the calibration's false-positive rate (estimated "
                        f"share seen {_pct(row.prevalence)}, {_pct(row.prevalence_lo)}–{_pct(row.prevalence_hi)}), "
                        f"but the test of all its snippet scores against unseen books does not reach significance "
                        f"(adjusted p {row.p_adj:.2g}): inconclusive, not a sign that the book is clean.",
        "none": f"Its scores cannot be told apart from those of books the model never saw (adjusted p "
                f"{row.p_adj:.2g}): no evidence of training was found.",
    }.get(key, f"No verdict is given: {VERDICT_SHORT[key]}.")
    cannot = CANNOT[key].format(tpr=f"{cal.tpr:.0%}")
    return f"What was measured: {measured} What it shows: {shows} What it cannot show: {cannot}"


def _pct(value) -> str:
    return "–" if pd.isna(value) else f"{value:.0%}"


def paragraphs_html(result: AuditResult, keys: list[str]) -> str:
    """The report's books in plain words (`book_paragraph`), the first PARAGRAPHS of them, each after its verdict in
    full (the words and threshold FPR of books.csv), every name escaped."""
    method, model = get_method(result.settings.method).label, result.run["model"]
    items = [f"<p><b>{html.escape(str(row.book))}</b>: {html.escape(str(row.verdict))}. "  # as books.csv has it
             + html.escape(book_paragraph(row, key, result.calibration, snippet_words=result.settings.snippet_words,
                                          method=method, model=model)) + "</p>"
             for row, key in list(zip(result.books.itertuples(), keys))[:PARAGRAPHS]]
    more = len(keys) - PARAGRAPHS
    return ("<h3>Each book in plain words</h3>" + "".join(items)
            + (f"<p class='note'>… and {more:,} more books: their numbers are in the table above and in books.csv.</p>"
               if more > 0 else ""))
